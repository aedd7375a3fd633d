// Several objectives and constraints in a whole daemon in virtual time (server/core/objectives.h):
// the Pareto front and ranks against the rule as written, the metrics hpod measures, constraints,
// multi-objective ASHA stopping trials, and all of it across a restart.
#include "server/core/objectives.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "algorithms/pareto.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hpo/v1/states.h"
#include "tests/fakes/test_daemon.h"

namespace hpo::server {
namespace {

using ::testing::HasSubstr;

// The x a trial was launched with (its argv's --x=).
double XOf(const backend::LaunchSpec& s) {
  double x = 0;
  EXPECT_TRUE(absl::SimpleAtod(s.argv.back().substr(4), &x)) << s.argv.back();
  return x;
}

class ObjectivesTest : public ::testing::Test {
 protected:
  int64_t Submit(const std::string& extra, int trials = 16) {
    auto id = daemon_.Submit(absl::StrCat(
        "parameters: {x: {type: float, low: 0, high: 1}}\ncommand: [train, '--x={x}']\n",
        "objectives:\n  - {metric: acc, direction: maximize}\n",
        "  - {metric: size, direction: minimize}\n", "budget: {max_trials: ", trials,
        ", max_concurrent: 4}\nseed: 5\n", extra));
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }
  // Every running trial reports its scores at `step`: acc = x, size = sin(7x) + x, which puts
  // some of them on the front and dominates others.
  void ReportAll(int64_t sweep, int64_t step) {
    for (const v1::Trial& t : daemon_.Trials(sweep)) {
      if (t.state() != v1::TRIAL_STATE_RUNNING || t.step() >= step) continue;
      double x = t.params().at("x").float_value();
      v1::ReportRequest req;
      req.set_trial_id(t.id());
      req.set_step(step);
      (*req.mutable_metrics())["acc"] = x * step / 9.0;
      (*req.mutable_metrics())["size"] = std::sin(7 * x) + x;
      (void)daemon_.controller().Report(req, daemon_.TokenOf(t.id()));
    }
  }
  // One report a second at steps 1, 2, ... while trials run, until every sweep ended.
  void Run(int64_t sweep) {
    for (int i = 0; i < 2000 && !daemon_.controller().AllSweepsEnded(); ++i) {
      daemon_.controller().RunOnce();
      ReportAll(sweep, 1 + i % 10);
      daemon_.clock().Advance(absl::Seconds(1));
    }
  }
  std::vector<v1::Trial> Ranked(int64_t sweep) {
    v1::ListTrialsRequest req;
    req.set_sweep_id(sweep);
    return *daemon_.controller().ListTrials(server::Controller::AllowedForTest(), req);
  }
  fakes::TestDaemon daemon_;
};

// The ranks ListTrials gives are those of non-dominated sorting over the completed trials'
// values and violations; the front is rank 0; both survive a crash.
TEST_F(ObjectivesTest, RanksAndTheFrontAreTheRuleAsWrittenAndSurviveARestart) {
  daemon_.set_script([](const backend::LaunchSpec& s) {
    backend::SimulatedFate f;
    f.run_time = XOf(s) > 0.8 ? absl::Seconds(30) : absl::Seconds(9);
    return f;
  });
  int64_t id = Submit("constraints: [\"hpo.runtime_s <= 20\"]\n", 24);
  Run(id);
  std::vector<v1::Trial> trials = Ranked(id);
  algorithms::Points p;
  p.k = 2;
  std::vector<size_t> completed;
  int infeasible = 0;
  for (size_t i = 0; i < trials.size(); ++i) {
    const v1::Trial& t = trials[i];
    if (t.state() != v1::TRIAL_STATE_COMPLETED) {
      EXPECT_EQ(t.pareto_rank(), -1);
      continue;
    }
    // What hpod measured, among the last metrics: 9 or 30 s in virtual time, no GPU.
    double runtime = t.last_metrics().at(kRuntimeMetric);
    EXPECT_EQ(runtime, t.params().at("x").float_value() > 0.8 ? 30.0 : 9.0);
    EXPECT_EQ(t.last_metrics().at(kGpuHoursMetric), 0.0);
    EXPECT_EQ(t.feasible(), runtime <= 20);
    infeasible += !t.feasible();
    ASSERT_EQ(t.objective_values_size(), 2);
    p.Add(std::vector<double>{t.objective_values(0), t.objective_values(1)},
          std::vector<algorithms::Direction>{algorithms::Direction::kMaximize,
                                             algorithms::Direction::kMinimize},
          t.feasible() ? 0.0 : runtime - 20);
    completed.push_back(i);
  }
  ASSERT_GE(completed.size(), 10u);
  EXPECT_GT(infeasible, 0);
  std::vector<int> expect = algorithms::NonDominatedRanks(p);
  int64_t on_front = 0;
  for (size_t n = 0; n < completed.size(); ++n) {
    EXPECT_EQ(trials[completed[n]].pareto_rank(), expect[n]) << "trial " << completed[n];
    if (expect[n] == 0) {
      ++on_front;
      EXPECT_TRUE(trials[completed[n]].feasible()) << "an infeasible trial on the front";
    }
  }
  v1::Sweep sweep = *daemon_.controller().GetSweep(server::Controller::AllowedForTest(), id);
  EXPECT_EQ(sweep.pareto_front_size(), on_front);
  EXPECT_EQ(sweep.best_trial_id(), 0) << "several objectives: no single best";
  EXPECT_EQ(sweep.objectives_size(), 2);
  EXPECT_EQ(sweep.constraints(0), "hpo.runtime_s <= 20");
  v1::ListTrialsRequest front;
  front.set_sweep_id(id);
  front.set_pareto(true);
  EXPECT_EQ(
      static_cast<int64_t>(
          daemon_.controller().ListTrials(server::Controller::AllowedForTest(), front)->size()),
      on_front);

  ASSERT_TRUE(daemon_.Restart(/*crash=*/true).ok());
  EXPECT_EQ(
      daemon_.controller().GetSweep(server::Controller::AllowedForTest(), id)->pareto_front_size(),
      on_front);
  std::vector<v1::Trial> again = Ranked(id);
  for (size_t i = 0; i < trials.size(); ++i)
    EXPECT_EQ(again[i].pareto_rank(), trials[i].pareto_rank());
}

// Multi-objective ASHA stops trials at its rungs, says so, and a restart rebuilds its records
// from the stored reports (the trials that were running decide as before).
TEST_F(ObjectivesTest, MultiObjectiveAshaStopsTrialsAtItsRungs) {
  daemon_.set_script([](const backend::LaunchSpec&) {
    backend::SimulatedFate f;
    f.run_time = absl::Seconds(12);
    f.stop_after = absl::Seconds(1);
    return f;
  });
  int64_t id = Submit("early_stopping: {name: asha, min_resource: 1, reduction_factor: 3}\n", 24);
  for (int i = 0; i < 40; ++i) {
    daemon_.controller().RunOnce();
    ReportAll(id, 1 + i % 10);
    daemon_.clock().Advance(absl::Seconds(1));
    if (i == 20) {
      ASSERT_TRUE(daemon_.Restart(/*crash=*/true).ok());
    }
  }
  Run(id);
  auto counts = daemon_.Counts(id);
  EXPECT_GT(counts["STOPPED"], 4);
  EXPECT_GT(counts["COMPLETED"], 2);
  for (const v1::Trial& t : daemon_.Trials(id)) {
    if (t.state() == v1::TRIAL_STATE_STOPPED) {
      EXPECT_THAT(t.message(), HasSubstr("multi-objective asha: at rung"));
    }
  }
}

// Reports may not use the names of what hpod measures; nothing is stored.
TEST_F(ObjectivesTest, ReportsCannotClaimWhatHpodMeasures) {
  int64_t id = Submit("");
  daemon_.controller().RunOnce();
  v1::Trial t = daemon_.Trials(id).front();
  v1::ReportRequest req;
  req.set_trial_id(t.id());
  (*req.mutable_metrics())["hpo.runtime_s"] = 1;
  absl::StatusOr<v1::ReportResponse> r = daemon_.controller().Report(req, daemon_.TokenOf(t.id()));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("the metrics hpod measures itself"));
  EXPECT_EQ(daemon_.ReportRows(), 0);
}

}  // namespace
}  // namespace hpo::server
