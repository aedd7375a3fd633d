// The budget arithmetic on its own (server/core/budget.h): no daemon, no clock, only values in
// and a decision out.
#include "server/core/budget.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hpo::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::Time kCreated = absl::FromUnixSeconds(1'700'000'000);

// A sweep 20 trials into a limit of 20, 2 GPU-hours and 1 node-hour used, 1 h old.
BudgetState Used() {
  BudgetState s;
  s.sweep_id = 7;
  s.budget.max_trials = 20;
  s.budget.gpu_hours = 4;
  s.budget.node_hours = 3;
  s.budget.wall_time = absl::Hours(2);
  s.limit = 20;
  s.made = 20;
  s.sampler = "tpe";
  s.sampled = 20;
  s.created = kCreated;
  s.now = kCreated + absl::Hours(1);
  s.usage.trial_gpu_seconds = 2 * 3600;
  s.usage.trial_node_seconds = 1 * 3600;
  s.usage.trial_gpus = 4;
  s.usage.trial_nodes = 2;
  return s;
}

v1::ExtendSweepRequest Ask(const char* text) {
  v1::ExtendSweepRequest req;
  // "key=value ..." by the names below, for short tests.
  const std::string t = std::string(" ") + text;
  auto num = [&](const std::string& key) -> double {
    size_t at = t.find(" " + key + "=");
    return at == std::string::npos ? 0 : std::stod(t.substr(at + key.size() + 2));
  };
  req.set_max_trials(static_cast<int64_t>(num("trials")));
  req.set_add_trials(static_cast<int64_t>(num("add_trials")));
  req.set_max_concurrent(static_cast<int64_t>(num("concurrent")));
  req.set_wall_time_seconds(num("wall"));
  req.set_gpu_hours(num("gpu"));
  req.set_add_gpu_hours(num("add_gpu"));
  req.set_node_hours(num("node"));
  req.set_add_node_hours(num("add_node"));
  return req;
}

TEST(Budget, WallTimeCountsFromCreation) {
  Budget b;
  EXPECT_FALSE(WallTimeRanOut(b, kCreated, kCreated + absl::Hours(100)));  // none set
  b.wall_time = absl::Hours(1);
  EXPECT_FALSE(WallTimeRanOut(b, kCreated, kCreated + absl::Minutes(59)));
  EXPECT_TRUE(WallTimeRanOut(b, kCreated, kCreated + absl::Hours(1)));
}

TEST(Budget, HourBudgetsReachedAndHowLongTheyLast) {
  Budget b;
  b.gpu_hours = 4;
  b.node_hours = 3;
  Usage u = Used().usage;
  EXPECT_EQ(BudgetReached(b, u), std::nullopt);
  // (4 h - 2 h) / 4 GPUs = 1800 s; (3 h - 1 h) / 2 nodes = 3600 s: the sooner.
  EXPECT_DOUBLE_EQ(*BudgetSecondsLeft(b, u), 1800);
  u.trial_gpu_seconds = 4 * 3600;
  EXPECT_EQ(BudgetReached(b, u), "budget.gpu_hours (4)");
  EXPECT_DOUBLE_EQ(*BudgetSecondsLeft(b, u), 0);
  EXPECT_EQ(BudgetSecondsLeft(Budget(), u), std::nullopt);
  // In allocations, what they held is charged, not the trials.
  u.in_allocations = true;
  u.allocation_gpu_seconds = 1 * 3600;
  u.allocation_node_seconds = 3 * 3600;
  EXPECT_EQ(BudgetReached(b, u), "budget.node_hours (3)");
}

TEST(Budget, ExtendGivesMoreTrialsEitherWay) {
  BudgetState s = Used();
  absl::StatusOr<Extension> set = ExtendBudget(Ask("trials=30"), s);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->change.max_trials, 30);
  EXPECT_THAT(set->said, ElementsAre("trials 30"));
  absl::StatusOr<Extension> add = ExtendBudget(Ask("add_trials=5 concurrent=8"), s);
  ASSERT_TRUE(add.ok()) << add.status();
  EXPECT_EQ(add->change.max_trials, 25);
  EXPECT_EQ(add->change.max_concurrent, 8);
  EXPECT_THAT(add->said, ElementsAre("trials 25", "concurrent 8"));
}

TEST(Budget, ExtendRefusesWhatGivesNothingMore) {
  BudgetState s = Used();
  auto refused = [&](const char* ask, const char* why) {
    absl::StatusOr<Extension> e = ExtendBudget(Ask(ask), s);
    ASSERT_FALSE(e.ok()) << ask;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << ask;
    EXPECT_THAT(e.status().message(), HasSubstr(why)) << ask;
  };
  refused("", "nothing to change");
  refused("trials=20", "already made 20 trial(s)");
  refused("trials=30 add_trials=5", "not both");
  refused("gpu=1", "already used 2 GPU-hours");
  refused("gpu=5 add_gpu=1", "not both");
  refused("concurrent=4", "made all its 20 trial(s); give --trials too");
  v1::ExtendSweepRequest negative;
  negative.set_add_gpu_hours(-1);
  EXPECT_FALSE(ExtendBudget(negative, s).ok());
  s.sampler_done = true;
  refused("trials=30", "tpe search has nothing more to propose (20 trial(s) made)");
}

TEST(Budget, ExtendMustMoveWhatStoppedTheSweep) {
  BudgetState s = Used();
  s.now = kCreated + absl::Hours(3);  // past its 2 h
  absl::StatusOr<Extension> e = ExtendBudget(Ask("trials=30"), s);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("wall time (2h) has run out; give --wall-time"));
  e = ExtendBudget(Ask("trials=30 wall=3600"), s);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(*e->change.wall_time, absl::Hours(4));  // 3 h run + 1 h more, from creation

  s = Used();
  s.usage.trial_gpu_seconds = 4 * 3600;  // its GPU-hours are spent
  e = ExtendBudget(Ask("trials=30"), s);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("used its budget.gpu_hours (4); give --gpu-hours"));
  e = ExtendBudget(Ask("trials=30 add_gpu=2"), s);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_DOUBLE_EQ(*e->change.gpu_hours, 6);
  EXPECT_THAT(e->said, ElementsAre("trials 30", "GPU-hours 6"));
}

TEST(Budget, ExtendKeepsEarlierChanges) {
  BudgetState s = Used();
  s.change.max_concurrent = 3;
  s.queued = 2;  // configurations still to run: no --trials needed
  absl::StatusOr<Extension> e = ExtendBudget(Ask("node=5"), s);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->change.max_concurrent, 3);
  EXPECT_DOUBLE_EQ(*e->change.node_hours, 5);
}

TEST(Budget, EnqueueRaisesTheTrialLimitOnlyWhenTheConfigurationsNeedIt) {
  BudgetState s = Used();
  s.made = 15;
  s.queued = 3;
  absl::StatusOr<Extension> fits = EnqueueBudget(2, s);  // 15 + 3 + 2 = 20: within
  ASSERT_TRUE(fits.ok());
  EXPECT_FALSE(fits->change.max_trials);
  EXPECT_TRUE(fits->said.empty());
  absl::StatusOr<Extension> more = EnqueueBudget(4, s);
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->change.max_trials, 22);
  EXPECT_THAT(more->said, ElementsAre("budget.max_trials raised to 22 for them"));
  s.budget.max_trials = 0;  // a grid without a number runs its points besides them
  EXPECT_FALSE(EnqueueBudget(4, s)->change.max_trials);
}

TEST(Budget, EnqueueRefusedOnceTheWallTimeOrAnHourBudgetRanOut) {
  BudgetState s = Used();
  s.now = kCreated + absl::Hours(2);
  EXPECT_THAT(EnqueueBudget(1, s).status().message(),
              HasSubstr("wall time has run out; `hpo extend 7 --wall-time D` first"));
  s = Used();
  s.usage.trial_node_seconds = 3 * 3600;
  EXPECT_THAT(EnqueueBudget(1, s).status().message(),
              HasSubstr("used its budget.node_hours (3); `hpo extend 7 --node-hours X` first"));
}

}  // namespace
}  // namespace hpo::server
