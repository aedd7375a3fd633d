// TrialLifecycle's ends (trial_lifecycle_ends.cc): how a backend event ends a trial, and what the
// infrastructure lost is retried without counting as the configuration's failure.
#include "gmock/gmock.h"
#include "tests/unit/server/core/lifecycle_fixture.h"

namespace hpo::server {
namespace {

using ::testing::HasSubstr;

TEST_F(LifecycleTest, AnExitZeroCompletesATrialAndAnyOtherExitFailsIt) {
  script_ = [](const backend::LaunchSpec& s) {
    backend::SimulatedFate f;
    f.run_time = absl::Seconds(3);
    f.exit_code = s.env.at("HPO_TRIAL_NUMBER") == "1" ? 3 : 0;  // the second trial
    return f;
  };
  Sweep& sweep = AddSweep(Cycling(3), 3);
  RunUntilEnded(sweep);
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_COMPLETED);
  ASSERT_EQ(sweep.trials().size(), 3u);
  const TrialRecord& failed = sweep.trials()[1]->rec;
  EXPECT_EQ(failed.state, v1::TRIAL_STATE_FAILED);
  EXPECT_EQ(failed.exit_code, 3);
  EXPECT_THAT(failed.message, HasSubstr("code 3"));
  EXPECT_FALSE(failed.infra_failure) << "the configuration's fault";
  EXPECT_EQ(Count(sweep, v1::TRIAL_STATE_COMPLETED), 2);
  EXPECT_EQ(sweep.trials()[0]->rec.ended_at,
            sweep.trials()[0]->rec.started_at.value() + absl::Seconds(3));
}

TEST_F(LifecycleTest, ATrialTheInfrastructureLostIsRetriedAndIsNoFailure) {
  int launches = 0;
  script_ = [&](const backend::LaunchSpec&) {
    backend::SimulatedFate f;
    f.run_time = absl::Seconds(3);
    f.lost = ++launches == 1;  // the first launch: a node failure
    return f;
  };
  Sweep& sweep = AddSweep(Cycling(2), 2);
  RunUntilEnded(sweep);
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_COMPLETED);
  ASSERT_EQ(sweep.trials().size(), 3u) << "two trials and the retry of the lost one";
  const TrialRecord& lost = sweep.trials()[0]->rec;
  EXPECT_EQ(lost.state, v1::TRIAL_STATE_LOST);
  EXPECT_TRUE(lost.infra_failure);
  EXPECT_EQ(lost.interruption, v1::INTERRUPTION_NODE_FAILURE);
  int64_t retried = 0;
  for (const auto& t : sweep.trials()) {
    if (t->rec.retry_of != lost.id) continue;
    ++retried;
    EXPECT_EQ(t->rec.params, lost.params) << "the same configuration again";
    EXPECT_EQ(t->rec.attempt, 2);
    EXPECT_EQ(t->rec.state, v1::TRIAL_STATE_COMPLETED);
  }
  EXPECT_EQ(retried, 1);
  EXPECT_EQ(Count(sweep, v1::TRIAL_STATE_COMPLETED), 2);
  EXPECT_EQ(Count(sweep, v1::TRIAL_STATE_FAILED), 0);
}

}  // namespace
}  // namespace hpo::server
