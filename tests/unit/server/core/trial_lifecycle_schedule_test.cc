// TrialLifecycle's scheduling (trial_lifecycle_schedule.cc): new trials from the sampler up to
// the budget and the concurrency, launches where they fit, and what a launch carries.
#include "gmock/gmock.h"
#include "tests/unit/server/core/lifecycle_fixture.h"

namespace hpo::server {
namespace {

using fakes::ScriptedSampler;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(LifecycleTest, ASamplerFailureEndsTheSweepFailedAfterItsRunningTrials) {
  auto sampler = std::make_unique<ScriptedSampler>(std::vector<ScriptedSampler::Step>{
      X(1), absl::InvalidArgumentError("the space is too small for this")});
  Sweep& sweep = AddSweep(std::move(sampler), 5);
  RunUntilEnded(sweep);
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_FAILED);
  EXPECT_THAT(sweep.rec.message, HasSubstr("the sampler failed: the space is too small for this"));
  ASSERT_EQ(sweep.trials().size(), 1u);
  EXPECT_EQ(sweep.trials()[0]->rec.state, v1::TRIAL_STATE_COMPLETED) << "it ran to its end first";
}

TEST_F(LifecycleTest, AnExhaustedSamplerCompletesTheSweep) {
  auto sampler = std::make_unique<ScriptedSampler>(std::vector<ScriptedSampler::Step>{X(1), X(3)});
  ScriptedSampler& script = *sampler;
  Sweep& sweep = AddSweep(std::move(sampler), 10);
  RunUntilEnded(sweep);
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_COMPLETED);
  ASSERT_EQ(sweep.trials().size(), 2u);
  EXPECT_EQ(std::get<int64_t>(sweep.trials()[1]->rec.params.at("x")), 3);
  EXPECT_EQ(script.calls(), 3) << "asked once more, then never again";
}

TEST_F(LifecycleTest, NeverMoreThanMaxConcurrentRunAndTheyStartInOrder) {
  Sweep& sweep = AddSweep(Cycling(6), 6, /*max_concurrent=*/2);
  int most = 0;
  RunUntilEnded(sweep, absl::Minutes(1), [&] { most = std::max(most, sim_->Running()); });
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_COMPLETED);
  EXPECT_EQ(most, 2);
  EXPECT_EQ(Count(sweep, v1::TRIAL_STATE_COMPLETED), 6);
  std::vector<int64_t> order;
  for (const backend::LaunchSpec& s : sim_->launched()) order.push_back(s.trial_id);
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end())) << "launched in the order created";
}

TEST_F(LifecycleTest, ATrialThatDoesNotFitNowWaitsForRoom) {
  // Three CPUs each on a backend of four: one at a time, whatever the concurrency allows.
  Sweep& sweep = AddSweep(Cycling(3), 3, /*max_concurrent=*/3, "resources: {cpus: 3}\n");
  int most = 0;
  RunUntilEnded(sweep, absl::Minutes(1), [&] { most = std::max(most, sim_->Running()); });
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_COMPLETED);
  EXPECT_EQ(most, 1);
  EXPECT_EQ(Count(sweep, v1::TRIAL_STATE_COMPLETED), 3);
}

TEST_F(LifecycleTest, ALaunchCarriesTheTrialsCommandIdentityAndParameters) {
  Sweep& sweep = AddSweep(Cycling(1), 1);
  Tick();
  Tick();
  ASSERT_EQ(sim_->launched().size(), 1u);
  const backend::LaunchSpec& s = sim_->launched()[0];
  const TrialRecord& rec = sweep.trials()[0]->rec;
  EXPECT_THAT(s.argv, ElementsAre("train", "1"));
  EXPECT_EQ(s.trial_id, rec.id);
  EXPECT_EQ(s.sweep_id, sweep.rec.id);
  EXPECT_EQ(s.trial_dir, rec.trial_dir);
  EXPECT_EQ(s.env.at("HPO_TRIAL_ID"), std::to_string(rec.id));
  EXPECT_EQ(s.env.at("HPO_SWEEP_ID"), std::to_string(sweep.rec.id));
  EXPECT_EQ(s.env.at("HPO_TRIAL_DIR"), rec.trial_dir);
  EXPECT_EQ(s.env.at("HPO_TRIAL_TOKEN"), rec.token);
  EXPECT_FALSE(rec.token.empty());
  EXPECT_EQ(s.env.at("HPO_PARAMS_JSON"), R"({"x":1})")
      << "hpo-shim writes it into the trial directory as params.json";
  EXPECT_EQ(rec.state, v1::TRIAL_STATE_RUNNING);
}

}  // namespace
}  // namespace hpo::server
