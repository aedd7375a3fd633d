// TrialLifecycle's saves and events (trial_lifecycle.cc): every transition is in the store and
// the event log, and progress is saved within the progress interval.
#include "server/core/trial_lifecycle.h"

#include "hpo/v1/hpo.pb.h"
#include "tests/unit/server/core/lifecycle_fixture.h"

namespace hpo::server {
namespace {

TEST_F(LifecycleTest, EveryTransitionIsSavedAndAnnounced) {
  Sweep& sweep = AddSweep(Cycling(2), 2);
  RunUntilEnded(sweep);
  ASSERT_EQ(sweep.rec.state, v1::SWEEP_STATE_COMPLETED);
  absl::StatusOr<std::vector<TrialRecord>> stored = store_->LoadTrials(sweep.rec.id);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 2u);
  for (const TrialRecord& rec : *stored) {
    EXPECT_EQ(rec.state, v1::TRIAL_STATE_COMPLETED) << "trial " << rec.id;
    EXPECT_TRUE(rec.started_at.has_value());
    EXPECT_TRUE(rec.ended_at.has_value());
  }
  absl::StatusOr<std::vector<SweepRecord>> sweeps = store_->LoadSweeps();
  ASSERT_TRUE(sweeps.ok());
  EXPECT_EQ((*sweeps)[0].state, v1::SWEEP_STATE_COMPLETED);
  // Each trial's life is in the event log, in order: created, started, ended.
  for (const TrialRecord& rec : *stored) {
    absl::StatusOr<std::vector<EventRecord>> events = store_->LoadTrialEvents(rec.id, 100);
    ASSERT_TRUE(events.ok());
    std::vector<v1::TrialState> states;
    for (const EventRecord& e : *events) {
      v1::Event event;
      ASSERT_TRUE(event.ParseFromString(e.payload));
      if (event.has_trial()) states.push_back(event.trial().state());
    }
    ASSERT_FALSE(states.empty());
    EXPECT_EQ(states.back(), v1::TRIAL_STATE_COMPLETED);
    EXPECT_NE(std::find(states.begin(), states.end(), v1::TRIAL_STATE_RUNNING), states.end());
  }
}

TEST_F(LifecycleTest, ProgressIsSavedWithinTheInterval) {
  script_ = [](const backend::LaunchSpec&) {
    backend::SimulatedFate f;
    f.run_time = absl::Hours(1);
    return f;
  };
  Sweep& sweep = AddSweep(Cycling(1), 1);
  Tick();
  Tick();
  ASSERT_EQ(sweep.trials().size(), 1u);
  TrialRuntime& trial = *sweep.trials()[0];
  ASSERT_EQ(trial.rec.state, v1::TRIAL_STATE_RUNNING);
  trial.rec.step = 7;
  lifecycle_->MarkProgress(trial);
  Tick();  // within the interval: not yet
  EXPECT_EQ((*store_->LoadTrials(sweep.rec.id))[0].step, -1);
  clock_.Advance(lifecycle_->options().progress_interval);
  Tick();
  EXPECT_EQ((*store_->LoadTrials(sweep.rec.id))[0].step, 7);
}

}  // namespace
}  // namespace hpo::server
