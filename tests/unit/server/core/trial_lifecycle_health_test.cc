// TrialLifecycle's hang watchdog (trial_lifecycle_health.cc): a running trial silent past its
// timeout is stopped and ends LOST as hung, retried, not counted as failed; under `auto` the
// timeout follows the trial's own pace. Only time in which hpod could hear the trial counts (not
// hpod's own absence, nor a partition from the trial's agent), and a trial that reports into its
// journal is never caught.
#include <filesystem>
#include <fstream>

#include "common/report_journal.h"
#include "gmock/gmock.h"
#include "server/core/report_intake.h"
#include "tests/unit/server/core/lifecycle_fixture.h"

namespace hpo::server {
namespace {

class LifecycleHealthTest : public LifecycleTest {
 protected:
  void SetUp() override {
    LifecycleTest::SetUp();
    script_ = [](const backend::LaunchSpec&) {
      backend::SimulatedFate f;
      f.run_time = absl::Hours(1);  // runs on, silent unless the test reports for it
      f.stop_after = absl::Seconds(1);
      return f;
    };
  }
  // Ticks once a second for `d`; `report` (when set) is made for `trial` at each tick it
  // returns true for, with the tick's time.
  void Run(absl::Duration d, TrialRuntime* trial = nullptr,
           const std::function<bool(int)>& report = nullptr) {
    int n = 0;
    for (absl::Time end = clock_.Now() + d; clock_.Now() < end; ++n) {
      if (report && report(n)) trial->pace.Note(clock_.Now());
      Tick();
      clock_.Advance(absl::Seconds(1));
    }
  }
};

TEST_F(LifecycleHealthTest, ASilentTrialIsStoppedLostAsHungAndRetriedNotCountedAsFailed) {
  Sweep& sweep = AddSweep(Cycling(1), 1, 1, "health: {report_timeout: 30s}\n");
  Tick();
  Tick();
  TrialRuntime& trial = *sweep.trials()[0];
  ASSERT_EQ(trial.rec.state, v1::TRIAL_STATE_RUNNING);
  Run(absl::Seconds(25));
  EXPECT_FALSE(trial.stop_requested()) << "within its timeout";
  Run(absl::Seconds(10));
  EXPECT_EQ(trial.rec.state, v1::TRIAL_STATE_LOST);
  EXPECT_EQ(trial.rec.interruption, v1::INTERRUPTION_HUNG);
  EXPECT_THAT(trial.rec.message,
              ::testing::MatchesRegex("hung: no report for 3[01]s \\(its timeout is 30s\\)"));
  ASSERT_EQ(sweep.trials().size(), 2u) << "retried";
  EXPECT_EQ(sweep.trials()[1]->rec.retry_of, trial.rec.id);
  EXPECT_EQ(sweep.failed(), 0) << "a hang does not count toward max_failed";
}

TEST_F(LifecycleHealthTest, HpodsOwnAbsenceIsNotTheTrialsSilence) {
  Sweep& sweep = AddSweep(Cycling(1), 1, 1, "health: {report_timeout: 30s}\n");
  Tick();
  Tick();
  TrialRuntime& trial = *sweep.trials()[0];
  ASSERT_EQ(trial.rec.state, v1::TRIAL_STATE_RUNNING);
  Run(absl::Seconds(10), &trial, [](int) { return true; });
  // hpod stopped for 2 minutes (SIGSTOP, a frozen file system): its loop did not run.
  clock_.Advance(absl::Minutes(2));
  Run(absl::Seconds(25));
  EXPECT_FALSE(trial.stop_requested())
      << "caught for hpod's own absence: " << trial.rec.stop_reason;
  // Silence after hpod's return counts.
  Run(absl::Seconds(10));
  EXPECT_EQ(trial.rec.state, v1::TRIAL_STATE_LOST);
  EXPECT_THAT(trial.rec.message,
              ::testing::MatchesRegex("hung: no report for 3[01]s \\(its timeout is 30s\\)"));
}

TEST_F(LifecycleHealthTest, WhileWhatRunsATrialIsOutOfTouchItsSilenceIsNotCounted) {
  Sweep& sweep = AddSweep(Cycling(1), 1, 1, "health: {report_timeout: 30s}\n");
  Tick();
  Tick();
  TrialRuntime& trial = *sweep.trials()[0];
  ASSERT_EQ(trial.rec.state, v1::TRIAL_STATE_RUNNING);
  // A partition between hpod and the trial's agent, for 2 minutes.
  sim_->set_in_touch_since(std::nullopt);
  Run(absl::Minutes(2));
  EXPECT_FALSE(trial.stop_requested()) << "a partition taken for a hang: " << trial.rec.stop_reason;
  sim_->set_in_touch_since(clock_.Now());
  Run(absl::Seconds(25));
  EXPECT_FALSE(trial.stop_requested()) << "counted from before its agent came back";
  Run(absl::Seconds(10));
  EXPECT_EQ(trial.rec.state, v1::TRIAL_STATE_LOST);
}

TEST_F(LifecycleHealthTest, ATrialThatReportsIntoItsJournalIsNeverCaught) {
  ReportIntake intake(table_, *store_, *lifecycle_, clock_);
  lifecycle_->set_late_reports([&](Sweep& s, TrialRuntime& t,
                                   const std::vector<JournalEntry>& entries,
                                   bool running) { intake.Late(s, t, entries, running); });
  Sweep& sweep = AddSweep(Cycling(1), 1, 1, "health: {report_timeout: 30s}\n");
  Tick();
  Tick();
  TrialRuntime& trial = *sweep.trials()[0];
  ASSERT_EQ(trial.rec.state, v1::TRIAL_STATE_RUNNING);
  // Its reports reach only its journal (the way to hpod is cut): one a second for 2 minutes.
  ReportJournal journal(trial.rec.trial_dir);
  int64_t step = 0;
  for (absl::Time end = clock_.Now() + absl::Minutes(2); clock_.Now() < end;) {
    JournalEntry e;
    e.id = ++step + 1000;
    e.step = step;
    e.metrics = {{"loss", 1.0 / static_cast<double>(step)}};
    e.time = clock_.Now();
    ASSERT_TRUE(journal.Append(e).ok());
    Tick();
    clock_.Advance(absl::Seconds(1));
  }
  EXPECT_FALSE(trial.stop_requested()) << "caught while it reported: " << trial.rec.stop_reason;
  absl::StatusOr<std::vector<ReportRecord>> stored = store_->LoadReports(trial.rec.id);
  ASSERT_TRUE(stored.ok());
  EXPECT_GE(stored->size(), 90u) << "what hpod had not heard was taken from the journal";
  // Then it truly stops: caught.
  Run(absl::Seconds(35));
  EXPECT_EQ(trial.rec.state, v1::TRIAL_STATE_LOST);
  EXPECT_EQ(trial.rec.interruption, v1::INTERRUPTION_HUNG);
}

TEST_F(LifecycleHealthTest, ATrialWhoseEndHpodHadNotHeardYetIsNotHung) {
  // It ends after 20 s with exit 0, but its end reaches hpod 15 s later (a jobs-mode poll on a
  // loaded slurmctld): the watchdog catches it meanwhile, and its stop finds it gone.
  script_ = [](const backend::LaunchSpec&) {
    backend::SimulatedFate f;
    f.run_time = absl::Seconds(20);
    f.end_heard_after = absl::Seconds(15);
    return f;
  };
  Sweep& sweep = AddSweep(Cycling(1), 1, 1, "health: {report_timeout: 30s}\n");
  Tick();
  Tick();
  TrialRuntime& trial = *sweep.trials()[0];
  ASSERT_EQ(trial.rec.state, v1::TRIAL_STATE_RUNNING);
  Run(absl::Seconds(34));
  EXPECT_TRUE(trial.stop_requested()) << "caught while its end was on its way";
  Run(absl::Seconds(3));
  EXPECT_EQ(trial.rec.state, v1::TRIAL_STATE_COMPLETED) << trial.rec.message;
  EXPECT_EQ(trial.rec.interruption, v1::INTERRUPTION_UNSPECIFIED);
  EXPECT_FALSE(trial.rec.infra_failure);
  EXPECT_EQ(sweep.trials().size(), 1u) << "not retried";
}

TEST_F(LifecycleHealthTest, AutoFollowsTheTrialsOwnPace) {
  Sweep& sweep =
      AddSweep(Cycling(1), 1, 1, "health: {report_timeout: auto, factor: 5, floor: 1s}\n");
  Tick();
  Tick();
  TrialRuntime& trial = *sweep.trials()[0];
  ASSERT_EQ(trial.rec.state, v1::TRIAL_STATE_RUNNING);
  // Silent before its second report: not watched (its first may come after a long setup).
  Run(absl::Minutes(5));
  EXPECT_FALSE(trial.stop_requested());
  // Every 2 s, then every 6 s (3x slower): the timeout is 5x the median interval, never reached.
  Run(absl::Seconds(20), &trial, [](int n) { return n % 2 == 0; });
  Run(absl::Seconds(60), &trial, [](int n) { return n % 6 == 0; });
  EXPECT_FALSE(trial.stop_requested()) << trial.rec.stop_reason;
  // Then silent: caught once 5x its median interval passed.
  Run(absl::Seconds(40));
  EXPECT_EQ(trial.rec.state, v1::TRIAL_STATE_LOST);
  EXPECT_EQ(trial.rec.interruption, v1::INTERRUPTION_HUNG);
}

TEST_F(LifecycleHealthTest, AResumableSweepContinuesAHungTrialFromItsCheckpoint) {
  Sweep& sweep =
      AddSweep(Cycling(1), 1, 1, "health: {report_timeout: 10s}\ncheckpoint: {grace: 5s}\n");
  Tick();
  Tick();
  TrialRuntime& trial = *sweep.trials()[0];
  Run(absl::Seconds(15));
  ASSERT_EQ(trial.rec.segments.size(), 1u);
  EXPECT_EQ(trial.rec.segments[0].interruption, v1::INTERRUPTION_HUNG);
  EXPECT_EQ(trial.rec.segment, 2);
  EXPECT_FALSE(trial.stop_requested()) << "its next segment is not being stopped";
  EXPECT_EQ(sweep.trials().size(), 1u) << "continued, not retried";
  Run(absl::Seconds(3));
  EXPECT_EQ(trial.rec.state, v1::TRIAL_STATE_RUNNING) << "its next segment runs";
}

TEST_F(LifecycleHealthTest, ASweepWhoseFirstTrialsAllFailAtOnceTheSameWayIsPaused) {
  script_ = [](const backend::LaunchSpec&) {
    backend::SimulatedFate f;
    f.run_time = absl::Seconds(2);
    f.exit_code = 127;
    return f;
  };
  Sweep& sweep = AddSweep(Cycling(10), 10, 1);
  RunUntilEnded(sweep, absl::Seconds(30));
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_PAUSED);
  EXPECT_THAT(sweep.rec.message, ::testing::HasSubstr("its first 3 trials all failed within 1m "
                                                      "the same way (exit code 127)"));
  EXPECT_EQ(Count(sweep, v1::TRIAL_STATE_FAILED), 3) << "no fourth copy of the mistake";
}

TEST_F(LifecycleHealthTest, FailuresThatDifferOrTakeTimeDoNotPauseTheSweep) {
  int n = 0;
  script_ = [&n](const backend::LaunchSpec&) {
    backend::SimulatedFate f;
    f.run_time = absl::Seconds(2);
    f.exit_code = ++n % 2 == 0 ? 1 : 2;  // not the same way
    return f;
  };
  Sweep& differ = AddSweep(Cycling(4), 4, 1);
  RunUntilEnded(differ, absl::Seconds(30));
  EXPECT_EQ(differ.rec.state, v1::SWEEP_STATE_COMPLETED);
  EXPECT_EQ(Count(differ, v1::TRIAL_STATE_FAILED), 4);
  script_ = [](const backend::LaunchSpec&) {
    backend::SimulatedFate f;
    f.run_time = absl::Minutes(2);  // not at once: each trained a while
    f.exit_code = 1;
    return f;
  };
  Sweep& slow = AddSweep(Cycling(4), 4, 1);
  RunUntilEnded(slow, absl::Minutes(10));
  EXPECT_EQ(slow.rec.state, v1::SWEEP_STATE_COMPLETED);
}

// The last word of a step of several tasks whose output interleaves differently each run: that
// of the task srun says failed first (fail-fast compares it), never Slurm's own lines.
TEST_F(LifecycleHealthTest, TheLastWordOfAStepOfSeveralTasksIsTheFailingTasks) {
  std::string dir = root_ + "/t";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/stderr.log")
      << "1: Traceback (most recent call last):\n"
         "0: RuntimeError: NCCL error: remote process exited\n"
         "1: ValueError: learning rate must be positive\n"
         "0: NCCL watchdog: aborting\n"
         "srun: error: n2: task 1: Exited with exit code 1\n"
         "0: slurmstepd-n1: error: *** STEP 1.1 ON n1 CANCELLED AT 2026-12-05T07:46:19 ***\n"
         "srun: error: n1: task 0: Terminated\n";
  EXPECT_EQ(ReadTrialEnd(1, dir).last_error_line, "1: ValueError: learning rate must be positive");
  std::ofstream(dir + "/stderr.log") << "loading\nsh: 1: train.sh: not found\n"
                                        "slurmstepd-n1: error: *** STEP 4.0 CANCELLED ***\n";
  EXPECT_EQ(ReadTrialEnd(1, dir).last_error_line, "sh: 1: train.sh: not found");
}

// Four nodes, three of which fail every trial (exit 75, a rule of the sweep's says the
// infrastructure's): a fault on most nodes is seldom the nodes', so no more than half of them is
// quarantined; and a quarantine ends by itself.
TEST_F(LifecycleHealthTest, QuarantineTakesAtMostItsShareOfTheNodesAndEnds) {
  script_ = [](const backend::LaunchSpec& spec) {
    backend::SimulatedFate f;
    f.node = absl::StrCat("n", spec.trial_id % 4 + 1);
    f.run_time = f.node == "n4" ? absl::Hours(1) : absl::Seconds(2);  // n4's go on
    f.exit_code = f.node == "n4" ? 0 : 75;
    return f;
  };
  Sweep& sweep = AddSweep(Cycling(40), 40, 4,
                          "max_retries: 0\nfailures: {quarantine_after: 1, quarantine_for: 10m, "
                          "max_infrastructure: 0, infrastructure: [{exit_code: 75}]}\n");
  RunUntilEnded(sweep, absl::Minutes(2));
  std::set<std::string> out = sweep.QuarantinedNodes();
  EXPECT_EQ(out.size(), 2u) << "half of the sweep's 4 nodes";
  EXPECT_EQ(out.count("n4"), 0u);
  EXPECT_EQ(sweep.rec.nodes.size(), 4u) << "every node the sweep ran on is known";
  int failed_elsewhere = 0;
  for (const auto& [node, n] : sweep.rec.nodes) {
    if (node != "n4" && !n.quarantined) failed_elsewhere = n.failures;
  }
  EXPECT_GT(failed_elsewhere, 1) << "the third failing node stays in use, and its failures count";
  // A quarantine ends by itself after failures.quarantine_for.
  for (int i = 0; i < 10 * 60 + 2; ++i) {
    Tick();
    clock_.Advance(absl::Seconds(1));
  }
  EXPECT_TRUE(sweep.QuarantinedNodes().empty());
  for (const std::string& node : out) EXPECT_EQ(sweep.rec.nodes[node].failures, 0) << node;
}

// Every trial is lost to the infrastructure: the sweep pauses at failures.max_infrastructure,
// says why, and pauses again at twice as many once resumed.
TEST_F(LifecycleHealthTest, InfrastructureLossesHaveABudgetOfTheirOwn) {
  script_ = [](const backend::LaunchSpec&) {
    backend::SimulatedFate f;
    f.run_time = absl::Seconds(2);
    f.exit_code = 75;
    return f;
  };
  Sweep& sweep = AddSweep(Cycling(20), 20, 1,
                          "max_retries: 10\nfailures: {max_infrastructure: 3, infrastructure: "
                          "[{exit_code: 75}]}\n");
  RunUntilEnded(sweep, absl::Seconds(30));
  ASSERT_EQ(sweep.rec.state, v1::SWEEP_STATE_PAUSED) << sweep.rec.message;
  EXPECT_THAT(sweep.rec.message,
              ::testing::HasSubstr("paused: 3 of its trials were lost to the infrastructure "
                                   "(failures.max_infrastructure is 3)"));
  EXPECT_EQ(Count(sweep, v1::TRIAL_STATE_LOST), 3);
  EXPECT_EQ(sweep.failed(), 0) << "they are not the configuration's failures";
  sweep.Resume("resumed");
  RunUntilEnded(sweep, absl::Seconds(30));
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_PAUSED);
  EXPECT_EQ(Count(sweep, v1::TRIAL_STATE_LOST), 6);
}

}  // namespace
}  // namespace hpo::server
