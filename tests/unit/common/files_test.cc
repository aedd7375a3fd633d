#include "common/files.h"

#include <sys/stat.h>

#include <cstdlib>

#include "common/data_dir.h"
#include "common/token.h"
#include "gtest/gtest.h"

namespace hpo {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/hpo-test-XXXXXX";
  return ::mkdtemp(tmpl);
}

TEST(Files, AtomicWriteAndTail) {
  std::string dir = TempDir();
  std::string path = dir + "/f";
  ASSERT_TRUE(WriteFileAtomic(path, "hello world", 0600).ok());
  EXPECT_EQ(*ReadFile(path), "hello world");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  bool truncated = false;
  EXPECT_EQ(*TailFile(path, 5, &truncated), "world");
  EXPECT_TRUE(truncated);
  EXPECT_EQ(*TailFile(path, 100, &truncated), "hello world");
  EXPECT_FALSE(truncated);
  EXPECT_TRUE(absl::IsNotFound(ReadFile(dir + "/missing").status()));
}

TEST(DataDir, TokenIsCreatedOncePrivate) {
  DataDir dir(TempDir() + "/data");
  ASSERT_TRUE(dir.Create().ok());
  auto t1 = dir.ReadOrCreateToken();
  auto t2 = dir.ReadOrCreateToken();
  ASSERT_TRUE(t1.ok());
  EXPECT_EQ(t1->size(), 64u);
  EXPECT_EQ(*t1, *t2);
  struct stat st {};
  ASSERT_EQ(::stat(dir.token_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(dir.root().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(Token, ComparesAndDiffers) {
  std::string a = NewToken(), b = NewToken();
  EXPECT_NE(a, b);
  EXPECT_TRUE(TokensEqual(a, a));
  EXPECT_FALSE(TokensEqual(a, b));
  EXPECT_FALSE(TokensEqual(a, a.substr(1)));
}

}  // namespace
}  // namespace hpo
