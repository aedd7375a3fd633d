// LocalBackend against real processes. Waits are bounded polls on real time: this is the one
// place where the process table is the thing under test.
#include "backend/local_backend.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fakes/act_now.h"

namespace hpo::backend {
namespace {

// Trials run under the real hpo-shim, as hpod runs them.
LocalBackend::Options Opts(int gpus, int cpus) { return {gpus, cpus, HPO_SHIM}; }

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
    s.env["TEST_DIR"] = dir_;  // tells this test's processes from those of tests running beside it
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
  LocalBackend b(Opts(0, 4), clock_);
  LaunchSpec first = Spec(1, {"sh", "-c", "echo out $MARKER; cat \"$0\"; echo err >&2; exit 0"});
  first.argv.push_back(dir_ + "/t1/params.json");  // $0: the shim wrote it before the command ran
  first.env["HPO_PARAMS_JSON"] = R"({"lr":0.1})";
  ASSERT_TRUE(fakes::LaunchNow(b, first).ok());
  ASSERT_TRUE(fakes::LaunchNow(b, Spec(2, {"sh", "-c", "exit 3"})).ok());
  auto exits = WaitExits(b, 2);
  ASSERT_EQ(exits.size(), 2u);
  std::map<int64_t, int> codes;
  for (auto& e : exits) codes[e.trial_id] = e.exit_code;
  EXPECT_EQ(codes[1], 0);
  EXPECT_EQ(codes[2], 3);
  EXPECT_EQ(*ReadFile(dir_ + "/t1/stdout.log"), "out m1\n{\"lr\":0.1}\n");
  EXPECT_EQ(*ReadFile(dir_ + "/t1/stderr.log"), "err\n");
  EXPECT_EQ(b.Running(), 0);
}

TEST_F(LocalBackendTest, MissingProgramExits127WithReason) {
  LocalBackend b(Opts(0, 1), clock_);
  ASSERT_TRUE(fakes::LaunchNow(b, Spec(1, {"/no/such/program"})).ok());
  auto exits = WaitExits(b, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 127);
  EXPECT_NE(exits[0].message.find("No such file"), std::string::npos);
  EXPECT_NE(ReadFile(dir_ + "/t1/stderr.log")->find("cannot run"), std::string::npos);
}

TEST_F(LocalBackendTest, GpusAreNeverShared) {
  LocalBackend b(Opts(4, 8), clock_);
  ASSERT_TRUE(
      fakes::LaunchNow(b, Spec(1, {"sh", "-c", "echo $CUDA_VISIBLE_DEVICES; sleep 5"}, 2)).ok());
  ASSERT_TRUE(
      fakes::LaunchNow(b, Spec(2, {"sh", "-c", "echo $CUDA_VISIBLE_DEVICES; sleep 5"}, 1)).ok());
  EXPECT_TRUE(b.CanLaunch(1, {1, 1, 1, 1}, {}));
  EXPECT_FALSE(b.CanLaunch(1, {2, 1, 1, 1}, {}));
  EXPECT_TRUE(absl::IsResourceExhausted(fakes::LaunchNow(b, Spec(3, {"true"}, 2))));
  std::set<std::string> gpus;
  for (auto& e : b.Poll()) gpus.insert(e.gpus);
  EXPECT_EQ(gpus, (std::set<std::string>{"0,1", "2"}));
  EXPECT_TRUE(absl::IsInvalidArgument(b.CheckFits({5, 1, 1, 1}, {})));
  b.KillAll();
  WaitExits(b, 2);
  EXPECT_TRUE(b.CanLaunch(1, {4, 1, 1, 1}, {}));
}

TEST_F(LocalBackendTest, StopSignalsTheGroupThenKillsAfterGrace) {
  LocalBackend b(Opts(0, 4), clock_);
  // Trial 1 exits on SIGTERM; trial 2 ignores it (and leaves a grandchild) and needs SIGKILL.
  ASSERT_TRUE(fakes::LaunchNow(b, Spec(1, {"sh", "-c", "sleep 30 & wait"})).ok());
  ASSERT_TRUE(
      fakes::LaunchNow(
          b, Spec(2, {"sh", "-c", "trap '' TERM; sleep 30 & while true; do sleep 0.1; done"}))
          .ok());
  ::usleep(200'000);
  ASSERT_TRUE(fakes::StopNow(b, 1, absl::Seconds(5)).ok());
  ASSERT_TRUE(fakes::StopNow(b, 2, absl::Milliseconds(300)).ok());
  auto exits = WaitExits(b, 2);
  ASSERT_EQ(exits.size(), 2u);
  for (auto& e : exits) {
    EXPECT_TRUE(e.stop_requested);
    EXPECT_EQ(e.term_signal, e.trial_id == 1 ? SIGTERM : SIGKILL) << e.trial_id;
  }
  // Nothing of either trial is left: no process carries their markers.
  ::usleep(100'000);
  std::string count = "grep -l -a 'TEST_DIR=" + dir_ + "' /proc/[0-9]*/environ 2>/dev/null | wc -l";
  FILE* p = ::popen(count.c_str(), "r");
  char buf[32] = {0};
  ASSERT_NE(std::fgets(buf, sizeof(buf), p), nullptr);
  ::pclose(p);
  EXPECT_EQ(std::atoi(buf), 0);
  EXPECT_TRUE(absl::IsNotFound(fakes::StopNow(b, 1, absl::Seconds(1))));
}

TEST_F(LocalBackendTest, StopSendsTheTrialsOwnSignal) {
  LocalBackend b(Opts(0, 4), clock_);
  LaunchSpec spec =
      Spec(1, {"sh", "-c", "trap 'echo got-usr1; exit 7' USR1; while true; do sleep 0.05; done"});
  spec.stop_signal = SIGUSR1;
  ASSERT_TRUE(fakes::LaunchNow(b, spec).ok());
  ::usleep(200'000);
  ASSERT_TRUE(fakes::StopNow(b, 1, absl::Seconds(5)).ok());
  auto exits = WaitExits(b, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 7);
  std::ifstream out(spec.trial_dir + "/stdout.log");
  std::stringstream text;
  text << out.rdbuf();
  EXPECT_NE(text.str().find("got-usr1"), std::string::npos);
}

// A command given as one line runs under /bin/sh, which dies of a checkpoint signal at once; the
// trial ends only once what the shell ran has finished writing its checkpoint.
TEST_F(LocalBackendTest, AShellThatDiesOfTheSignalLeavesItsCommandTheGrace) {
  LocalBackend b(Opts(0, 4), clock_);
  const std::string saved = dir_ + "/saved";
  LaunchSpec spec = Spec(1, {"sh", "-c",
                             "sh -c \"trap 'sleep 0.3; echo yes > " + saved +
                                 "; exit 0' USR2; while true; do sleep 0.05; done\""});
  spec.stop_signal = SIGUSR2;
  ASSERT_TRUE(fakes::LaunchNow(b, spec).ok());
  ::usleep(300'000);
  ASSERT_TRUE(fakes::StopNow(b, 1, absl::Seconds(10)).ok());
  auto exits = WaitExits(b, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].term_signal, SIGUSR2);  // the outer shell's end
  EXPECT_TRUE(ReadFile(saved).ok()) << "the checkpoint was cut short";
}

// A stop sent the instant a trial is spawned, before its shim could set itself up, still ends
// the command and leaves the shim's record of it (a restarted daemon relies on that record).
TEST_F(LocalBackendTest, AStopTheInstantATrialStartsIsRecorded) {
  for (int64_t id = 1; id <= 5; ++id) {
    LocalBackend b(Opts(0, 4), clock_);
    ASSERT_TRUE(fakes::LaunchNow(b, Spec(id, {"sleep", "600"})).ok());
    ASSERT_TRUE(fakes::StopNow(b, id, absl::Seconds(30)).ok());  // at once, no SIGKILL in time
    auto exits = WaitExits(b, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].term_signal, SIGTERM);
    std::optional<ExitRecord> record = ReadExitRecord(dir_ + "/t" + std::to_string(id));
    ASSERT_TRUE(record.has_value()) << "the shim recorded how it ended";
    EXPECT_EQ(record->term_signal, SIGTERM);
  }
}

TEST_F(LocalBackendTest, WakesTheControllerWhenATrialEnds) {
  LocalBackend b(Opts(0, 4), clock_);
  std::mutex mu;
  std::condition_variable cv;
  int wakes = 0;
  b.SetWakeup([&] {
    std::lock_guard lock(mu);
    ++wakes;
    cv.notify_all();
  });
  ASSERT_TRUE(fakes::LaunchNow(b, Spec(1, {"sh", "-c", "sleep 0.2"})).ok());
  std::unique_lock lock(mu);
  // Without the wake-up nothing would happen here: no one polls.
  EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return wakes > 0; }));
  lock.unlock();
  auto exits = WaitExits(b, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0);
  b.SetWakeup(nullptr);
}

// A daemon that dies without a word (its process just ends, as under kill -9) leaves its trials
// running; a new backend re-adopts them: their GPUs stay theirs, a trial that ends meanwhile
// keeps its true exit code, one that is still running can be stopped, and a trial that never
// started is not found.
TEST_F(LocalBackendTest, ReadoptsTrialsOfADaemonThatDied) {
  LaunchSpec quick = Spec(1, {"sh", "-c", "sleep 0.3; exit 5"}, 1);
  LaunchSpec slow = Spec(2, {"sh", "-c", "trap 'exit 9' TERM; while true; do sleep 0.05; done"}, 1);
  LaunchSpec never = Spec(3, {"true"});
  pid_t daemon = ::fork();
  ASSERT_GE(daemon, 0);
  if (daemon == 0) {
    auto* b = new LocalBackend(Opts(2, 4), clock_);  // never destroyed: it "crashes"
    bool ok = b->Launch(quick).ok() && b->Launch(slow).ok();
    b->Act();
    ::_exit(ok ? 0 : 1);
  }
  struct KillLeftovers {  // whatever a failed expectation leaves running
    std::vector<std::string> dirs;
    ~KillLeftovers() {
      for (const auto& d : dirs) {
        if (pid_t pid = ReadShimPid(d); pid > 0) ::kill(-pid, SIGKILL);
      }
    }
  } leftovers{{quick.trial_dir, slow.trial_dir}};
  int status = 0;
  ASSERT_EQ(::waitpid(daemon, &status, 0), daemon);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ::usleep(100'000);
  LocalBackend b(Opts(2, 4), clock_);
  ASSERT_TRUE(b.Adopt(quick, "", "0").ok());
  ASSERT_TRUE(b.Adopt(slow, "", "1").ok());
  EXPECT_TRUE(absl::IsNotFound(b.Adopt(never, "", "")));
  EXPECT_FALSE(b.CanLaunch(1, {1, 0, 1, 1}, {}));  // both GPUs are still held
  auto exits = WaitExits(b, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].trial_id, 1);
  EXPECT_EQ(exits[0].kind, BackendEvent::Kind::kExited);
  EXPECT_EQ(exits[0].exit_code, 5);
  EXPECT_TRUE(b.CanLaunch(1, {1, 0, 1, 1}, {}));
  ASSERT_TRUE(fakes::StopNow(b, 2, absl::Seconds(5)).ok());
  exits = WaitExits(b, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].trial_id, 2);
  EXPECT_EQ(exits[0].exit_code, 9);
  EXPECT_TRUE(exits[0].stop_requested);
  EXPECT_EQ(b.Running(), 0);
  // A trial that ended entirely while no daemon ran is adopted with its outcome at once.
  LaunchSpec ended = Spec(4, {"true"});
  ASSERT_TRUE(WriteFileAtomic(ended.trial_dir + "/hpo.exit", "exit 3\n", 0644).ok());
  ASSERT_TRUE(WriteFileAtomic(ended.trial_dir + "/hpo.pid", "999999\n", 0644).ok());
  ASSERT_TRUE(b.Adopt(ended, "", "").ok());
  exits = WaitExits(b, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 3);
}

// A resumed trial's segment: the exit record an earlier segment left does not end it after a
// restart, and hpo-shim clears that record (and Slurm task records) before the command runs and
// writes its own, marked with the segment.
TEST_F(LocalBackendTest, AnEarlierSegmentsExitRecordDoesNotEndTheNextOne) {
  LaunchSpec later = Spec(1, {"true"});
  later.segment = 2;
  ASSERT_TRUE(WriteFileAtomic(later.trial_dir + "/hpo.exit", "exit 0\n", 0644).ok());
  ASSERT_TRUE(WriteFileAtomic(later.trial_dir + "/hpo.pid", "999999\n", 0644).ok());
  EXPECT_FALSE(ReadExitRecord(later.trial_dir, 2).has_value());
  EXPECT_TRUE(ReadExitRecord(later.trial_dir, 1).has_value());
  {
    LocalBackend b(Opts(0, 2), clock_);
    EXPECT_TRUE(absl::IsNotFound(b.Adopt(later, "", ""))) << "segment 1's outcome is not 2's";
  }
  ASSERT_TRUE(WriteFileAtomic(later.trial_dir + "/.hpo-task.0", "3 n1 0\n", 0644).ok());
  later.env["HPO_SEGMENT"] = "2";
  later.argv = {"sh", "-c", "ls -a \"$0\" > \"$0/seen\"; exit 4", later.trial_dir};
  LocalBackend b(Opts(0, 2), clock_);
  ASSERT_TRUE(fakes::LaunchNow(b, later).ok());
  auto exits = WaitExits(b, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 4);
  std::string seen = *ReadFile(later.trial_dir + "/seen");
  EXPECT_THAT(seen, ::testing::Not(::testing::HasSubstr("hpo.exit")));
  EXPECT_THAT(seen, ::testing::Not(::testing::HasSubstr(".hpo-task.0")));
  EXPECT_EQ(*ReadFile(later.trial_dir + "/hpo.exit"), "exit 4 segment 2\n");
  std::optional<backend::ExitRecord> record = ReadExitRecord(later.trial_dir, 2);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->exit_code, 4);
}

// Decide, then act: a launch starts nothing until Act(), so a daemon that dies in between left
// nothing running; and a trial whose process runs without the pid hpo-shim writes (the daemon
// died before the shim got to it) is still found by its environment.
TEST_F(LocalBackendTest, LaunchesStartAtActAndARestartFindsATrialWithoutItsPidFile) {
  LocalBackend::Options no_shim{0, 2, ""};
  LaunchSpec spec = Spec(1, {"sh", "-c", "sleep 30"});
  spec.env["HPO_TRIAL_DIR"] = spec.trial_dir;
  {
    LocalBackend b(no_shim, clock_);
    ASSERT_TRUE(b.Launch(spec).ok());
    EXPECT_EQ(b.Running(), 1) << "its room is taken";
    EXPECT_TRUE(b.Poll().empty()) << "but nothing started";
    EXPECT_EQ(FindTrialProcess(1, spec.trial_dir), 0);
    b.Act();
    ASSERT_EQ(b.Poll().size(), 1u);  // kStarted
    b.Detach();                      // the daemon goes; the trial runs on
  }
  pid_t found = FindTrialProcess(1, spec.trial_dir);
  ASSERT_GT(found, 0);
  EXPECT_EQ(FindTrialProcess(1, dir_ + "/another"), 0) << "another daemon's trial 1";
  LocalBackend b(no_shim, clock_);
  ASSERT_TRUE(b.Adopt(spec, "", "").ok()) << "no hpo.pid, no stored backend id";
  auto started = b.Poll();
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].backend_id, absl::StrCat("local:pid=", found));
  ASSERT_TRUE(fakes::StopNow(b, 1, absl::Seconds(1)).ok());
  auto exits = WaitExits(b, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].stop_requested);
}

}  // namespace
}  // namespace hpo::backend
