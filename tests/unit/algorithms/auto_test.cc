// `algorithm: auto` and `early_stopping: auto`: what they choose, and that a restarted daemon's
// replay leaves them deciding as the live ones do.
#include <random>
#include <set>

#include "algorithms/asha_stopper.h"
#include "algorithms/auto_sampler.h"
#include "algorithms/auto_stopper.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hpo::algorithms {
namespace {

using ::testing::HasSubstr;

ParamDef Float(const std::string& name) {
  ParamDef p;
  p.name = name;
  p.low = 0;
  p.high = 1;
  return p;
}

SearchSpace Finite() {  // 3 x 4 = 12 configurations
  ParamDef act;
  act.name = "act";
  act.type = ParamType::kCategorical;
  act.choices = {std::string("relu"), std::string("tanh"), std::string("gelu")};
  ParamDef layers;
  layers.name = "layers";
  layers.type = ParamType::kInt;
  layers.low = 1;
  layers.high = 4;
  return SearchSpace{{act, layers}};
}

AlgorithmSpec Auto(int64_t max_trials, int64_t concurrency) {
  AlgorithmSpec a;
  a.max_trials = max_trials;
  a.concurrency = concurrency;
  return a;
}

TEST(AutoSampler, RunsEveryConfigurationOfASpaceThatFitsTheBudgetOnce) {
  SearchSpace space = Finite();
  AutoChoice c = ChooseSampler(Auto(20, 2), space, false);
  EXPECT_EQ(c.spec.name, "grid");
  EXPECT_THAT(c.why, HasSubstr("all 12 configurations"));
  auto sampler = MakeSampler(Auto(20, 2), space);
  ASSERT_TRUE(sampler.ok()) << sampler.status();
  EXPECT_EQ((*sampler)->Name(), "auto");
  EXPECT_EQ((*sampler)->MaxTrials(space), 12);
  std::vector<HistoryEntry> history;
  std::set<Params> seen;
  for (int n = 0; n < 12; ++n) {
    SuggestRequest req;
    req.space = &space;
    req.history = &history;
    req.trial_number = n;
    req.seed = 7;
    auto p = (*sampler)->Suggest(req);
    ASSERT_TRUE(p.ok() && p->has_value());
    seen.insert(**p);
  }
  EXPECT_EQ(seen.size(), 12u) << "each configuration once";
  // A budget smaller than the space: a model.
  EXPECT_EQ(ChooseSampler(Auto(11, 1), space, false).spec.name, "tpe");
}

TEST(AutoSampler, DrawsAtRandomWhenNoResultComesBackInTimeForAModel) {
  SearchSpace space{{Float("x"), Float("y")}};
  AutoChoice few = ChooseSampler(Auto(8, 1), space, false);
  EXPECT_EQ(few.spec.name, "random");
  EXPECT_THAT(few.why, HasSubstr("no more than TPE's 10"));
  AutoChoice at_once = ChooseSampler(Auto(40, 40), space, false);
  EXPECT_EQ(at_once.spec.name, "random");
  EXPECT_THAT(at_once.why, HasSubstr("all 40 trials run at once"));
  AutoChoice tpe = ChooseSampler(Auto(100, 8), space, false);
  EXPECT_EQ(tpe.spec.name, "tpe");
  EXPECT_TRUE(tpe.spec.tpe_multivariate);
  EXPECT_THAT(ChooseSampler(Auto(100, 8), space, true).why, HasSubstr("multi-objective TPE"));
  EXPECT_EQ(ChooseSampler(Auto(0, 8), space, false).spec.name, "tpe") << "wall time only";
}

TEST(AutoSampler, SaysWhenTheModelTakesOver) {
  SearchSpace space{{Float("x")}};
  auto sampler = MakeSampler(Auto(100, 1), space);
  ASSERT_TRUE(sampler.ok());
  std::vector<HistoryEntry> history;
  SuggestRequest req;
  req.space = &space;
  req.history = &history;
  for (int n = 0; n < 12; ++n) {
    req.trial_number = n;
    std::string choice = (*sampler)->Choice(req);
    EXPECT_THAT(choice, HasSubstr("chosen because TPE, multivariate (1 parameter, 100 trials)"));
    EXPECT_THAT(choice, HasSubstr(n < 10 ? "random draws until 10 trials have reported"
                                         : "modelling the trials that reported"))
        << n;
    auto p = (*sampler)->Suggest(req);
    ASSERT_TRUE(p.ok() && p->has_value());
    history.push_back({n, **p, true, 0.1 * n});
  }
}

// With several objectives the count of trials the model learns from is taken without ranking
// them (no fronts, no hypervolumes): the same trials, so the same moment.
TEST(AutoSampler, SaysWhenTheModelTakesOverWithSeveralObjectives) {
  SearchSpace space{{Float("x"), Float("y")}};
  auto sampler = MakeSampler(Auto(100, 1), space);
  ASSERT_TRUE(sampler.ok());
  std::vector<Direction> directions = {Direction::kMinimize, Direction::kMaximize};
  std::vector<HistoryEntry> history;
  SuggestRequest req;
  req.space = &space;
  req.history = &history;
  req.directions = &directions;
  for (int n = 0; n < 14; ++n) {
    req.trial_number = n;
    // Trials 2 and 5 are still running: they are not counted until they end.
    int learned = n - (n > 2 ? 1 : 0) - (n > 5 ? 1 : 0);
    EXPECT_THAT((*sampler)->Choice(req), HasSubstr(learned < 10 ? "random draws until 10 trials"
                                                                : "modelling the trials that"))
        << n;
    auto p = (*sampler)->Suggest(req);
    ASSERT_TRUE(p.ok() && p->has_value());
    HistoryEntry h;
    h.number = n;
    h.params = **p;
    h.finished = n != 2 && n != 5;
    if (h.finished) h.values = {0.1 * n, 1.0 - 0.05 * n};
    history.push_back(std::move(h));
  }
}

TEST(AutoStopper, ChoosesByTheLengthOfATrial) {
  StopperSpec spec;
  spec.steps = 3;
  spec.steps_from = "plan.steps";
  AutoStopper short_trials(spec, {});
  EXPECT_THAT(short_trials.Choice(), HasSubstr("too short to stop early"));
  spec.steps = 27;
  AutoStopper asha(spec, {});
  EXPECT_THAT(asha.Choice(), HasSubstr("asha, rungs at steps 1, 3, 9 of 27 (plan.steps)"));
  EXPECT_THAT(asha.Choice(), HasSubstr("step 1: not measured yet"));
  EXPECT_EQ(AutoStopper::For(400, false).first.min_resource, 4);  // rungs 4, 12, 36, 108, 324
  EXPECT_EQ(AutoStopper::For(400, false).first.min_correlation, 0.5);
  auto [multi, why] = AutoStopper::For(27, true);
  EXPECT_EQ(multi.min_correlation, 0) << "multi-objective ASHA has no correlation rule";
  AutoStopper mo(spec, {Direction::kMinimize, Direction::kMinimize});
  EXPECT_THAT(mo.Choice(), HasSubstr("multi-objective asha"));
  EXPECT_THAT(AutoStopper(StopperSpec{}, {}).Choice(), HasSubstr("none yet"));
  StopperSpec pbt;
  pbt.steps = 27;
  pbt.none_because = "pbt decides";
  AutoStopper none(pbt, {});
  EXPECT_EQ(none.Choice(), "none: pbt decides");
  EXPECT_NE(none.chosen(), nullptr);
}

// Trials whose values at every step follow their quality (rungs predict the end), told in an
// interleaved order; trial 0 completes first, at step 9.
struct CurveRun {
  std::vector<std::vector<std::pair<int64_t, double>>> curves;
  std::vector<std::pair<size_t, size_t>> order;  // (trial, points told)
  explicit CurveRun(uint32_t seed) {
    std::mt19937 rng(seed);
    curves.resize(30);
    std::vector<double> quality;
    for (size_t i = 0; i < curves.size(); ++i) quality.push_back(static_cast<double>(rng() % 50));
    std::vector<size_t> told(curves.size(), 0);
    for (int round = 0; round < 2000; ++round) {
      size_t i = rng() % std::min<size_t>(curves.size(), 2 + static_cast<size_t>(round) / 40);
      if (told[i] >= 9) continue;
      int64_t step = static_cast<int64_t>(told[i]) + 1;
      curves[i].emplace_back(step, quality[i] + static_cast<double>(rng() % 3) / step);
      order.emplace_back(i, ++told[i]);
    }
  }
  Curve At(size_t trial, size_t points) const {
    return {static_cast<int64_t>(trial), {curves[trial].data(), points}, false, {}};
  }
};

TEST(AutoStopper, LearnsTheLengthFromTheFirstTrialToCompleteAndDecidesAsIfItKnewIt) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    CurveRun run(seed);
    AutoStopper live(StopperSpec{}, {});
    StopperSpec known;
    known.steps = 9;
    known.steps_from = "plan.steps";
    AutoStopper declared(known, {});
    // The stopper restarted at the halfway point: told every trial's points so far, trial by
    // trial, then the ended ones.
    AutoStopper restarted(StopperSpec{}, {});
    const size_t half = run.order.size() / 2;
    std::vector<size_t> told_by_half(run.curves.size(), 0);
    std::vector<bool> ended(run.curves.size(), false);
    std::optional<size_t> first_end;
    int stops = 0;
    for (size_t k = 0; k < run.order.size(); ++k) {
      auto [trial, points] = run.order[k];
      Curve c = run.At(trial, points);
      StopDecision d = live.Observe(c, Direction::kMinimize);
      StopDecision want = declared.Observe(c, Direction::kMinimize);
      if (live.chosen() != nullptr) {
        ASSERT_EQ(d.decision, want.decision) << "seed " << seed << " at " << k;
        stops += d.decision == Decision::kStop;
      } else {
        EXPECT_EQ(d.decision, Decision::kContinue);
      }
      if (k >= half) {
        if (k == half) {
          for (size_t t = 0; t < run.curves.size(); ++t) {
            for (size_t p = 1; p <= told_by_half[t]; ++p) {
              (void)restarted.Observe(run.At(t, p), Direction::kMinimize);
            }
          }
          if (first_end) restarted.Ended(run.At(*first_end, 9), true);
        }
        StopDecision r = restarted.Observe(c, Direction::kMinimize);
        ASSERT_EQ(r.decision, d.decision) << "seed " << seed << " at " << k;
      } else {
        told_by_half[trial] = points;
      }
      if (points == 9 && !ended[trial]) {  // it completes
        ended[trial] = true;
        if (!first_end) first_end = trial;
        live.Ended(c, true);
        declared.Ended(c, true);
        if (k >= half) restarted.Ended(c, true);
      }
    }
    ASSERT_NE(live.chosen(), nullptr);
    EXPECT_GT(stops, 0) << "seed " << seed;
    EXPECT_THAT(live.Choice(), HasSubstr("rungs at steps 1, 3 of 9 (trial #"));
    EXPECT_THAT(live.Choice(), HasSubstr(", on"));
    EXPECT_EQ(live.Choice(), restarted.Choice());
  }
}

}  // namespace
}  // namespace hpo::algorithms
