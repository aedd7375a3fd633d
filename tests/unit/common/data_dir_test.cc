// DataDir: the names of its files come from common/layout.h, and its instance id is stable.
#include "common/data_dir.h"

#include <cstdlib>
#include <filesystem>

#include "common/files.h"
#include "gtest/gtest.h"

namespace hpo {
namespace {

class DataDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = std::filesystem::temp_directory_path() / "hpo-datadir-XXXXXX";
    root_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST_F(DataDirTest, NamesItsFilesFromTheLayout) {
  DataDir d(root_);
  EXPECT_EQ(d.db_path(), root_ + "/hpod.db");
  EXPECT_EQ(d.socket_target(), "unix:" + root_ + "/hpod.sock");
  EXPECT_EQ(d.user_token_path("bob"), root_ + "/users/bob.token");
  EXPECT_EQ(d.trial_dir(3, 7), root_ + "/sweeps/3/trials/00007");
  d.set_sweeps_root("/shared/x");
  EXPECT_EQ(d.trial_dir(3, 7), "/shared/x/3/trials/00007");
  layout::TrialDir t(d.trial_dir(3, 7));
  EXPECT_EQ(t.stdout_log(), "/shared/x/3/trials/00007/stdout.log");
  EXPECT_EQ(t.shim_exit(), "/shared/x/3/trials/00007/hpo.exit");
}

TEST_F(DataDirTest, TheInstanceIdIsDrawnOnceAndKept) {
  DataDir d(root_);
  auto first = d.ReadOrCreateInstanceId();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->size(), 16u);
  EXPECT_EQ(first->find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(*d.ReadOrCreateInstanceId(), *first);
  // The same directory under another path (moved, or reached through a link) keeps it; another
  // directory gets its own.
  std::string moved = root_ + "-moved";
  std::filesystem::rename(root_, moved);
  EXPECT_EQ(*DataDir(moved).ReadOrCreateInstanceId(), *first);
  std::filesystem::rename(moved, root_);
  std::string other = root_ + "/other";
  ASSERT_TRUE(MakeDirs(other).ok());
  EXPECT_NE(*DataDir(other).ReadOrCreateInstanceId(), *first);
}

}  // namespace
}  // namespace hpo
