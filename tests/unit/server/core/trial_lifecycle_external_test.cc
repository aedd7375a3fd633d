// TrialLifecycle's ask and tell (trial_lifecycle_external.cc): trials given out up to the
// concurrency, told back, and those not heard from.
#include "tests/unit/server/core/lifecycle_fixture.h"

namespace hpo::server {
namespace {

TEST_F(LifecycleTest, AskGivesOutRunningTrialsUpToTheConcurrencyAndTellEndsThem) {
  Sweep& sweep = AddSweep(Cycling(3), 3, /*max_concurrent=*/2, "backend: external\n");
  TrialRuntime* first = nullptr;
  Batch([&] {
    absl::StatusOr<TrialRuntime*> a = lifecycle_->Ask(sweep);
    ASSERT_TRUE(a.ok()) << a.status();
    first = *a;
    EXPECT_EQ(first->rec.state, v1::TRIAL_STATE_RUNNING) << "it runs as soon as it is given out";
    ASSERT_TRUE(lifecycle_->Ask(sweep).ok());
    EXPECT_TRUE(absl::IsResourceExhausted(lifecycle_->Ask(sweep).status()));
  });
  Batch([&] { ASSERT_TRUE(lifecycle_->Tell(sweep, *first, true, "").ok()); });
  EXPECT_EQ(first->rec.state, v1::TRIAL_STATE_COMPLETED);
  Batch([&] {
    EXPECT_TRUE(absl::IsFailedPrecondition(lifecycle_->Tell(sweep, *first, true, "")))
        << "told once";
    absl::StatusOr<TrialRuntime*> third = lifecycle_->Ask(sweep);
    ASSERT_TRUE(third.ok()) << "its place is free again";
    ASSERT_TRUE(lifecycle_->Tell(sweep, **third, false, "diverged").ok());
    EXPECT_TRUE(absl::IsOutOfRange(lifecycle_->Ask(sweep).status())) << "the budget is spent";
  });
}

TEST_F(LifecycleTest, AskAndTellAreForExternalSweepsOnly) {
  Sweep& sweep = AddSweep(Cycling(2), 2);
  Batch([&] { EXPECT_TRUE(absl::IsFailedPrecondition(lifecycle_->Ask(sweep).status())); });
  Tick();
  Tick();
  ASSERT_EQ(sweep.trials().size(), 1u);
  Batch([&] {
    EXPECT_TRUE(absl::IsFailedPrecondition(lifecycle_->Tell(sweep, *sweep.trials()[0], true, "")));
  });
  EXPECT_EQ(sweep.trials()[0]->rec.state, v1::TRIAL_STATE_RUNNING);
}

TEST_F(LifecycleTest, AnExternalTrialNotHeardFromWithinItsTimeoutIsLost) {
  Sweep& sweep = AddSweep(Cycling(2), 2, 1, "backend: external\nexternal: {timeout: 30s}\n");
  TrialRuntime* trial = nullptr;
  Batch([&] { trial = *lifecycle_->Ask(sweep); });
  for (int i = 0; i < 29; ++i) {
    clock_.Advance(absl::Seconds(1));
    Tick();
  }
  EXPECT_EQ(trial->rec.state, v1::TRIAL_STATE_RUNNING);
  clock_.Advance(absl::Seconds(2));
  Tick();
  EXPECT_EQ(trial->rec.state, v1::TRIAL_STATE_LOST);
  EXPECT_EQ(trial->rec.interruption, v1::INTERRUPTION_VANISHED);
  EXPECT_TRUE(trial->rec.infra_failure);
}

}  // namespace
}  // namespace hpo::server
