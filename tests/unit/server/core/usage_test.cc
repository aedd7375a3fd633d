// GPU-hours and node-hours in virtual time (server/core/usage.h): what a sweep's trials and the
// allocations held for it used, the budgets that stop new trials, and the arithmetic across a
// restart. The allocations are the simulated backend's model of Slurm steps mode.
#include "server/core/usage.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hpo/v1/states.h"
#include "tests/fakes/test_daemon.h"

namespace hpo::server {
namespace {

using ::testing::HasSubstr;

class UsageTest : public ::testing::Test {
 protected:
  // Trials of 10 s (the simulated default), `per_trial` resources, `concurrent` at a time.
  int64_t Submit(int max_trials, int concurrent, const std::string& resources,
                 const std::string& budget_extra) {
    auto id = daemon_.Submit(absl::StrCat(
        "parameters: {x: {type: float, low: 0, high: 1}}\n",
        "objective: {metric: loss, direction: minimize}\ncommand: [train, '--x={x}']\n",
        "budget: {max_trials: ", max_trials, ", max_concurrent: ", concurrent, budget_extra,
        "}\nresources: ", resources, "\n"));
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }
  // `seconds` of virtual time, one batch a second.
  void Run(int seconds) {
    for (int i = 0; i < seconds; ++i) {
      daemon_.clock().Advance(absl::Seconds(1));
      controller().RunOnce();
    }
  }
  v1::Sweep Sweep(int64_t id) {
    return *controller().GetSweep(server::Controller::AllowedForTest(), id);
  }
  Controller& controller() { return daemon_.controller(); }
  fakes::TestDaemon daemon_;
};

// budget.gpu_hours: 0.01 h = 36 GPU-seconds; trials of 2 GPUs and 10 s, 2 at a time.
TEST_F(UsageTest, AGpuHourBudgetStopsNewTrialsAndLetsTheRunningOnesFinish) {
  int64_t id = Submit(10, 2, "{gpus: 2}", ", gpu_hours: 0.01");
  controller().RunOnce();
  daemon_.clock().Advance(absl::Seconds(5));
  controller().RunOnce();
  v1::Sweep mid = Sweep(id);
  EXPECT_DOUBLE_EQ(mid.gpu_seconds(), 20.0);  // 2 trials x 2 GPUs x 5 s
  EXPECT_DOUBLE_EQ(mid.charged_gpu_seconds(), 20.0) << "outside allocations the trials count";
  EXPECT_EQ(mid.gpus_held(), 4);
  EXPECT_DOUBLE_EQ(mid.node_seconds(), 10.0);  // 2 trials x 1 node x 5 s
  EXPECT_EQ(mid.nodes_held(), 2);
  EXPECT_DOUBLE_EQ(mid.allocation_gpu_seconds(), 0.0);
  EXPECT_DOUBLE_EQ(mid.utilization(), 0.0);
  EXPECT_DOUBLE_EQ(mid.gpu_hours_budget(), 0.01);
  EXPECT_DOUBLE_EQ(mid.budget_seconds_left(), 4.0);  // (36 - 20) / 4 GPUs
  daemon_.RunUntilEnded();
  v1::Sweep end = Sweep(id);
  EXPECT_EQ(end.state(), v1::SWEEP_STATE_COMPLETED);
  EXPECT_THAT(end.message(), HasSubstr("budget.gpu_hours (0.01) was reached"));
  EXPECT_EQ(daemon_.Counts(id), (std::map<std::string, int>{{"COMPLETED", 2}}));
  EXPECT_DOUBLE_EQ(end.gpu_seconds(), 40.0);
  EXPECT_EQ(end.gpus_held(), 0);
  EXPECT_DOUBLE_EQ(end.budget_seconds_left(), 0.0);
  // A restart keeps the arithmetic.
  ASSERT_TRUE(daemon_.Restart(/*crash=*/true).ok());
  EXPECT_DOUBLE_EQ(Sweep(id).gpu_seconds(), 40.0);
}

// budget.node_hours outside allocations: each trial holds its node while it runs. 0.005 h =
// 18 node-seconds; 3 trials at a time reach it after 6 s.
TEST_F(UsageTest, ANodeHourBudgetCountsEachTrialsNodes) {
  int64_t id = Submit(10, 3, "{cpus: 1}", ", node_hours: 0.005");
  controller().RunOnce();
  Run(3);
  v1::Sweep mid = Sweep(id);
  EXPECT_DOUBLE_EQ(mid.node_seconds(), 9.0);  // 3 trials x 1 node x 3 s
  EXPECT_EQ(mid.nodes_held(), 3);
  EXPECT_DOUBLE_EQ(mid.node_hours_budget(), 0.005);
  EXPECT_DOUBLE_EQ(mid.budget_seconds_left(), 3.0);  // (18 - 9) / 3 nodes
  daemon_.RunUntilEnded();
  v1::Sweep end = Sweep(id);
  EXPECT_THAT(end.message(), HasSubstr("budget.node_hours (0.005) was reached; 3 trial(s)"));
  EXPECT_DOUBLE_EQ(end.node_seconds(), 30.0);
}

// Steps mode: the sweep holds one allocation of 8 GPUs on 2 nodes from its first launch until
// its last trial ended; 4 trials of 2 GPUs and 10 s run 2 at a time, so the allocation is held
// 20 s: 160 GPU-seconds and 40 node-seconds charged, of which the trials used 80 GPU-seconds.
TEST_F(UsageTest, InAllocationsTheAllocationsAreChargedAndUtilizationIsTheTrialsShare) {
  daemon_.simulated().set_allocations({/*gpus=*/8, /*nodes=*/2, absl::Seconds(30)});
  int64_t id = Submit(4, 2, "{gpus: 2}", "");
  controller().RunOnce();
  Run(5);
  v1::Sweep mid = Sweep(id);
  EXPECT_DOUBLE_EQ(mid.allocation_gpu_seconds(), 40.0);  // 8 GPUs x 5 s
  EXPECT_EQ(mid.allocation_gpus_held(), 8);
  EXPECT_DOUBLE_EQ(mid.gpu_seconds(), 20.0);  // 2 trials x 2 GPUs x 5 s
  EXPECT_DOUBLE_EQ(mid.charged_gpu_seconds(), 40.0);
  EXPECT_DOUBLE_EQ(mid.utilization(), 0.5);
  EXPECT_DOUBLE_EQ(mid.node_seconds(), 10.0) << "the allocation's 2 nodes, not the trials' 2";
  EXPECT_EQ(mid.nodes_held(), 2);
  // hpod dies and comes back: the allocation it still holds keeps its record.
  ASSERT_TRUE(daemon_.Restart(/*crash=*/true).ok());
  EXPECT_DOUBLE_EQ(Sweep(id).allocation_gpu_seconds(), 40.0);
  daemon_.RunUntilEnded();
  controller().RunOnce();  // the allocation's release, reported after the sweep's end
  v1::Sweep end = Sweep(id);
  EXPECT_EQ(end.state(), v1::SWEEP_STATE_COMPLETED);
  EXPECT_DOUBLE_EQ(end.gpu_seconds(), 80.0);
  EXPECT_DOUBLE_EQ(end.allocation_gpu_seconds(), 160.0);
  EXPECT_DOUBLE_EQ(end.charged_gpu_seconds(), 160.0);
  EXPECT_DOUBLE_EQ(end.utilization(), 0.5);
  EXPECT_DOUBLE_EQ(end.node_seconds(), 40.0);
  EXPECT_EQ(end.allocation_gpus_held(), 0);
  // Stored: a restart gives the same figures.
  ASSERT_TRUE(daemon_.Restart(/*crash=*/true).ok());
  daemon_.clock().Advance(absl::Hours(1));
  EXPECT_DOUBLE_EQ(Sweep(id).allocation_gpu_seconds(), 160.0);
  EXPECT_DOUBLE_EQ(Sweep(id).utilization(), 0.5);
}

// A GPU-hour budget in steps mode counts the allocations: 0.02 h = 72 GPU-seconds of an 8-GPU
// allocation is reached after 9 s, though the trials used only half of it; the running trials
// finish at 10 s and the allocation goes with them.
TEST_F(UsageTest, AGpuHourBudgetInAllocationsCountsTheAllocations) {
  daemon_.simulated().set_allocations({8, 1, absl::Seconds(30)});
  int64_t id = Submit(10, 2, "{gpus: 2}", ", gpu_hours: 0.02");
  controller().RunOnce();
  Run(8);
  EXPECT_DOUBLE_EQ(Sweep(id).budget_seconds_left(), 1.0);  // (72 - 64) / 8 GPUs
  daemon_.RunUntilEnded();
  controller().RunOnce();
  v1::Sweep end = Sweep(id);
  EXPECT_THAT(end.message(), HasSubstr("budget.gpu_hours (0.02) was reached; 2 trial(s)"));
  EXPECT_DOUBLE_EQ(end.gpu_seconds(), 40.0);
  EXPECT_DOUBLE_EQ(end.charged_gpu_seconds(), 80.0);
  // Extending the budget below what was charged is refused; above, the sweep goes on.
  v1::ExtendSweepRequest req;
  req.set_sweep_id(id);
  req.set_gpu_hours(0.015);
  absl::StatusOr<v1::Sweep> refused = controller().Extend(Controller::AllowedForTest(), req);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("already used 0.02222 GPU-hours"));
  req.set_gpu_hours(0);
  req.set_add_gpu_hours(0.01);
  ASSERT_TRUE(controller().Extend(Controller::AllowedForTest(), req).ok());
  EXPECT_EQ(Sweep(id).state(), v1::SWEEP_STATE_RUNNING);
  EXPECT_DOUBLE_EQ(Sweep(id).gpu_hours_budget(), 0.03);
}

// What the store says after a clean stop: the allocations' cost ends as hpod exits (the backend
// releases them), and a restart does not count the time it was away.
TEST_F(UsageTest, AllocationsEndWithACleanStop) {
  daemon_.simulated().set_allocations({4, 1, absl::Seconds(30)});
  int64_t id = Submit(4, 1, "{gpus: 1}", "");
  controller().RunOnce();
  Run(4);
  ASSERT_TRUE(daemon_.Restart(/*crash=*/false, /*lose_trials=*/true).ok());
  daemon_.clock().Advance(absl::Hours(1));
  EXPECT_DOUBLE_EQ(Sweep(id).allocation_gpu_seconds(), 16.0);  // 4 GPUs x 4 s
}

}  // namespace
}  // namespace hpo::server
