#include "common/daemon_lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

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
  // What a taker of another host does: a file of its own, renamed over the lock file.
  void OtherTakesOver() {
    ASSERT_TRUE(WriteFileAtomic(path_, absl::StrCat("node9 77 - ", absl::ToUnixSeconds(absl::Now()),
                                                    " feedbeef\n"))
                    .ok());
  }
  static DaemonLock::Options Quick() {
    DaemonLock::Options o;
    o.settle = absl::Milliseconds(20);
    o.beat = absl::Milliseconds(20);
    return o;
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
  EXPECT_FALSE(std::filesystem::exists(path_));
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

TEST_F(DaemonLockTest, OfStartsAtTheSameMomentOneGetsTheDirectory) {
  // A fresh directory (no lock file: O_EXCL decides), then one left by a holder long gone (the
  // last of the renames decides, and each taker reads the file again after the settle).
  for (bool stale : {false, true}) {
    if (stale) OtherHolds(DaemonLock::kStale + absl::Seconds(5));
    std::vector<std::thread> starts;
    std::mutex mu;
    std::vector<std::unique_ptr<DaemonLock>> won;
    int refused = 0;
    for (int i = 0; i < 8; ++i) {
      starts.emplace_back([&, i] {
        auto lock = DaemonLock::Acquire(path_, absl::StrCat("host", i), "", Quick());
        std::lock_guard g(mu);
        if (lock.ok()) {
          won.push_back(std::move(*lock));
        } else {
          EXPECT_TRUE(absl::IsFailedPrecondition(lock.status())) << lock.status();
          ++refused;
        }
      });
    }
    for (auto& t : starts) t.join();
    ASSERT_EQ(won.size(), 1u) << (stale ? "taking over" : "fresh");
    EXPECT_EQ(refused, 7);
    std::optional<LockHolder> named = NamedLockHolder(path_);
    ASSERT_TRUE(named.has_value());
    EXPECT_EQ(named->mark, won[0]->mark());
    won.clear();
    EXPECT_FALSE(std::filesystem::exists(path_));
  }
}

TEST_F(DaemonLockTest, AHolderThatWasTakenOverFindsOutAndLeavesTheFileAlone) {
  auto lock = DaemonLock::Acquire(path_, "login1", "", Quick());
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_TRUE((*lock)->StillHeld());
  std::mutex mu;
  std::optional<LockHolder> told;
  int calls = 0;
  (*lock)->OnLost([&](const std::optional<LockHolder>& now) {
    std::lock_guard g(mu);
    told = now;
    ++calls;
  });
  // Frozen past the stale time, it was taken over (the file system kept no flock across hosts).
  OtherTakesOver();
  // Its next beat finds out, and the handler runs once; so does anything asking (the store's
  // fence), which is told no.
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard g(mu);
      if (calls > 0) break;
    }
    ::usleep(10'000);
  }
  EXPECT_FALSE((*lock)->StillHeld());
  {
    std::lock_guard g(mu);
    EXPECT_EQ(calls, 1);
    ASSERT_TRUE(told.has_value());
    EXPECT_EQ(told->host, "node9");
    EXPECT_EQ(told->mark, "feedbeef");
  }
  // It writes nothing more there, and does not free what is another's.
  lock->reset();
  std::optional<LockHolder> named = NamedLockHolder(path_);
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->host, "node9");
}

TEST_F(DaemonLockTest, AnotherHostsHolderIsTakenOverOnlyOnceSilentForTheStaleTime) {
  DaemonLock::Options o = Quick();
  o.stale = absl::Seconds(20);
  OtherHolds(absl::Seconds(15));
  EXPECT_TRUE(absl::IsFailedPrecondition(DaemonLock::Acquire(path_, "nid001", "", o).status()));
  OtherHolds(absl::Seconds(25));
  auto lock = DaemonLock::Acquire(path_, "nid001", "", o);
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_EQ((*lock)->replaced()->host, "node7");
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
