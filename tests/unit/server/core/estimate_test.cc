// EstimateSweep (estimate.h): a sweep's cost from its schedule, in virtual time.
#include "server/core/estimate.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hpo::server {
namespace {

using ::testing::HasSubstr;

SweepSpec Spec(const std::string& more) {
  ParseResult r = ParseSweepSpec(
      std::string("command: [train, '{x}']\nparameters: {x: {type: float, low: 0, high: 1}}\n"
                  "objective: {metric: loss, direction: minimize}\n") +
          (more.find("early_stopping") == std::string::npos ? "early_stopping: none\n" : "") + more,
      "s.yaml", "/");
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  return *r.spec;
}

EstimateInputs Inputs(int64_t limit, int64_t steps, std::vector<double> step_seconds) {
  EstimateInputs in;
  in.limit = limit;
  in.steps = steps;
  in.step_seconds = std::move(step_seconds);
  return in;
}

TEST(EstimateSweep, WithoutEarlyStoppingEveryTrialRunsEveryStep) {
  SweepSpec spec = Spec("budget: {max_trials: 12, max_concurrent: 4}\nresources: {gpus: 2}\n");
  absl::StatusOr<Estimate> e = EstimateSweep(spec, Inputs(12, 10, {3.0}));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->trials, (EstimateRange{12, 12, 12}));
  EXPECT_EQ(e->steps, (EstimateRange{120, 120, 120}));
  ASSERT_TRUE(e->has_cost);
  EXPECT_NEAR(e->gpu_hours.expected, 12 * 10 * 3.0 * 2 / 3600, 1e-9);
  EXPECT_NEAR(e->node_hours.expected, 12 * 10 * 3.0 / 3600, 1e-9);
  EXPECT_NEAR(e->wall_seconds.expected, 3 * 30, 1e-6) << "three rounds of four";
}

TEST(EstimateSweep, AshaStopsMostTrialsAtItsFirstRungs) {
  SweepSpec spec = Spec(
      "budget: {max_trials: 81, max_concurrent: 1}\n"
      "early_stopping: {name: asha, min_resource: 1, max_resource: 27, reduction_factor: 3}\n");
  absl::StatusOr<Estimate> e = EstimateSweep(spec, Inputs(81, 27, {}));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->trials.expected, 81);
  // One at a time, each trial meets a full record at every rung: about a third go on at each.
  // Without stopping: 81 x 27 = 2187 steps; with ASHA's schedule about 81 x (1 + 2/3 + 6/9 +
  // 18/27) = 243.
  EXPECT_LT(e->steps.high, 2187 / 3);
  EXPECT_GT(e->steps.low, 150);
  EXPECT_LE(e->steps.low, e->steps.expected);
  EXPECT_LE(e->steps.expected, e->steps.high);
  EXPECT_FALSE(e->has_cost) << "no step time: trials and steps only";
}

TEST(EstimateSweep, BudgetsBoundTheSweep) {
  // Wall time only: as many as fit in 100 s, two at a time, 10 s each.
  SweepSpec spec = Spec("budget: {max_concurrent: 2, wall_time: 100s}\n");
  absl::StatusOr<Estimate> e = EstimateSweep(spec, Inputs(0, 10, {1.0}));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->trials.expected, 20);
  EXPECT_NEAR(e->wall_seconds.expected, 100, 1e-6);
  // GPU-hours: no trial starts once 1 GPU-hour was used; those running finish.
  spec =
      Spec("budget: {max_trials: 1000, max_concurrent: 1, gpu_hours: 1}\nresources: {gpus: 1}\n");
  e = EstimateSweep(spec, Inputs(1000, 10, {60.0}));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->trials.expected, 6);
  EXPECT_NEAR(e->gpu_hours.expected, 1.0, 1e-9);
}

TEST(EstimateSweep, SaysWhatItCannotKnow) {
  SweepSpec spec = Spec("budget: {max_trials: 5}\n");
  EXPECT_THAT(std::string(EstimateSweep(spec, Inputs(5, 0, {})).status().message()),
              HasSubstr("plan: {steps: N}"));
  spec = Spec("budget: {wall_time: 1h}\n");
  EXPECT_THAT(std::string(EstimateSweep(spec, Inputs(0, 10, {})).status().message()),
              HasSubstr("plan: {step_time: 30s}"));
}

TEST(EstimateSweep, LearnsFromAnEarlierSweepsTrialsAndRoundTrips) {
  std::vector<TrialRecord> trials(3);
  for (int i = 0; i < 3; ++i) {
    trials[i].state = i < 2 ? v1::TRIAL_STATE_COMPLETED : v1::TRIAL_STATE_FAILED;
    trials[i].step = 20;
    trials[i].started_at = absl::FromUnixSeconds(1000);
    trials[i].ended_at = absl::FromUnixSeconds(1000 + 40 * (i + 1));
  }
  EstimateInputs in = InputsFromTrials({&trials[0], &trials[1], &trials[2]});
  EXPECT_EQ(in.steps, 20);
  EXPECT_EQ(in.step_seconds, (std::vector<double>{2.0, 4.0})) << "finished trials only";

  // With their report spans: a step is the time between the first and last report over the
  // steps between; the rest is startup (before the first step) and, for a completed trial, tail.
  trials[0].id = 1;
  trials[1].id = 2;
  trials[1].state = v1::TRIAL_STATE_STOPPED;  // stopped by hpod: its end is not its own
  trials[1].step = 5;
  std::map<int64_t, ReportSpan> spans;
  // Trial 1: started at 1000, first report (step 1) at 1012, step 20 at 1031, ended at 1040.
  spans[1] = {1, 20, absl::FromUnixSeconds(1012), absl::FromUnixSeconds(1031)};
  // Trial 2: started at 1000, step 1 at 1020 (18 s to start), step 5 at 1028, ended at 1080.
  spans[2] = {1, 5, absl::FromUnixSeconds(1020), absl::FromUnixSeconds(1028)};
  in = InputsFromTrials({&trials[0], &trials[1], &trials[2]}, spans);
  EXPECT_EQ(in.steps, 20) << "completed trials only";
  EXPECT_EQ(in.step_seconds, (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(in.startup_seconds, (std::vector<double>{11.0, 18.0}));
  EXPECT_EQ(in.tail_seconds, (std::vector<double>{9.0, 0.0}));

  Estimate e;
  e.trials = {1, 2, 3};
  e.has_cost = true;
  e.gpu_hours = {0.5, 1, 1.5};
  e.basis = "b";
  EXPECT_EQ(EstimateFromJson(EstimateJson(e)), e);
  EXPECT_EQ(EstimateFromJson(""), std::nullopt);
}

TEST(EstimateSweep, ATrialsStartupAndTailAreChargedAndHoldItsPlace) {
  SweepSpec spec = Spec("budget: {max_trials: 4, max_concurrent: 2}\nresources: {gpus: 1}\n");
  EstimateInputs in = Inputs(4, 10, {1.0});
  in.startup_seconds = {5.0};
  in.tail_seconds = {3.0};
  absl::StatusOr<Estimate> e = EstimateSweep(spec, in);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NEAR(e->gpu_hours.expected, 4 * (5 + 10 + 3) / 3600.0, 1e-9);
  EXPECT_NEAR(e->wall_seconds.expected, 2 * 18, 1e-6) << "the next trial waits for the tail";
}

TEST(EstimateSweep, MaxTrialStepsShortensEveryTrial) {
  SweepSpec spec = Spec(
      "budget: {max_trials: 6, max_concurrent: 3, max_trial_steps: 4}\nresources: {gpus: 1}\n");
  absl::StatusOr<Estimate> e = EstimateSweep(spec, Inputs(6, 100, {2.0}));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->steps, (EstimateRange{24, 24, 24}));
  EXPECT_NEAR(e->gpu_hours.expected, 6 * 4 * 2.0 / 3600, 1e-9);
}

}  // namespace
}  // namespace hpo::server
