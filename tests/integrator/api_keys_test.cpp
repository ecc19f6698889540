// API keys (integrator/api_keys.hpp): the key file's format and its errors, a made key checked right,
// wrong, unknown and malformed, the file created 0600 and appended to, and base64 both ways.
#include "integrator/api_keys.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace search {
namespace {

std::shared_ptr<const ApiKeys> MustParse(const std::string& text) {
  auto keys = ApiKeys::Parse(text, "keys");
  EXPECT_TRUE(keys.ok()) << keys.status().ToString();
  return keys.ok() ? *keys : nullptr;
}

std::string ParseError(const std::string& text) {
  auto keys = ApiKeys::Parse(text, "keys");
  EXPECT_FALSE(keys.ok()) << text;
  return keys.ok() ? std::string() : keys.status().ToString();
}

TEST(ApiKeys, MadeKeyIsRightAndEverythingElseIsRefused) {
  auto made = MakeApiKey("ci runner");
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(made->id.size(), 16u);
  EXPECT_EQ(made->key.size(), 43u);  // 32 bytes, base64url unpadded
  EXPECT_EQ(made->line.find(made->key), std::string::npos) << "the file line must not hold the key";
  auto other = MakeApiKey("");
  ASSERT_TRUE(other.ok());
  auto keys = MustParse("# comment\n\n" + made->line + "\n" + other->line + "\n");
  ASSERT_NE(keys, nullptr);
  EXPECT_EQ(keys->size(), 2u);

  const std::string right = ApiKeyAuthorization(made->id, made->key);
  EXPECT_EQ(keys->Check(&right), 0);
  const std::string right2 = ApiKeyAuthorization(other->id, other->key);
  EXPECT_EQ(keys->Check(&right2), 0);
  // The scheme is case-insensitive, spaces after it are skipped, padding may be left off.
  std::string lower = "apikey   " + right.substr(7);
  EXPECT_EQ(keys->Check(&lower), 0);
  std::string unpadded = right;
  while (unpadded.back() == '=') unpadded.pop_back();
  EXPECT_EQ(keys->Check(&unpadded), 0);

  // 403: a known id with another key's key, a key one character off, an unknown id.
  const std::string swapped = ApiKeyAuthorization(made->id, other->key);
  EXPECT_EQ(keys->Check(&swapped), 403);
  std::string off_key = made->key;
  off_key.back() = off_key.back() == 'A' ? 'B' : 'A';
  const std::string off = ApiKeyAuthorization(made->id, off_key);
  EXPECT_EQ(keys->Check(&off), 403);
  const std::string unknown = ApiKeyAuthorization("0123456789abcdef", made->key);
  EXPECT_EQ(keys->Check(&unknown), 403);

  // 401: no header, another scheme, not base64, no ':', empty id or key, too long.
  EXPECT_EQ(keys->Check(nullptr), 401);
  for (const std::string& bad :
       {std::string(""), std::string("ApiKey"), std::string("ApiKey "), "Basic " + right.substr(7),
        "Bearer " + made->key, "ApiKey" + right.substr(7), std::string("ApiKey !!!!"), std::string("ApiKey a"),
        "ApiKey " + Base64Encode(made->id + made->key), "ApiKey " + Base64Encode(":" + made->key),
        "ApiKey " + Base64Encode(made->id + ":"), "ApiKey " + std::string(2000, 'A')}) {
    EXPECT_EQ(keys->Check(&bad), 401) << bad;
  }
}

TEST(ApiKeys, OnAConnectionOnlyTheSameBytesSkipTheHash) {
  auto made = MakeApiKey("");
  auto other = MakeApiKey("");
  ASSERT_TRUE(made.ok() && other.ok());
  auto keys = MustParse(made->line + "\n" + other->line + "\n");
  ASSERT_NE(keys, nullptr);
  const std::string right = ApiKeyAuthorization(made->id, made->key);
  std::string verified;
  EXPECT_EQ(keys->CheckOnConnection(nullptr, &verified), 401);
  EXPECT_TRUE(verified.empty());
  const std::string wrong = ApiKeyAuthorization(made->id, other->key);
  EXPECT_EQ(keys->CheckOnConnection(&wrong, &verified), 403);
  EXPECT_TRUE(verified.empty()) << "a refused value is never kept";
  EXPECT_EQ(keys->CheckOnConnection(&right, &verified), 0);
  EXPECT_EQ(verified, right);
  EXPECT_EQ(keys->CheckOnConnection(&right, &verified), 0);
  // After a key passed: a missing header, a wrong key, a prefix or an extension of the kept value,
  // and one byte changed are each checked in full and refused; the kept value stays.
  std::string changed = right;
  changed[10] = changed[10] == 'A' ? 'B' : 'A';
  for (const std::string* v : {static_cast<const std::string*>(nullptr), &wrong}) {
    EXPECT_NE(keys->CheckOnConnection(v, &verified), 0);
  }
  for (const std::string& v : {right.substr(0, right.size() - 1), right + "A", right + "=", changed}) {
    EXPECT_NE(keys->CheckOnConnection(&v, &verified), 0) << v;
    EXPECT_EQ(verified, right);
  }
  // Another right key passes in full and replaces the kept value.
  const std::string right2 = ApiKeyAuthorization(other->id, other->key);
  EXPECT_EQ(keys->CheckOnConnection(&right2, &verified), 0);
  EXPECT_EQ(verified, right2);
  EXPECT_EQ(keys->CheckOnConnection(&right, &verified), 0);
  EXPECT_EQ(verified, right);
}

TEST(ApiKeys, FileErrorsNameTheLineAndNeverEchoIt) {
  auto made = MakeApiKey("x");
  ASSERT_TRUE(made.ok());
  const std::string salt(32, 'a'), hash(64, 'b');
  EXPECT_NE(ParseError("").find("holds no API key"), std::string::npos);
  EXPECT_NE(ParseError("# only a comment\n").find("holds no API key"), std::string::npos);
  EXPECT_NE(ParseError(made->line + "\nid " + salt + "\n").find("keys:2: the hash"), std::string::npos);
  EXPECT_NE(ParseError("id " + salt.substr(1) + " " + hash + "\n").find("keys:1: the salt"), std::string::npos);
  EXPECT_NE(ParseError("id " + salt + " " + std::string(64, 'B') + "\n").find("the hash"), std::string::npos);
  EXPECT_NE(ParseError("i:d " + salt + " " + hash + "\n").find("the id holds"), std::string::npos);
  EXPECT_NE(ParseError(std::string(65, 'i') + " " + salt + " " + hash + "\n").find("longer than 64"),
            std::string::npos);
  EXPECT_NE(
      ParseError("id " + salt + " " + hash + "\nid " + salt + " " + hash + "\n").find("keys:2: the id id is repeated"),
      std::string::npos);
  EXPECT_NE(ParseError("id " + salt + " " + hash + " bad\x01name\n").find("control character"), std::string::npos);
  // A key pasted in place of a line: the error names the line, not the key.
  const std::string pasted = made->id + ":" + made->key;
  EXPECT_EQ(ParseError(pasted + "\n").find(made->key), std::string::npos);
  // CRLF line ends and tabs are fine; a name may hold spaces.
  auto ok = MustParse("id\t" + salt + "\t" + hash + " a name with spaces\r\n");
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(ok->size(), 1u);
}

TEST(ApiKeys, AppendCreatesTheFile0600AndLoadReadsIt) {
  char dir_template[] = "/tmp/api_keys_test.XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string path = std::string(dir_template) + "/keys";
  auto a = MakeApiKey("first");
  auto b = MakeApiKey("second");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(AppendApiKeyLine(path, a->line).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_TRUE(AppendApiKeyLine(path, b->line).ok());
  auto keys = ApiKeys::Load(path);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ((*keys)->size(), 2u);
  const std::string ha = ApiKeyAuthorization(a->id, a->key), hb = ApiKeyAuthorization(b->id, b->key);
  EXPECT_EQ((*keys)->Check(&ha), 0);
  EXPECT_EQ((*keys)->Check(&hb), 0);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str().find(a->key), std::string::npos);
  EXPECT_EQ(text.str().find(b->key), std::string::npos);
  auto missing = ApiKeys::Load(std::string(dir_template) + "/none");
  EXPECT_FALSE(missing.ok());
  ::unlink(path.c_str());
  ::rmdir(dir_template);
}

TEST(ApiKeys, Base64BothWays) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  std::string out;
  for (const std::string& s : {std::string(), std::string("f"), std::string("fo"), std::string("foo"),
                              std::string("foob"), std::string("fooba"), std::string("\xff\x00\x80", 3)}) {
    ASSERT_TRUE(Base64Decode(Base64Encode(s), &out)) << s;
    EXPECT_EQ(out, s);
  }
  EXPECT_TRUE(Base64Decode("Zg", &out));
  EXPECT_EQ(out, "f");
  EXPECT_FALSE(Base64Decode("Z", &out));
  EXPECT_FALSE(Base64Decode("Zh==", &out));  // non-zero leftover bits
  EXPECT_FALSE(Base64Decode("Zm9v-A==", &out));
  EXPECT_FALSE(Base64Decode("Zg=", &out));
  EXPECT_FALSE(Base64Decode("Zg===", &out));
}

}  // namespace
}  // namespace search
