// Multi-objective search: NSGA-II and multi-objective TPE on a ZDT problem against random search,
// constraints, and multi-objective ASHA's incremental form against its rule as written.
#include <cmath>
#include <random>

#include "algorithms/gp_sampler.h"
#include "algorithms/mo_asha_stopper.h"
#include "algorithms/nsga2_sampler.h"
#include "algorithms/random_sampler.h"
#include "algorithms/tpe_sampler.h"
#include "gtest/gtest.h"

namespace hpo::algorithms {
namespace {

const std::vector<Direction> kMinMin = {Direction::kMinimize, Direction::kMinimize};

SearchSpace Unit(int d) {
  SearchSpace s;
  for (int i = 0; i < d; ++i) {
    ParamDef p;
    p.name = "x" + std::to_string(i);
    p.low = 0;
    p.high = 1;
    s.params.push_back(p);
  }
  return s;
}

// ZDT1 (both minimized; the front is f2 = 1 - sqrt(f1) at g = 1).
std::vector<double> Zdt1(const Params& p, int d) {
  double f1 = std::get<double>(p.at("x0")), sum = 0;
  for (int i = 1; i < d; ++i) sum += std::get<double>(p.at("x" + std::to_string(i)));
  double g = 1 + 9 * sum / (d - 1);
  return {f1, g * (1 - std::sqrt(f1 / g))};
}

// n trials one after another, each seeing every earlier one finished; the hypervolume of the
// result up to (1.1, 11). `feasible`: a constraint, met by the points it accepts.
double Sweep(const Sampler& sampler, int n, uint64_t seed,
             const std::function<bool(const std::vector<double>&)>& feasible = nullptr,
             std::vector<HistoryEntry>* out = nullptr) {
  const int d = 4;
  SearchSpace space = Unit(d);
  std::vector<HistoryEntry> history;
  for (int t = 0; t < n; ++t) {
    SuggestRequest req;
    req.space = &space;
    req.history = &history;
    req.trial_number = t;
    req.seed = seed;
    req.directions = &kMinMin;
    auto params = sampler.Suggest(req);
    EXPECT_TRUE(params.ok() && *params);
    EXPECT_TRUE(space.Contains(**params));
    HistoryEntry h;
    h.number = t;
    h.params = **params;
    h.finished = true;
    h.values = Zdt1(h.params, d);
    h.objective = h.values[0];
    h.violation = feasible && !feasible(h.values) ? 1.0 : 0.0;
    history.push_back(std::move(h));
  }
  Points points;
  points.k = 2;
  for (const HistoryEntry& h : history) points.Add(h.values, kMinMin, h.violation);
  if (out != nullptr) *out = history;
  return Hypervolume(points, std::vector<double>{1.1, 11});
}

TEST(Nsga2, BeatsRandomSearchOnZdt1AndIsDeterministic) {
  Nsga2Sampler nsga2({20, 0.9, 0});
  RandomSampler random;
  double a = Sweep(nsga2, 300, 1), b = Sweep(random, 300, 1);
  EXPECT_GT(a, b + 0.5) << "nsga2 " << a << " random " << b;
  EXPECT_EQ(Sweep(nsga2, 300, 1), a);
}

TEST(Nsga2, FirstPopulationIsRandomAndSettingsAreChecked) {
  std::vector<HistoryEntry> nsga, rnd;
  Sweep(Nsga2Sampler({20, 0.9, 0}), 20, 5, nullptr, &nsga);
  Sweep(RandomSampler(), 20, 5, nullptr, &rnd);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(nsga[i].params, rnd[i].params);
  EXPECT_FALSE(Nsga2Sampler::Validate({1, 0.9, 0}).ok());
  EXPECT_FALSE(Nsga2Sampler::Validate({20, 1.5, 0}).ok());
  EXPECT_FALSE(MakeSampler({.name = "genetic"}, Unit(2), /*pareto=*/true).ok());
}

TEST(Nsga2, ConstraintsSteerTheSearchToFeasiblePoints) {
  // Feasible only where f1 >= 0.5: the search should end up there.
  auto feasible = [](const std::vector<double>& f) { return f[0] >= 0.5; };
  std::vector<HistoryEntry> history;
  Sweep(Nsga2Sampler({20, 0.9, 0}), 300, 3, feasible, &history);
  int late_feasible = 0;
  for (int t = 200; t < 300; ++t) late_feasible += history[t].violation == 0;
  EXPECT_GT(late_feasible, 80);
}

TEST(MultiObjectiveTpe, BeatsRandomSearchOnZdt1) {
  TpeSampler tpe({10, 24, true});
  RandomSampler random;
  double a = Sweep(tpe, 200, 2), b = Sweep(random, 200, 2);
  EXPECT_GT(a, b + 0.5) << "tpe " << a << " random " << b;
  EXPECT_EQ(Sweep(tpe, 200, 2), a);
}

TEST(MultiObjectiveGp, BeatsRandomSearchOnZdt1) {
  GpSampler gp({10});
  RandomSampler random;
  double a = Sweep(gp, 80, 2), b = Sweep(random, 80, 2);
  EXPECT_GT(a, b + 0.5) << "gp " << a << " random " << b;
  EXPECT_EQ(Sweep(gp, 80, 2), a);
}

// Under early stopping TPE learns from the trials that reported, running ones included, compared
// at one step: twelve trials at step 3 with none finished are enough to leave its random start.
TEST(MultiObjectiveTpe, LearnsFromCurvesAtOneStep) {
  SearchSpace space = Unit(2);
  std::vector<std::vector<std::pair<int64_t, double>>> curves(12);
  std::vector<std::vector<double>> vectors(12);
  std::vector<HistoryEntry> history;
  RandomSampler random;
  for (int t = 0; t < 12; ++t) {
    SuggestRequest r;
    r.space = &space;
    r.history = &history;
    r.trial_number = t;
    r.seed = 3;
    HistoryEntry h;
    h.number = t;
    h.params = **random.Suggest(r);
    for (int64_t step = 1; step <= 3; ++step) {
      double f1 = std::get<double>(h.params["x0"]), f2 = 1 - f1 + std::get<double>(h.params["x1"]);
      curves[t].emplace_back(step, f1);
      vectors[t].insert(vectors[t].end(), {f1, f2, 0.0});
    }
    history.push_back(h);
  }
  for (int t = 0; t < 12; ++t) {
    history[t].curve = &curves[t];
    history[t].vectors = &vectors[t];
  }
  SuggestRequest req;
  req.space = &space;
  req.history = &history;
  req.trial_number = 12;
  req.seed = 3;
  req.directions = &kMinMin;
  auto tpe = TpeSampler({10, 24, true}).Suggest(req);
  auto rnd = RandomSampler().Suggest(req);
  ASSERT_TRUE(tpe.ok() && rnd.ok());
  EXPECT_NE(**tpe, **rnd) << "still the random start";
}

// --- multi-objective ASHA

struct MoTrials {
  std::vector<std::vector<std::pair<int64_t, double>>> points;
  std::vector<std::vector<double>> vectors;  // 3 a point: two objectives and the violation
  std::vector<Curve> curves;
  Curve At(size_t i) const {
    return {static_cast<int64_t>(i),
            {points[i].data(), points[i].size()},
            false,
            {vectors[i].data(), vectors[i].size()}};
  }
  void Add(size_t i, int64_t step, double f1, double f2, double violation = 0) {
    if (points.size() <= i) points.resize(i + 1), vectors.resize(i + 1);
    points[i].emplace_back(step, f1);
    vectors[i].insert(vectors[i].end(), {f1, f2, violation});
  }
  std::vector<const Curve*> Others(size_t self) {
    curves.clear();
    for (size_t i = 0; i < points.size(); ++i) curves.push_back(At(i));
    std::vector<const Curve*> out;
    for (size_t i = 0; i < curves.size(); ++i) {
      if (i != self) out.push_back(&curves[i]);
    }
    return out;
  }
};

TEST(MoAsha, KeepsTheFirstThirdByFrontThenEpsilonNet) {
  MoAshaStopper s({1, 81, 3, 1, 0}, kMinMin);
  MoTrials t;
  auto observe = [&](size_t i) { return s.Observe(t.At(i), Direction::kMinimize).decision; };
  t.Add(0, 1, 1, 5);
  EXPECT_EQ(observe(0), Decision::kContinue) << "alone";
  t.Add(1, 1, 5, 1);  // same front; keep 1 of 2; the ε-net starts at the best first objective
  EXPECT_EQ(observe(1), Decision::kStop);
  t.Add(2, 1, 0.5, 0.5);  // dominates both
  EXPECT_EQ(observe(2), Decision::kContinue);
  t.Add(3, 1, 6, 6);
  EXPECT_EQ(observe(3), Decision::kStop);
  t.Add(4, 1, 0.1, 0.1, 2.0);  // best values, but it misses a constraint
  EXPECT_EQ(observe(4), Decision::kStop);
  auto stop = s.Observe(t.At(4), Direction::kMinimize);
  EXPECT_NE(stop.reason.find("multi-objective asha"), std::string::npos) << stop.reason;
}

TEST(MoAsha, IncrementalDecisionsEqualTheRuleAsWritten) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    MoAshaStopper pure({1, 0, 3, seed % 2 == 0 ? 3 : 1, 0}, kMinMin);
    MoAshaStopper incremental({1, 0, 3, seed % 2 == 0 ? 3 : 1, 0}, kMinMin);
    MoTrials t;
    for (size_t i = 0; i < 60; ++i) t.Add(i, 0, 1, 1);  // a first point below every rung
    std::vector<bool> stopped(60, false);
    int decisions = 0, stops = 0;
    for (int round = 0; round < 4000; ++round) {
      size_t i = rng() % 60;
      if (stopped[i] || t.points[i].size() > 40) continue;
      int64_t step = t.points[i].back().first + 1;  // every step, as a trial reports
      double drift = 1.0 / static_cast<double>(step);
      t.Add(i, step, u(rng) * drift, u(rng), rng() % 10 == 0 ? u(rng) : 0.0);
      auto others = t.Others(i);
      Decision a = pure.Decide(t.At(i), others).decision;
      Decision b = incremental.Observe(t.At(i), Direction::kMinimize).decision;
      ASSERT_EQ(a, b) << "seed " << seed << " trial " << i << " step " << step;
      ++decisions;
      if (a == Decision::kStop) stopped[i] = true, ++stops;
    }
    EXPECT_GT(decisions, 100);
    EXPECT_GT(stops, 20);
  }
}

// A configuration run again reports the very same vectors (a trainer that maps nearby values to
// one model): at a rung it counts once. Six copies of the best point would otherwise fill the
// first third of 12 and stop the second best, which is second of 7 distinct points.
TEST(MoAsha, AVectorRepeatedAtARungCountsOnce) {
  MoAshaStopper s({1, 81, 3, 1, 0}, kMinMin);
  MoTrials t;
  std::vector<Decision> observed, decided;
  auto both = [&](size_t i) {
    decided.push_back(s.Decide(t.At(i), t.Others(i)).decision);
    observed.push_back(s.Observe(t.At(i), Direction::kMinimize).decision);
    return observed.back();
  };
  for (size_t i = 0; i < 6; ++i) {  // the best point, six times
    t.Add(i, 1, 1, 1);
    EXPECT_EQ(both(i), Decision::kContinue) << "a repeat is judged as the first was";
  }
  for (size_t i = 6; i < 11; ++i) {  // five more, each worse than the last
    t.Add(i, 1, static_cast<double>(i), static_cast<double>(i));
    both(i);
  }
  t.Add(11, 1, 2, 2);  // the second best
  EXPECT_EQ(both(11), Decision::kContinue) << "2nd of 7 distinct points, the first 2 go on";
  t.Add(12, 1, 10.5, 10.5);
  EXPECT_EQ(both(12), Decision::kStop);
  EXPECT_EQ(observed, decided) << "Decide counts repeats once too";
}

TEST(MoAsha, MakeStopperPicksItForSeveralObjectives) {
  StopperSpec spec;
  spec.name = "asha";
  auto s = MakeStopper(spec, kMinMin);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Name(), "multi-objective asha");
  spec.name = "median";
  EXPECT_FALSE(MakeStopper(spec, kMinMin).ok());
}

}  // namespace
}  // namespace hpo::algorithms
