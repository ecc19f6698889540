// curve/curve_keys.hpp: key generation, the key files (modes, atomic creation, refusal to
// overwrite), and the client and server lists, bad input included.
#include "curve/curve_keys.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace search::curve {
namespace {

namespace fs = std::filesystem;

class CurveKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "curve-keys-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const std::string p = dir_ + "/" + name;
    std::ofstream(p, std::ios::binary) << text;
    ::chmod(p.c_str(), mode);
    return p;
  }
  static mode_t Mode(const std::string& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  }
  std::string dir_;
};

TEST_F(CurveKeysTest, GeneratedPairIsZ85AndPublicKeyDerivesFromSecret) {
  ASSERT_TRUE(CurveAvailable()) << "libzmq without CURVE";
  auto a = GenerateKeyPair();
  auto b = GenerateKeyPair();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(IsZ85Key(a->public_key));
  EXPECT_TRUE(IsZ85Key(a->secret_key));
  EXPECT_NE(a->secret_key, b->secret_key);
  auto pub = PublicKeyOf(a->secret_key);
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ(*pub, a->public_key);
}

TEST_F(CurveKeysTest, IsZ85KeyRejectsWrongLengthAndAlphabet) {
  auto k = GenerateKeyPair();
  ASSERT_TRUE(k.ok());
  EXPECT_FALSE(IsZ85Key(""));
  EXPECT_FALSE(IsZ85Key(k->public_key.substr(1)));
  EXPECT_FALSE(IsZ85Key(k->public_key + "0"));
  std::string bad = k->public_key;
  bad[7] = '"';  // not in the Z85 alphabet
  EXPECT_FALSE(IsZ85Key(bad));
  bad[7] = ' ';
  EXPECT_FALSE(IsZ85Key(bad));
  EXPECT_FALSE(PublicKeyOf(bad).ok());
}

TEST_F(CurveKeysTest, WriteKeyPairMakesA0600SecretAndRoundTrips) {
  ::umask(022);
  auto k = GenerateKeyPair();
  ASSERT_TRUE(k.ok());
  const std::string prefix = dir_ + "/node0";
  ASSERT_TRUE(WriteKeyPair(prefix, *k, false).ok());
  EXPECT_EQ(Mode(prefix + ".key"), 0600u);
  EXPECT_EQ(Mode(prefix + ".pub"), 0644u);
  std::ifstream in(prefix + ".key");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, k->secret_key + "\n");
  auto read = ReadSecretKeyFile(prefix + ".key");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->secret_key, k->secret_key);
  EXPECT_EQ(read->public_key, k->public_key);
  auto pub = ReadPublicKeyFile(prefix + ".pub");
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(*pub, k->public_key);
  // No temporary file left behind.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 2u);
}

TEST_F(CurveKeysTest, WriteKeyPairRefusesToOverwriteWithoutForce) {
  auto a = GenerateKeyPair();
  auto b = GenerateKeyPair();
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string prefix = dir_ + "/n";
  ASSERT_TRUE(WriteKeyPair(prefix, *a, false).ok());
  const Status again = WriteKeyPair(prefix, *b, false);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists) << again.ToString();
  EXPECT_NE(again.message().find("--force"), std::string::npos);
  EXPECT_EQ(ReadSecretKeyFile(prefix + ".key")->secret_key, a->secret_key);
  // Only the .pub there: still refused, and no .key written.
  fs::remove(prefix + ".key");
  EXPECT_EQ(WriteKeyPair(prefix, *b, false).code(), StatusCode::kAlreadyExists);
  EXPECT_FALSE(fs::exists(prefix + ".key"));
  ASSERT_TRUE(WriteKeyPair(prefix, *b, true).ok());
  EXPECT_EQ(ReadSecretKeyFile(prefix + ".key")->secret_key, b->secret_key);
  EXPECT_EQ(*ReadPublicKeyFile(prefix + ".pub"), b->public_key);
  EXPECT_EQ(Mode(prefix + ".key"), 0600u);
}

TEST_F(CurveKeysTest, SecretKeyReadableByOthersIsRefused) {
  auto k = GenerateKeyPair();
  ASSERT_TRUE(k.ok());
  for (mode_t mode : {0640, 0604, 0644, 0660}) {
    const std::string p = Write("loose.key", k->secret_key + "\n", mode);
    auto r = ReadSecretKeyFile(p);
    ASSERT_FALSE(r.ok()) << std::oct << mode;
    EXPECT_NE(r.status().message().find("chmod 600"), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find(p), std::string::npos);
  }
  EXPECT_TRUE(ReadSecretKeyFile(Write("tight.key", k->secret_key + "\n", 0400)).ok());
}

TEST_F(CurveKeysTest, SecretKeyFileBadContentIsRefused) {
  auto k = GenerateKeyPair();
  ASSERT_TRUE(k.ok());
  EXPECT_FALSE(ReadSecretKeyFile(dir_ + "/missing.key").ok());
  EXPECT_FALSE(ReadSecretKeyFile(dir_).ok());  // a directory
  EXPECT_FALSE(ReadSecretKeyFile(Write("empty.key", "")).ok());
  EXPECT_FALSE(ReadSecretKeyFile(Write("short.key", k->secret_key.substr(3) + "\n")).ok());
  EXPECT_FALSE(ReadSecretKeyFile(Write("two.key", k->secret_key + "\n" + k->secret_key + "\n")).ok());
  EXPECT_FALSE(ReadSecretKeyFile(Write("junk.key", std::string("\x00\xff\x01", 3))).ok());
  EXPECT_TRUE(ReadSecretKeyFile(Write("nonl.key", k->secret_key)).ok());
  EXPECT_TRUE(ReadSecretKeyFile(Write("crlf.key", k->secret_key + "\r\n")).ok());
  // A .pub file: one key, trailing blank lines allowed.
  EXPECT_TRUE(ReadPublicKeyFile(Write("a.pub", k->public_key + "\n\n")).ok());
  EXPECT_FALSE(ReadPublicKeyFile(Write("b.pub", k->public_key + "\n" + k->public_key + "\n")).ok());
  EXPECT_FALSE(ReadPublicKeyFile(Write("c.pub", "nope\n")).ok());
}

TEST_F(CurveKeysTest, ClientListSkipsCommentsAndNamesTheBadLine) {
  auto a = GenerateKeyPair();
  auto b = GenerateKeyPair();
  ASSERT_TRUE(a.ok() && b.ok());
  auto keys = ReadClientKeys(Write("clients", "# integrators\n\n" + a->public_key + "\n  " + b->public_key + "  \n"));
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(*keys, (std::vector<std::string>{a->public_key, b->public_key}));

  const std::string bad = Write("bad-clients", a->public_key + "\n# x\nnot-a-key\n");
  auto r = ReadClientKeys(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(bad + ":3:"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(ReadClientKeys(Write("none", "# nobody\n\n")).ok());
  EXPECT_FALSE(ReadClientKeys(dir_ + "/missing").ok());
  // Two keys on one line: not a key.
  EXPECT_FALSE(ReadClientKeys(Write("two", a->public_key + " " + b->public_key + "\n")).ok());
}

TEST_F(CurveKeysTest, ServerListByEndpointAndOneForAll) {
  auto a = GenerateKeyPair();
  auto b = GenerateKeyPair();
  auto c = GenerateKeyPair();
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  auto keys = ReadServerKeys(Write(
      "servers", "# nodes\ntcp://10.0.0.1:7001 " + a->public_key + "\ntcp://10.0.0.2:7001\t" + b->public_key + "\n"));
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(*keys->For("tcp://10.0.0.1:7001"), a->public_key);
  EXPECT_EQ(*keys->For("tcp://10.0.0.2:7001"), b->public_key);
  auto missing = keys->For("tcp://10.0.0.3:7001");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tcp://10.0.0.3:7001"), std::string::npos);

  auto all = ReadServerKeys(Write("all", c->public_key + "\n"));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all->For("tcp://anything:1"), c->public_key);
  auto mixed = ReadServerKeys(Write("mixed", c->public_key + "\ntcp://h:1 " + a->public_key + "\n"));
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(*mixed->For("tcp://h:1"), a->public_key);
  EXPECT_EQ(*mixed->For("tcp://other:1"), c->public_key);
}

TEST_F(CurveKeysTest, ServerListBadInputNamesFileAndLine) {
  auto a = GenerateKeyPair();
  ASSERT_TRUE(a.ok());
  auto expect_bad = [&](const std::string& name, const std::string& text, const std::string& where) {
    const std::string p = Write(name, text);
    auto r = ReadServerKeys(p);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_NE(r.status().message().find(p + where), std::string::npos) << r.status().ToString();
  };
  expect_bad("badkey", "tcp://h:1 nope\n", ":1:");
  expect_bad("noscheme", "\nh:1 " + a->public_key + "\n", ":2:");
  expect_bad("twice", "tcp://h:1 " + a->public_key + "\ntcp://h:1 " + a->public_key + "\n", ":2:");
  expect_bad("twoall", a->public_key + "\n" + a->public_key + "\n", ":2:");
  expect_bad("empty", "# none\n", ": no server key");
  EXPECT_FALSE(ReadServerKeys(dir_ + "/missing").ok());
}

TEST_F(CurveKeysTest, IntegratorFlagsNeedKeysBeyondLoopbackAndAKeyPerEndpoint) {
  auto client = GenerateKeyPair();
  auto a = GenerateKeyPair();
  ASSERT_TRUE(client.ok() && a.ok());
  const std::vector<std::string> local = {"tcp://127.0.0.1:7001|tcp://127.0.0.1:7002", "ipc:///tmp/n"};
  const std::vector<std::string> remote = {"tcp://127.0.0.1:7001|tcp://10.0.0.2:7001"};
  // Plain: loopback only, unless insecure.
  auto plain = ClientKeysForFlags("", "", false, local);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->has_value());
  auto refused = ClientKeysForFlags("", "", false, remote);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("tcp://10.0.0.2:7001"), std::string::npos);
  EXPECT_NE(refused.status().message().find("--insecure"), std::string::npos);
  EXPECT_TRUE(ClientKeysForFlags("", "", true, remote).ok());
  // One without the other.
  const std::string key = Write("i.key", client->secret_key + "\n");
  EXPECT_FALSE(ClientKeysForFlags(key, "", false, local).ok());
  EXPECT_FALSE(ClientKeysForFlags("", Write("s0", a->public_key + "\n"), false, local).ok());
  // CURVE: every replica endpoint needs a key.
  const std::string one = Write("s1", "tcp://127.0.0.1:7001 " + a->public_key + "\n");
  auto missing = ClientKeysForFlags(key, one, false, remote);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tcp://10.0.0.2:7001"), std::string::npos) << missing.status().ToString();
  auto all = ClientKeysForFlags(key, Write("s2", a->public_key + "\n"), false, remote);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_TRUE(all->has_value());
  EXPECT_EQ((*all)->client.public_key, client->public_key);
  EXPECT_EQ(*(*all)->servers.For("tcp://10.0.0.2:7001"), a->public_key);
  // A loose secret key is refused here too.
  EXPECT_FALSE(
      ClientKeysForFlags(Write("loose.key", client->secret_key + "\n", 0644), Write("s3", a->public_key), false, remote)
          .ok());
}

TEST(CurveEndpointTest, LoopbackEndpoints) {
  for (const char* ep : {"tcp://127.0.0.1:5555", "tcp://127.0.0.1:*", "tcp://127.1.2.3:1", "tcp://[::1]:5555",
                         "tcp://localhost:5555", "ipc:///tmp/node.sock", "inproc://x", "tcp://10.0.0.1;127.0.0.1:7"})
    EXPECT_TRUE(IsLoopbackEndpoint(ep)) << ep;
  for (const char* ep :
       {"tcp://0.0.0.0:5555", "tcp://*:5555", "tcp://10.0.0.1:5555", "tcp://eth0:5555", "tcp://127.0.0.1.evil.com:5",
        "tcp://[::]:5555", "tcp://node-1:5555", "udp://127.0.0.1:5", "tcp://127.0.0.1", "tcp://localhost.example:5"})
    EXPECT_FALSE(IsLoopbackEndpoint(ep)) << ep;
}

}  // namespace
}  // namespace search::curve
