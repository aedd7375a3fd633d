// The sweep as one object (server/core/sweep.h): its verbs keep its counts, queues, best trial,
// budgets and GPU time, on their own, without a controller.
#include "server/core/sweep.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hpo/v1/states.h"

namespace hpo::server {
namespace {

using ::testing::ElementsAre;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

std::unique_ptr<Sweep> MakeSweep(const std::string& budget = "max_trials: 10, max_concurrent: 4") {
  PlanResult planned = PlanSweep(
      "parameters: {x: {type: float, low: 0, high: 1}}\n"
      "objective: {metric: loss, direction: minimize}\n"
      "command: [train, '--x={x}']\n"
      "max_retries: 1\n"
      "resources: {gpus: 2, nodes: 2}\n"
      "budget: {" +
          budget + "}\n",
      "<test>", "/tmp");
  EXPECT_TRUE(planned.plan) << (planned.errors.empty() ? "" : planned.errors.front());
  auto sweep = std::make_unique<Sweep>();
  sweep->plan = std::move(*planned.plan);
  sweep->rec.id = 1;
  sweep->rec.state = v1::SWEEP_STATE_RUNNING;
  sweep->rec.created_at = kT0;
  return sweep;
}

// Trial `number` in `state`; origin "" is the sampler's.
std::unique_ptr<TrialRuntime> Trial(int64_t number, v1::TrialState state,
                                    std::optional<double> objective = std::nullopt,
                                    std::string origin = "") {
  auto t = std::make_unique<TrialRuntime>();
  t->rec.id = 100 + number;
  t->rec.number = number;
  t->rec.state = state;
  t->rec.objective = objective;
  t->rec.origin = std::move(origin);
  t->rec.params["x"] = 0.5;
  return t;
}

std::pair<int64_t, int64_t> Range(int64_t from, int64_t to) { return {from, to}; }

void End(Sweep& sweep, int64_t number, v1::TrialState state, std::optional<double> objective) {
  TrialRuntime& t = sweep.trial(number);
  t.rec.state = state;
  t.rec.objective = objective;
  sweep.TrialEnded(t);
}

TEST(Sweep, AddCountsEachTrialByItsOriginAndState) {
  auto sweep = MakeSweep();
  sweep->Add(Trial(0, v1::TRIAL_STATE_RUNNING));
  sweep->Add(Trial(1, v1::TRIAL_STATE_PENDING, std::nullopt, kEnqueued));
  sweep->Add(Trial(2, v1::TRIAL_STATE_COMPLETED, 0.3));
  auto failed = Trial(3, v1::TRIAL_STATE_FAILED);
  sweep->Add(std::move(failed));
  auto lost = Trial(4, v1::TRIAL_STATE_FAILED);
  lost->rec.infra_failure = true;  // not the trial's fault: not counted as failed
  sweep->Add(std::move(lost));
  auto retry = Trial(5, v1::TRIAL_STATE_RUNNING);
  retry->rec.retry_of = 104;  // a retry counts toward nothing new
  sweep->Add(std::move(retry));
  EXPECT_EQ(sweep->sampled(), 4);
  EXPECT_EQ(sweep->enqueued(), 1);
  EXPECT_EQ(sweep->Counted(), 5);  // the budget names a number of trials: enqueued count
  EXPECT_EQ(sweep->active(), 3);
  EXPECT_EQ(sweep->failed(), 1);
  EXPECT_EQ(sweep->best(), 2);
  ASSERT_EQ(sweep->history().size(), 6u);
  EXPECT_TRUE(sweep->history()[2].finished);
  EXPECT_EQ(sweep->history()[2].objective, 0.3);
  EXPECT_FALSE(sweep->history()[0].finished);
  EXPECT_EQ(sweep->objectives()[2], 0.3);
}

TEST(Sweep, AnEndedTrialLeavesTheLineAndFinishesItsHistoryEntry) {
  auto sweep = MakeSweep();
  for (int i = 0; i < 3; ++i) {
    sweep->Add(Trial(i, v1::TRIAL_STATE_PENDING));
    sweep->Wait(i);
  }
  EXPECT_THAT(sweep->pending(), ElementsAre(0, 1, 2));
  End(*sweep, 1, v1::TRIAL_STATE_COMPLETED, 0.4);
  EXPECT_THAT(sweep->pending(), ElementsAre(0, 2));
  EXPECT_EQ(sweep->active(), 2);
  EXPECT_TRUE(sweep->history()[1].finished);
  EXPECT_EQ(sweep->best(), 1);
  End(*sweep, 0, v1::TRIAL_STATE_STOPPED, 0.2);  // a stopped trial may be the best too
  EXPECT_EQ(sweep->best(), 0);
  End(*sweep, 2, v1::TRIAL_STATE_COMPLETED, 0.9);
  EXPECT_EQ(sweep->best(), 0);
  EXPECT_EQ(sweep->active(), 0);
  EXPECT_TRUE(sweep->pending().empty());
}

TEST(Sweep, LostTrialsAreRetriedUnderThePolicyAndFailuresCountTowardMaxFailed) {
  auto sweep = MakeSweep("max_trials: 10, max_concurrent: 4, max_failed: 2");
  for (int i = 0; i < 4; ++i) sweep->Add(Trial(i, v1::TRIAL_STATE_RUNNING));
  TrialRuntime& lost = sweep->trial(0);
  lost.rec.state = v1::TRIAL_STATE_LOST;
  lost.rec.attempt = 1;
  EXPECT_TRUE(sweep->TrialEnded(lost).retried);
  TrialRuntime& again = sweep->trial(1);
  again.rec.state = v1::TRIAL_STATE_LOST;
  again.rec.attempt = 2;  // past max_retries 1
  EXPECT_FALSE(sweep->TrialEnded(again).retried);
  EXPECT_THAT(sweep->retries(), ElementsAre(0));
  EXPECT_EQ(sweep->TakeRetry(), 0);
  EXPECT_EQ(sweep->TakeRetry(), std::nullopt);

  TrialRuntime& one = sweep->trial(2);
  one.rec.state = v1::TRIAL_STATE_FAILED;
  EXPECT_FALSE(sweep->TrialEnded(one).max_failed_hit);
  TrialRuntime& two = sweep->trial(3);
  two.rec.state = v1::TRIAL_STATE_FAILED;
  EXPECT_TRUE(sweep->TrialEnded(two).max_failed_hit);
  EXPECT_EQ(sweep->failed(), 2);
}

TEST(Sweep, EnqueuedConfigurationsGoFirstAndAResumedSegmentKeepsItsPlace) {
  auto sweep = MakeSweep();
  algorithms::Params p;
  p["x"] = 0.25;
  sweep->rec.queue.push_back(p);
  EXPECT_TRUE(sweep->MoreToCreate());
  std::optional<algorithms::Params> taken = sweep->TakeQueued();
  ASSERT_TRUE(taken);
  EXPECT_EQ(std::get<double>(taken->at("x")), 0.25);
  EXPECT_EQ(sweep->TakeQueued(), std::nullopt);
  for (int i = 0; i < 3; ++i) sweep->Add(Trial(i, v1::TRIAL_STATE_PENDING));
  sweep->Wait(0);
  sweep->Wait(1);
  sweep->Wait(2, /*first=*/true);
  std::deque<int64_t> line = sweep->TakeWaiting();
  EXPECT_THAT(line, ElementsAre(2, 0, 1));
  EXPECT_TRUE(sweep->pending().empty());
}

TEST(Sweep, DirectoriesAheadAreAskedForOnceEach) {
  auto sweep = MakeSweep();
  EXPECT_EQ(sweep->RequestDirsUntil(4), Range(0, 4));
  EXPECT_EQ(sweep->RequestDirsUntil(4), Range(4, 4));
  EXPECT_EQ(sweep->RequestDirsUntil(6), Range(4, 6));
  sweep->DirMadeAhead(5, absl::UnavailableError("disk full"));
  EXPECT_EQ(sweep->TakeDirMadeAhead(4), std::nullopt);
  std::optional<absl::Status> made = sweep->TakeDirMadeAhead(5);
  ASSERT_TRUE(made);
  EXPECT_TRUE(absl::IsUnavailable(*made));
  EXPECT_EQ(sweep->TakeDirMadeAhead(5), std::nullopt);
  // Trials loaded at start take their numbers: what is asked for next starts after them.
  auto loaded = MakeSweep();
  for (int i = 0; i < 3; ++i) loaded->Add(Trial(i, v1::TRIAL_STATE_COMPLETED, 1.0));
  EXPECT_EQ(loaded->RequestDirsUntil(5), Range(3, 5));
}

TEST(Sweep, GpuTimeIsReckonedInOnePlace) {
  auto sweep = MakeSweep();
  TrialRuntime& t = sweep->Add(Trial(0, v1::TRIAL_STATE_RUNNING));
  EXPECT_EQ(sweep->TrialGpus(t.rec), 4);  // 2 per node x 2 nodes
  EXPECT_DOUBLE_EQ(sweep->SegmentGpuSeconds(t.rec, kT0, kT0 + absl::Seconds(10)), 40);
  EXPECT_DOUBLE_EQ(sweep->SegmentGpuSeconds(t.rec, kT0, kT0 - absl::Seconds(10)), 0);
  t.rec.gpu_seconds = 100;  // earlier segments
  t.rec.segment_started_at = kT0;
  EXPECT_DOUBLE_EQ(sweep->GpuSeconds(t.rec, kT0 + absl::Seconds(5)), 120);
  t.rec.state = v1::TRIAL_STATE_COMPLETED;  // no running segment: what it had
  EXPECT_DOUBLE_EQ(sweep->GpuSeconds(t.rec, kT0 + absl::Seconds(5)), 100);
}

TEST(Sweep, AnHourBudgetIsSpentOnceAndJudgedAgainAfterAChange) {
  auto sweep = MakeSweep("max_trials: 10, max_concurrent: 4, gpu_hours: 0.01");  // 36 GPU-s
  TrialRuntime& t = sweep->Add(Trial(0, v1::TRIAL_STATE_RUNNING));
  t.rec.started_at = t.rec.segment_started_at = kT0;
  sweep->Add(Trial(1, v1::TRIAL_STATE_RUNNING));
  TrialRuntime& lost = sweep->trial(1);
  lost.rec.state = v1::TRIAL_STATE_LOST;
  sweep->TrialEnded(lost);
  EXPECT_EQ(sweep->retries().size(), 1u);
  EXPECT_EQ(sweep->CheckHourBudgets(kT0 + absl::Seconds(8)), std::nullopt);  // 32 GPU-s
  EXPECT_EQ(sweep->CheckHourBudgets(kT0 + absl::Seconds(9)), "budget.gpu_hours (0.01)");
  EXPECT_EQ(sweep->budget_spent(), "budget.gpu_hours (0.01)");
  EXPECT_TRUE(sweep->retries().empty()) << "no retry once the budget is spent";
  EXPECT_FALSE(sweep->MoreToCreate());
  EXPECT_EQ(sweep->CheckHourBudgets(kT0 + absl::Seconds(20)), std::nullopt) << "said once";
  BudgetChange more;
  more.gpu_hours = 1;
  sweep->ChangeBudget(more);
  EXPECT_EQ(sweep->budget_spent(), std::nullopt);
  EXPECT_EQ(sweep->spec().budget.gpu_hours, 1);
  EXPECT_EQ(sweep->CheckHourBudgets(kT0 + absl::Seconds(20)), std::nullopt);
  EXPECT_TRUE(sweep->MoreToCreate());
}

TEST(Sweep, AnAllocationThatEndedStaysEnded) {
  auto sweep = MakeSweep();
  AllocationRecord a;
  a.id = "slurm:1";
  a.sweep_id = 1;
  a.gpus = 4;
  a.started_at = kT0;
  EXPECT_TRUE(sweep->NoteAllocation(a));
  a.ended_at = kT0 + absl::Hours(1);
  EXPECT_TRUE(sweep->NoteAllocation(a));
  AllocationRecord stale = a;
  stale.ended_at.reset();
  EXPECT_FALSE(sweep->NoteAllocation(stale));
  EXPECT_EQ(sweep->allocations().at("slurm:1").ended_at, kT0 + absl::Hours(1));
}

// A trial knows its last 256 report ids and its last 32 report intervals; an ended trial keeps
// no memory for them.
TEST(TrialRuntime, KnowsItsRecentReportsAndPaceAndReleasesThem) {
  TrialRuntime t;
  for (int64_t id = 1; id <= 300; ++id) t.NoteReport(id, id * 10);
  EXPECT_EQ(t.StoredStep(44), std::nullopt);  // overwritten
  EXPECT_EQ(t.StoredStep(45), 450);
  EXPECT_EQ(t.StoredStep(300), 3000);
  EXPECT_EQ(t.StoredStep(0), std::nullopt);
  EXPECT_EQ(t.recent_reports.values().size(), TrialRuntime::kRecentReports);
  // Intervals: 40 of 1 s, then 20 of 5 s: the median of the last 32 (12 of 1 s, 20 of 5 s).
  absl::Time at = absl::FromUnixSeconds(1'700'000'000);
  t.pace.Note(at);
  for (int i = 0; i < 40; ++i) t.pace.Note(at += absl::Seconds(1));
  EXPECT_EQ(t.pace.Median(), absl::Seconds(1));
  for (int i = 0; i < 20; ++i) t.pace.Note(at += absl::Seconds(5));
  EXPECT_EQ(t.pace.Median(), absl::Seconds(5));
  t.recent_reports.Release();
  t.pace.gaps.Release();
  EXPECT_EQ(t.StoredStep(300), std::nullopt);
  EXPECT_EQ(t.recent_reports.values().capacity(), 0u);
  EXPECT_EQ(t.pace.Median(), std::nullopt);
}

}  // namespace
}  // namespace hpo::server
