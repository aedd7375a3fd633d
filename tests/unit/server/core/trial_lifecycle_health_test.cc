// TrialLifecycle's hang watchdog (trial_lifecycle_health.cc): a running trial silent past its
// timeout is stopped and ends LOST as hung, retried, not counted as failed; under `auto` the
// timeout follows the trial's own pace.
#include "gmock/gmock.h"
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
  EXPECT_THAT(trial.rec.message, ::testing::StartsWith("hung: no report for 30s"));
  ASSERT_EQ(sweep.trials().size(), 2u) << "retried";
  EXPECT_EQ(sweep.trials()[1]->rec.retry_of, trial.rec.id);
  EXPECT_EQ(sweep.failed(), 0) << "a hang does not count toward max_failed";
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

}  // namespace
}  // namespace hpo::server
