// `searchctl keygen --out PREFIX [--force]` as a subprocess: PREFIX.key is 0600 whatever the umask,
// holds a secret whose zmq_curve_public is PREFIX.pub (and what it prints), existing files are
// kept without --force and replaced with it, and a bad PREFIX is an error, not a crash.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <zmq.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "curve/curve_keys.hpp"

namespace search::curve {
namespace {

namespace fs = std::filesystem;

struct CommandRun {
  int exit_code = -1;
  std::string out;
};

// Runs searchctl with `args` (shell-quoted by the caller) under `umask_bits`.
CommandRun Searchctl(const std::string& args, const std::string& umask_bits = "022") {
  const std::string cmd = "umask " + umask_bits + "; " + SEARCHCTL_PATH + " " + args + " 2>&1";
  CommandRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = ::pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string Slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

mode_t Mode(const std::string& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

class KeygenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "keygen-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(KeygenTest, WritesA0600SecretWhosePublicKeyIsThePubFile) {
  for (const std::string umask_bits : {"000", "022", "077"}) {
    const std::string prefix = dir_ + "/k" + umask_bits;
    const CommandRun r = Searchctl("keygen --out " + prefix, umask_bits);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(Mode(prefix + ".key"), 0600u) << "umask " << umask_bits;
    const std::string secret = Slurp(prefix + ".key");
    const std::string pub = Slurp(prefix + ".pub");
    ASSERT_EQ(secret.size(), kZ85KeyChars + 1);
    ASSERT_EQ(pub.size(), kZ85KeyChars + 1);
    EXPECT_EQ(secret.back(), '\n');
    std::array<char, 41> derived{};
    ASSERT_EQ(zmq_curve_public(derived.data(), secret.substr(0, kZ85KeyChars).c_str()), 0);
    EXPECT_EQ(std::string(derived.data()), pub.substr(0, kZ85KeyChars));
    EXPECT_EQ(r.out, pub);  // prints the public key
    auto read = ReadSecretKeyFile(prefix + ".key");
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_EQ(read->public_key + "\n", pub);
  }
}

TEST_F(KeygenTest, RefusesToOverwriteUnlessForce) {
  const std::string prefix = dir_ + "/node";
  ASSERT_EQ(Searchctl("keygen --out " + prefix).exit_code, 0);
  const std::string first = Slurp(prefix + ".key");
  const CommandRun again = Searchctl("keygen --out " + prefix);
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.out.find("--force"), std::string::npos) << again.out;
  EXPECT_EQ(Slurp(prefix + ".key"), first);
  const CommandRun forced = Searchctl("keygen --force --out " + prefix);
  ASSERT_EQ(forced.exit_code, 0) << forced.out;
  EXPECT_NE(Slurp(prefix + ".key"), first);
  EXPECT_EQ(Mode(prefix + ".key"), 0600u);
  EXPECT_TRUE(ReadSecretKeyFile(prefix + ".key").ok());
}

TEST_F(KeygenTest, BadPrefixOrMissingOutIsAnError) {
  const CommandRun missing_dir = Searchctl("keygen --out " + dir_ + "/no/such/dir/k");
  EXPECT_EQ(missing_dir.exit_code, 1) << missing_dir.out;
  EXPECT_NE(missing_dir.out.find("no/such/dir"), std::string::npos) << missing_dir.out;
  EXPECT_EQ(Searchctl("keygen").exit_code, 2);
}

}  // namespace
}  // namespace search::curve
