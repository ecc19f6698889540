// HttpFront's pure helpers: which --http hosts are loopback (the binding rule), the default
// connection limit under a descriptor limit, and which requests API keys leave open.
#include "integrator/http_front.hpp"

#include <gtest/gtest.h>

namespace search {
namespace {

TEST(HttpFront, LoopbackHostsAreOnlyLoopback) {
  for (const char* host : {"localhost", "127.0.0.1", "127.1.2.3", "127.255.255.254", "::1", "[::1]", "0:0:0:0:0:0:0:1"})
    EXPECT_TRUE(IsLoopbackHttpHost(host)) << host;
  for (const char* host : {"0.0.0.0", "::", "[::]", "10.0.0.1", "128.0.0.1", "192.168.1.2", "::ffff:127.0.0.1",
                           "example.com", "localhost.example.com", "", "127.0.0.1 ", "1"})
    EXPECT_FALSE(IsLoopbackHttpHost(host)) << host;
}

TEST(HttpFront, DefaultMaxConnectionsKeepsDescriptorsForTheRest) {
  EXPECT_EQ(DefaultMaxConnections(1024), 768u);   // an eighth would be 128: 256 kept
  EXPECT_EQ(DefaultMaxConnections(4352), 3808u);  // an eighth kept
  EXPECT_EQ(DefaultMaxConnections(1048576), 917504u);
  EXPECT_EQ(DefaultMaxConnections(160), 16u);  // too few descriptors: a floor of 16
  EXPECT_EQ(DefaultMaxConnections(0), 16u);
}

TEST(HttpFront, DefaultHttpLoopsIsOnePerTwoCpusRoundedUp) {
  EXPECT_EQ(DefaultHttpLoops(0), 1);
  EXPECT_EQ(DefaultHttpLoops(1), 1);
  EXPECT_EQ(DefaultHttpLoops(2), 1);
  EXPECT_EQ(DefaultHttpLoops(3), 2);  // one loop on 3 CPUs capped a 16-core host's served rate
  EXPECT_EQ(DefaultHttpLoops(16), 8);
  EXPECT_EQ(DefaultHttpLoops(31), 16);
  EXPECT_EQ(DefaultHttpLoops(32), 16);
  EXPECT_EQ(DefaultHttpLoops(256), 16);
}

TEST(HttpFront, OnlyTheStatusPageAndOpenHealthGoWithoutAKey) {
  for (const char* m : {"GET", "HEAD"}) {
    EXPECT_TRUE(OpenWithoutApiKey(m, "/", false)) << m;
    EXPECT_TRUE(OpenWithoutApiKey(m, "/", true)) << m;
    EXPECT_TRUE(OpenWithoutApiKey(m, "/health", true)) << m;
    EXPECT_FALSE(OpenWithoutApiKey(m, "/health", false)) << m;
    for (const char* path : {"/search", "/_search", "/count", "/_count", "/stats", "/metrics", "//", "/index.html",
                             "/?", "", "/ ", "/health/", "/Health", "/no-such-route"}) {
      EXPECT_FALSE(OpenWithoutApiKey(m, path, false)) << m << " " << path;
      EXPECT_FALSE(OpenWithoutApiKey(m, path, true)) << m << " " << path;
    }
  }
  for (const char* m : {"POST", "PUT", "DELETE", "OPTIONS", "get", ""}) {
    EXPECT_FALSE(OpenWithoutApiKey(m, "/", true)) << m;
    EXPECT_FALSE(OpenWithoutApiKey(m, "/health", true)) << m;
  }
}

}  // namespace
}  // namespace search
