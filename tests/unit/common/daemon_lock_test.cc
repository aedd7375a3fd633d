#include "common/daemon_lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/address.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hpo {
namespace {

class DaemonLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hpo-lock-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/hpod.lock";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // What a holder on another host wrote, `ago` before now.
  void OtherHolds(absl::Duration ago) {
    ASSERT_TRUE(WriteFileAtomic(path_, absl::StrCat("node7 4242 1234 ",
                                                    absl::ToUnixSeconds(absl::Now() - ago), "\n"))
                    .ok());
  }
  std::string dir_, path_;
};

TEST_F(DaemonLockTest, TheHolderIsNamedAndASecondHpodIsRefused) {
  auto first = DaemonLock::Acquire(path_, "login1", "");
  ASSERT_TRUE(first.ok()) << first.status();
  std::optional<LockHolder> h = ParseLockHolder(*ReadFile(path_));
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->host, "login1");
  EXPECT_EQ(h->pid, ::getpid());
  EXPECT_EQ(h->job, "");
  EXPECT_LE(absl::Now() - h->seen, absl::Seconds(5));
  auto second = DaemonLock::Acquire(path_, "login1", "");
  ASSERT_TRUE(absl::IsFailedPrecondition(second.status()));
  EXPECT_THAT(std::string(second.status().message()), ::testing::HasSubstr("hpod on login1"));
  first->reset();  // a clean exit frees it at once
  EXPECT_EQ(*ReadFile(path_), "");
  EXPECT_TRUE(DaemonLock::Acquire(path_, "login1", "").ok());
}

TEST_F(DaemonLockTest, AnotherHostsHpodThatBeatLatelyKeepsTheStore) {
  // The file system did not carry its flock here (as Lustre without flock does not); the
  // holder it names, on another host and alive a moment ago, keeps the store.
  OtherHolds(absl::Seconds(3));
  auto lock = DaemonLock::Acquire(path_, "nid001", "99");
  ASSERT_TRUE(absl::IsFailedPrecondition(lock.status())) << lock.status();
  EXPECT_THAT(std::string(lock.status().message()),
              ::testing::HasSubstr("hpod on node7 (pid 4242, Slurm job 1234)"));
  EXPECT_THAT(*ReadFile(path_), ::testing::StartsWith("node7 4242 1234 "));  // untouched
}

TEST_F(DaemonLockTest, ASilentHolderIsTakenOverAndNamed) {
  OtherHolds(DaemonLock::kStale + absl::Seconds(5));
  auto lock = DaemonLock::Acquire(path_, "nid001", "99");
  ASSERT_TRUE(lock.ok()) << lock.status();
  ASSERT_TRUE((*lock)->replaced().has_value());
  EXPECT_EQ((*lock)->replaced()->host, "node7");
  std::optional<LockHolder> h = ParseLockHolder(*ReadFile(path_));
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->host, "nid001");
  EXPECT_EQ(h->job, "99");
}

TEST_F(DaemonLockTest, AFileThatNamesNobodyIsFree) {
  EXPECT_FALSE(ParseLockHolder("").has_value());
  EXPECT_FALSE(ParseLockHolder("garbage\n").has_value());
  ASSERT_TRUE(WriteFileAtomic(path_, "half a li").ok());
  auto lock = DaemonLock::Acquire(path_, "login1", "");
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_FALSE((*lock)->replaced().has_value());
}

TEST_F(DaemonLockTest, ClientsSeeTheLiveHolderOnly) {
  // hpo and the Python client ask who holds the directory to know where hpod runs.
  EXPECT_FALSE(LiveLockHolder(path_).has_value());  // no file
  OtherHolds(absl::Seconds(3));
  std::optional<LockHolder> live = LiveLockHolder(path_);
  ASSERT_TRUE(live.has_value());
  EXPECT_EQ(live->host, "node7");
  EXPECT_EQ(live->job, "1234");
  OtherHolds(DaemonLock::kStale + absl::Seconds(1));  // surely gone
  EXPECT_FALSE(LiveLockHolder(path_).has_value());
  ASSERT_TRUE(WriteFileAtomic(path_, "").ok());  // stopped cleanly
  EXPECT_FALSE(LiveLockHolder(path_).has_value());
}

TEST_F(DaemonLockTest, AHolderOfThisHostWhoseProcessIsGoneIsNotLive) {
  // A killed hpod beat a moment ago, but its process is gone: clients need not wait for it.
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  ASSERT_TRUE(WriteFileAtomic(path_, absl::StrCat(HostName(), " ", child, " - ",
                                                  absl::ToUnixSeconds(absl::Now()), "\n"))
                  .ok());
  std::optional<LockHolder> named = NamedLockHolder(path_);
  ASSERT_TRUE(named.has_value());
  EXPECT_TRUE(GoneFromThisHost(*named));
  EXPECT_FALSE(LiveLockHolder(path_).has_value());
  // This process, and another host's (whose processes this host cannot see), are not gone.
  named->pid = ::getpid();
  EXPECT_FALSE(GoneFromThisHost(*named));
  named->pid = child;
  named->host = "node7";
  EXPECT_FALSE(GoneFromThisHost(*named));
}

}  // namespace
}  // namespace hpo
