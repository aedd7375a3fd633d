// LocalBackend against real processes. Waits are bounded polls on real time: this is the one
// place where the process table is the thing under test.
#include "slurm_backend/local_backend.h"

#include <signal.h>
#include <stdlib.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "common/files.h"
#include "gtest/gtest.h"

namespace hpo::backend {
namespace {

class LocalBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hpo-local-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  LaunchSpec Spec(int64_t id, std::vector<std::string> argv, int gpus = 0) {
    LaunchSpec s;
    s.trial_id = id;
    s.argv = std::move(argv);
    s.workdir = dir_;
    s.trial_dir = dir_ + "/t" + std::to_string(id);
    EXPECT_TRUE(MakeDirs(s.trial_dir).ok());
    s.resources.gpus = gpus;
    s.env["MARKER"] = "m" + std::to_string(id);
    return s;
  }
  // Polls until `n` exit events arrived (or 10 s passed).
  std::vector<BackendEvent> WaitExits(LocalBackend& b, size_t n) {
    std::vector<BackendEvent> exits;
    for (int i = 0; i < 1000 && exits.size() < n; ++i) {
      for (auto& e : b.Poll()) {
        if (e.kind != BackendEvent::Kind::kStarted) exits.push_back(e);
      }
      if (exits.size() < n) ::usleep(10'000);
    }
    return exits;
  }
  std::string dir_;
  SystemClock& clock_ = SystemClock::Get();
};

TEST_F(LocalBackendTest, ExitCodesLogsAndEnvironment) {
  LocalBackend b({0, 4}, clock_);
  ASSERT_TRUE(b.Launch(Spec(1, {"sh", "-c", "echo out $MARKER; echo err >&2; exit 0"})).ok());
  ASSERT_TRUE(b.Launch(Spec(2, {"sh", "-c", "exit 3"})).ok());
  auto exits = WaitExits(b, 2);
  ASSERT_EQ(exits.size(), 2u);
  std::map<int64_t, int> codes;
  for (auto& e : exits) codes[e.trial_id] = e.exit_code;
  EXPECT_EQ(codes[1], 0);
  EXPECT_EQ(codes[2], 3);
  EXPECT_EQ(*ReadFile(dir_ + "/t1/stdout.log"), "out m1\n");
  EXPECT_EQ(*ReadFile(dir_ + "/t1/stderr.log"), "err\n");
  EXPECT_EQ(b.Running(), 0);
}

TEST_F(LocalBackendTest, MissingProgramExits127WithReason) {
  LocalBackend b({0, 1}, clock_);
  ASSERT_TRUE(b.Launch(Spec(1, {"/no/such/program"})).ok());
  auto exits = WaitExits(b, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 127);
  EXPECT_NE(exits[0].message.find("No such file"), std::string::npos);
  EXPECT_NE(ReadFile(dir_ + "/t1/stderr.log")->find("cannot run"), std::string::npos);
}

TEST_F(LocalBackendTest, GpusAreNeverShared) {
  LocalBackend b({4, 8}, clock_);
  ASSERT_TRUE(b.Launch(Spec(1, {"sh", "-c", "echo $CUDA_VISIBLE_DEVICES; sleep 5"}, 2)).ok());
  ASSERT_TRUE(b.Launch(Spec(2, {"sh", "-c", "echo $CUDA_VISIBLE_DEVICES; sleep 5"}, 1)).ok());
  EXPECT_TRUE(b.CanLaunch(1, {1, 1, 1, 1}, {}));
  EXPECT_FALSE(b.CanLaunch(1, {2, 1, 1, 1}, {}));
  EXPECT_TRUE(absl::IsResourceExhausted(b.Launch(Spec(3, {"true"}, 2))));
  std::set<std::string> gpus;
  for (auto& e : b.Poll()) gpus.insert(e.gpus);
  EXPECT_EQ(gpus, (std::set<std::string>{"0,1", "2"}));
  EXPECT_TRUE(absl::IsInvalidArgument(b.CheckFits({5, 1, 1, 1}, {})));
  b.KillAll();
  WaitExits(b, 2);
  EXPECT_TRUE(b.CanLaunch(1, {4, 1, 1, 1}, {}));
}

TEST_F(LocalBackendTest, StopSignalsTheGroupThenKillsAfterGrace) {
  LocalBackend b({0, 4}, clock_);
  // Trial 1 exits on SIGTERM; trial 2 ignores it (and leaves a grandchild) and needs SIGKILL.
  ASSERT_TRUE(b.Launch(Spec(1, {"sh", "-c", "sleep 30 & wait"})).ok());
  ASSERT_TRUE(b.Launch(Spec(2, {"sh", "-c", "trap '' TERM; sleep 30 & while true; do sleep 0.1; done"})).ok());
  ::usleep(200'000);
  ASSERT_TRUE(b.Stop(1, absl::Seconds(5)).ok());
  ASSERT_TRUE(b.Stop(2, absl::Milliseconds(300)).ok());
  auto exits = WaitExits(b, 2);
  ASSERT_EQ(exits.size(), 2u);
  for (auto& e : exits) {
    EXPECT_TRUE(e.stop_requested);
    EXPECT_EQ(e.term_signal, e.trial_id == 1 ? SIGTERM : SIGKILL) << e.trial_id;
  }
  // Nothing of either trial is left: no process carries their markers.
  ::usleep(100'000);
  FILE* p = ::popen("grep -l 'MARKER=m[12]' /proc/[0-9]*/environ 2>/dev/null | wc -l", "r");
  char buf[32] = {0};
  ASSERT_NE(std::fgets(buf, sizeof(buf), p), nullptr);
  ::pclose(p);
  EXPECT_EQ(std::atoi(buf), 0);
  EXPECT_TRUE(absl::IsNotFound(b.Stop(1, absl::Seconds(1))));
}

TEST_F(LocalBackendTest, StopSendsTheTrialsOwnSignal) {
  LocalBackend b({0, 4}, clock_);
  LaunchSpec spec = Spec(1, {"sh", "-c", "trap 'echo got-usr1; exit 7' USR1; while true; do sleep 0.05; done"});
  spec.stop_signal = SIGUSR1;
  ASSERT_TRUE(b.Launch(spec).ok());
  ::usleep(200'000);
  ASSERT_TRUE(b.Stop(1, absl::Seconds(5)).ok());
  auto exits = WaitExits(b, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 7);
  std::ifstream out(spec.trial_dir + "/stdout.log");
  std::stringstream text;
  text << out.rdbuf();
  EXPECT_NE(text.str().find("got-usr1"), std::string::npos);
}

TEST_F(LocalBackendTest, WakesTheControllerWhenATrialEnds) {
  LocalBackend b({0, 4}, clock_);
  std::mutex mu;
  std::condition_variable cv;
  int wakes = 0;
  b.SetWakeup([&] {
    std::lock_guard lock(mu);
    ++wakes;
    cv.notify_all();
  });
  ASSERT_TRUE(b.Launch(Spec(1, {"sh", "-c", "sleep 0.2"})).ok());
  std::unique_lock lock(mu);
  // Without the wake-up nothing would happen here: no one polls.
  EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return wakes > 0; }));
  lock.unlock();
  auto exits = WaitExits(b, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0);
  b.SetWakeup(nullptr);
}

}  // namespace
}  // namespace hpo::backend
