// TrialLifecycle's stops (trial_lifecycle_stops.cc): a sweep that winds down stops its running
// trials and ends once they did; an early stop is enforced only after its grace.
#include "tests/unit/server/core/lifecycle_fixture.h"

namespace hpo::server {
namespace {

class LifecycleStopsTest : public LifecycleTest {
 protected:
  void SetUp() override {
    LifecycleTest::SetUp();
    script_ = [](const backend::LaunchSpec&) {
      backend::SimulatedFate f;
      f.run_time = absl::Hours(1);
      f.stop_after = absl::Seconds(2);  // it takes two seconds to honour a stop
      return f;
    };
  }
};

TEST_F(LifecycleStopsTest, ACancelStopsTheRunningTrialsAndTheSweepEndsAfterThem) {
  Sweep& sweep = AddSweep(Cycling(4), 4, /*max_concurrent=*/2);
  Tick();
  Tick();
  ASSERT_EQ(sim_->Running(), 2);
  Batch([&] { lifecycle_->BeginEnding(sweep, v1::SWEEP_STATE_CANCELED, "canceled by a test"); });
  Tick();
  EXPECT_FALSE(sweep.Final()) << "its trials are still stopping";
  EXPECT_TRUE(sweep.Ending());
  RunUntilEnded(sweep);
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_CANCELED);
  EXPECT_EQ(sweep.trials().size(), 2u) << "no trial starts once the sweep winds down";
  EXPECT_EQ(Count(sweep, v1::TRIAL_STATE_CANCELED), 2);
  EXPECT_EQ(sim_->Running(), 0);
}

TEST_F(LifecycleStopsTest, AnEarlyStopIsEnforcedOnlyIfTheTrialStillRunsAfterItsGrace) {
  Sweep& sweep = AddSweep(Cycling(1), 1);
  Tick();
  Tick();
  TrialRuntime& trial = *sweep.trials()[0];
  ASSERT_EQ(trial.rec.state, v1::TRIAL_STATE_RUNNING);
  Batch([&] {
    lifecycle_->RequestStop(sweep, trial, v1::TRIAL_STATE_STOPPED, "pruned at step 3",
                            absl::Seconds(10));
  });
  EXPECT_EQ(trial.rec.stop_state, v1::TRIAL_STATE_STOPPED) << "decided, and recorded";
  for (int i = 0; i < 9; ++i) {
    clock_.Advance(absl::Seconds(1));
    Tick();
  }
  EXPECT_TRUE(sim_->Runs(trial.rec.id)) << "within its grace it may end by itself";
  EXPECT_EQ(trial.rec.state, v1::TRIAL_STATE_RUNNING);
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(absl::Seconds(1));
    Tick();
  }
  EXPECT_EQ(trial.rec.state, v1::TRIAL_STATE_STOPPED);
  EXPECT_EQ(trial.rec.stop_reason, "pruned at step 3");
}

}  // namespace
}  // namespace hpo::server
