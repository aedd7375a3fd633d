// Stoppers against hand-computed cases.
#include <random>
#include <tuple>

#include "algorithms/asha_stopper.h"
#include "algorithms/median_stopper.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hpo::algorithms {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Points = std::vector<std::pair<int64_t, double>>;

struct Trials {
  std::vector<Points> points;
  std::vector<Curve> curves;
  // Adds trial `number` with `pts`; returns its index.
  void Add(int64_t number, Points pts) {
    points.push_back(std::move(pts));
    numbers.push_back(number);
  }
  std::vector<int64_t> numbers;
  // Curves of every trial but `self` (rebuilt each call: spans point into `points`).
  std::vector<const Curve*> Others(size_t self) {
    curves.clear();
    for (size_t i = 0; i < points.size(); ++i)
      curves.push_back({numbers[i], {points[i].data(), points[i].size()}, false, {}});
    std::vector<const Curve*> out;
    for (size_t i = 0; i < curves.size(); ++i) {
      if (i != self) out.push_back(&curves[i]);
    }
    return out;
  }
  template <typename PureStopper>
  Decision Decide(const PureStopper& s, size_t self, Direction d = Direction::kMinimize) {
    auto others = Others(self);
    Curve mine{numbers[self], {points[self].data(), points[self].size()}, false, {}};
    return s.Decide(mine, others, d).decision;
  }
};

AshaStopper Asha() { return AshaStopper({1, 81, 3, 1}); }

TEST(Asha, RungsAreMinTimesEtaPowers) {
  EXPECT_EQ(Asha().Rungs(0), (std::vector<int64_t>{1, 3, 9, 27}));
  AshaStopper hb({1, 81, 3, 3});
  EXPECT_EQ(hb.Rungs(1), (std::vector<int64_t>{3, 9, 27}));
  EXPECT_EQ(hb.Rungs(2), (std::vector<int64_t>{9, 27}));
  EXPECT_EQ(hb.BracketOf(4), 1);
}

TEST(Asha, KeepsTheBestThirdAtEachRung) {
  AshaStopper asha = Asha();
  Trials t;
  // Minimizing. Trial 0 reaches rung 1 first: alone, it goes on.
  t.Add(0, {{1, 0.50}});
  EXPECT_EQ(t.Decide(asha, 0), Decision::kContinue);
  // Trial 1 arrives worse: of 2 values keep max(1, 2/3) = 1, the best -> stop.
  t.Add(1, {{1, 0.60}});
  EXPECT_EQ(t.Decide(asha, 1), Decision::kStop);
  // Trial 2 ties the best: ties count in its favour -> go on.
  t.Add(2, {{1, 0.50}});
  EXPECT_EQ(t.Decide(asha, 2), Decision::kContinue);
  // Three more: of 6 values keep 2; 0.45 is best -> on; 0.55 is 4th -> stop; 0.50 ties 2nd -> on.
  t.Add(3, {{1, 0.45}});
  EXPECT_EQ(t.Decide(asha, 3), Decision::kContinue);
  t.Add(4, {{1, 0.55}});
  EXPECT_EQ(t.Decide(asha, 4), Decision::kStop);
  t.Add(5, {{1, 0.50}});
  EXPECT_EQ(t.Decide(asha, 5), Decision::kContinue);
  // Between rungs nothing is decided, however bad the value.
  t.points[3].push_back({2, 9.0});
  EXPECT_EQ(t.Decide(asha, 3), Decision::kContinue);
}

TEST(Asha, AsynchronousArrivalsAreJudgedAtTheRungTheyCross) {
  AshaStopper asha = Asha();
  Trials t;
  t.Add(0, {{1, 0.9}, {2, 0.8}, {3, 0.7}});  // value at rung 3: 0.7
  t.Add(1, {{1, 0.9}, {4, 0.6}});            // first point past rung 3: 0.6
  // Trial 2 jumps from step 1 to step 5, crossing rung 3 with 0.65: of {0.65, 0.7, 0.6} keep 1.
  t.Add(2, {{1, 0.95}, {5, 0.65}});
  EXPECT_EQ(t.Decide(asha, 2), Decision::kStop);
  // The same jump with 0.55 is the best at rung 3.
  t.points[2].back().second = 0.55;
  EXPECT_EQ(t.Decide(asha, 2), Decision::kContinue);
  // Jumping past several rungs is judged at the highest one crossed (9): alone there -> on.
  t.Add(3, {{10, 5.0}});
  EXPECT_EQ(t.Decide(asha, 3), Decision::kContinue);
}

TEST(Asha, NineTrialsAtRungNineKeepThree) {
  AshaStopper asha = Asha();
  Trials t;
  for (int i = 0; i < 8; ++i) t.Add(i, {{9, 0.1 * (i + 1)}});  // 0.1 ... 0.8
  // Ninth value 0.3: sorted 0.1 0.2 0.3 0.3 ... keep 9/3 = 3 -> 0.3 ties the 3rd -> on.
  t.Add(8, {{9, 0.3}});
  EXPECT_EQ(t.Decide(asha, 8), Decision::kContinue);
  t.points[8][0].second = 0.31;
  EXPECT_EQ(t.Decide(asha, 8), Decision::kStop);
  // Maximizing flips it: 0.31 is 6th of 9 from the top -> stop; 0.75 is 2nd -> on.
  EXPECT_EQ(t.Decide(asha, 8, Direction::kMaximize), Decision::kStop);
  t.points[8][0].second = 0.75;
  EXPECT_EQ(t.Decide(asha, 8, Direction::kMaximize), Decision::kContinue);
}

TEST(Asha, NoRungAtOrPastMaxResource) {
  AshaStopper asha = Asha();
  Trials t;
  t.Add(0, {{27, 0.1}, {81, 0.1}});
  t.Add(1, {{27, 0.2}, {81, 9.9}});
  EXPECT_EQ(t.Decide(asha, 1), Decision::kContinue);  // step 81 crosses no rung
}

TEST(Hyperband, ComparesOnlyWithinABracket) {
  AshaStopper hb({1, 81, 3, 2});
  Trials t;
  t.Add(0, {{1, 0.1}});  // bracket 0, rungs 1, 3, 9, 27
  t.Add(1, {{3, 0.1}});  // bracket 1, rungs 3, 9, 27
  t.Add(2, {{1, 0.5}});  // bracket 0: worse than trial 0 -> stop
  EXPECT_EQ(t.Decide(hb, 2), Decision::kStop);
  t.Add(3, {{1, 0.9}});  // bracket 1: step 1 is no rung of its bracket -> on
  EXPECT_EQ(t.Decide(hb, 3), Decision::kContinue);
}

TEST(Median, StopsBelowTheMedianAfterGrace) {
  MedianStopper median({2, 3});
  Trials t;
  t.Add(0, {{1, 0.5}, {2, 0.4}, {3, 0.3}});
  t.Add(1, {{1, 0.6}, {2, 0.5}, {3, 0.45}});
  t.Add(2, {{1, 0.7}, {2, 0.6}, {3, 0.55}});
  t.Add(3, {{1, 0.9}});
  EXPECT_EQ(t.Decide(median, 3), Decision::kContinue);  // step 1 < grace 2
  t.points[3].push_back({2, 0.8});
  EXPECT_EQ(t.Decide(median, 3), Decision::kStop);  // best 0.8 vs median 0.5
  t.points[3].back().second = 0.45;
  EXPECT_EQ(t.Decide(median, 3), Decision::kContinue);  // 0.45 beats the median
}

// The incremental median rule against the pure one on random asynchronous runs: trials report
// in shuffled order, steps grow by 1-3 (so trials skip steps others report), values tie, trials
// told to stop report on for a while (their values still count), both directions. `mode`
// 1: one trial once repeats a step, which makes the stopper fall back to the pure form; 2:
// every trial's steps are its own (scattered), which makes it fall back once its trees hold
// too many entries. Either way it must decide alike.
TEST(Median, IncrementalDecidesAsThePureForm) {
  for (int mode : {0, 1, 2}) {
    for (Direction d : {Direction::kMinimize, Direction::kMaximize}) {
      for (uint32_t seed = 1; seed <= 4; ++seed) {
        std::mt19937 rng(seed);
        MedianStopper pure({3, 4}), incremental({3, 4});
        Trials t;
        std::vector<int> after_stop;
        for (int n = 0; n < 50; ++n) {
          t.Add(n, {});
          after_stop.push_back(-1);
        }
        int decisions = 0, stops = 0;
        bool repeat = mode == 1;  // once, half-way
        for (int round = 0; round < 3000; ++round) {
          size_t i = rng() % t.points.size();
          if (after_stop[i] == 0 || t.points[i].size() >= 40) continue;
          int64_t last = t.points[i].empty() ? 0 : t.points[i].back().first;
          int64_t step = last + 1 + static_cast<int64_t>(rng() % 3);
          if (mode == 2) step = last + 1 + static_cast<int64_t>(rng() % 1000);
          if (repeat && round >= 1500 && !t.points[i].empty()) {
            step = last;
            repeat = false;
          }
          double value = static_cast<double>(rng() % 20) / (1.0 + static_cast<double>(step % 5));
          t.points[i].emplace_back(step, value);
          Decision a = t.Decide(pure, i, d);
          Curve mine{t.numbers[i], {t.points[i].data(), t.points[i].size()}, false, {}};
          Decision b = incremental.Observe(mine, d).decision;
          if (after_stop[i] > 0) {
            --after_stop[i];  // told to stop already: only its values matter
            continue;
          }
          ASSERT_EQ(a, b) << "mode " << mode << " seed " << seed << " trial " << i << " step "
                          << step;
          ++decisions;
          if (a == Decision::kStop) {
            after_stop[i] = static_cast<int>(rng() % 3);
            ++stops;
          }
        }
        if (mode != 2) {  // 2: only once the trees hold too many entries
          EXPECT_EQ(incremental.FellBackForTest(), mode == 1);
        }
        EXPECT_GT(decisions, 100);
        EXPECT_GT(stops, 10);
      }
    }
  }
}

TEST(MakeStopper, ValidatesSettings) {
  StopperSpec spec;
  spec.name = "asha";
  spec.reduction_factor = 1;
  EXPECT_FALSE(MakeStopper(spec).ok());
  spec.reduction_factor = 3;
  EXPECT_EQ((*MakeStopper(spec))->Name(), "asha");
  spec.name = "hyperband";
  EXPECT_EQ((*MakeStopper(spec))->Name(), "hyperband");
  spec.name = "bogus";
  EXPECT_FALSE(MakeStopper(spec).ok());
}

// Observe (incremental, O(log n)) decides exactly as Decide (every curve) on random
// asynchronous runs: trials report in shuffled order, some stop when told, with ties, for ASHA
// and Hyperband and both directions.
// With bootstrap 2 (eta 3), a rung stops every trial until a third one reaches it.
TEST(Asha, BootstrapStopsTheFirstArrivalsAtEachRung) {
  AshaStopper asha({1, 81, 3, 1, 2});
  Trials t;
  t.Add(0, {{1, 0.10}});
  EXPECT_EQ(t.Decide(asha, 0), Decision::kStop);  // 1 value at rung 1, not more than 2
  t.Add(1, {{1, 0.05}});
  EXPECT_EQ(t.Decide(asha, 1), Decision::kStop);  // 2: still bootstrapping, even the best
  t.Add(2, {{1, 0.20}});
  EXPECT_EQ(t.Decide(asha, 2), Decision::kStop);  // 3 values: keep 1 (0.05); 0.20 is worse
  t.Add(3, {{1, 0.01}});
  EXPECT_EQ(t.Decide(asha, 3), Decision::kContinue);  // 4 values: keep 1; 0.01 is the best
  // Rung 3 starts over: trial 3 is its first arrival, so it stops there.
  t.points[3].emplace_back(2, 0.01);
  EXPECT_EQ(t.Decide(asha, 3), Decision::kContinue);  // step 2 crosses no rung
  t.points[3].emplace_back(3, 0.01);
  EXPECT_EQ(t.Decide(asha, 3), Decision::kStop);
  EXPECT_FALSE(MakeStopper({"asha", 1, 0, 3, 3, 1, 3, -1}).ok());
}

// With min_correlation 0.5: rung 1 (its values run against those at the end) stops nobody; rung
// 3 (in step with the end) stops, but only once 5 trials reached max_resource.
// The rungs' correlations as the sweep reports them (RungStates, Observe) follow every trial
// that reaches max_resource, however often they were asked in between.
TEST(Asha, RungStatesFollowEachTrialThatReachesTheEnd) {
  AshaStopper asha({1, 9, 3, 1, 0, 0.5});  // rungs 1 and 3
  std::vector<Points> pts;
  auto observe = [&](int64_t n) {
    // Reported one point at a time, as trials do.
    Points so_far;
    for (const auto& p : pts[static_cast<size_t>(n)]) {
      so_far.push_back(p);
      asha.Observe(Curve{n, {so_far.data(), so_far.size()}, false, {}}, Direction::kMinimize);
    }
  };
  for (int64_t i = 0; i < 5; ++i) {
    pts.push_back({{1, 5.0 - static_cast<double>(i)},
                   {3, 1.0 + static_cast<double>(i)},
                   {9, 1.0 + static_cast<double>(i)}});
    EXPECT_THAT(asha.RungStates(), HasSubstr("step 1: not measured yet"));
    observe(i);
  }
  EXPECT_THAT(asha.RungStates(), HasSubstr("step 1: -1.00 over 5 trials (at least -1.00), off"));
  EXPECT_THAT(asha.RungStates(), HasSubstr("step 3: 1.00 over 5 trials (at least 1.00), on"));
  pts.push_back({{1, 0.0}, {3, 9.0}, {9, 0.5}});  // a sixth, out of step at rung 3
  observe(5);
  EXPECT_THAT(asha.RungStates(), HasSubstr("over 6 trials"));
  EXPECT_THAT(asha.RungStates(), Not(HasSubstr("step 3: 1.00")));
}

// A correlation over few trials may be chance: a rung goes on only when it holds within one
// standard error. Rung 1's values at 5 trials that reached the end rank them with two pairs
// swapped (0.80: at least 0.34, off); at 10 trials with the same two swaps it is 0.98 (on).
TEST(Asha, ARungGoesOnOnlyOnceItsCorrelationIsSure) {
  AshaStopper asha({1, 9, 3, 1, 0, 0.5});  // rungs 1 and 3
  const std::vector<double> at_rung = {2, 1, 4, 3, 5, 6, 7, 8, 9, 10};
  auto observe = [&](int64_t n) {
    Points so_far;
    for (const auto& p :
         Points{{1, at_rung[static_cast<size_t>(n)]}, {3, 0.0}, {9, static_cast<double>(n + 1)}}) {
      so_far.push_back(p);
      asha.Observe(Curve{n, {so_far.data(), so_far.size()}, false, {}}, Direction::kMinimize);
    }
  };
  // A trial that reports only step 1, worst there.
  auto worst_at_rung_1 = [&](int64_t n) {
    Points p = {{1, 100.0}};
    return asha.Observe(Curve{n, {p.data(), p.size()}, false, {}}, Direction::kMinimize).decision;
  };
  for (int64_t i = 0; i < 5; ++i) observe(i);
  EXPECT_THAT(asha.RungStates(), HasSubstr("step 1: 0.80 over 5 trials (at least 0.34), off"));
  EXPECT_EQ(worst_at_rung_1(100), Decision::kContinue);
  for (int64_t i = 5; i < 10; ++i) observe(i);
  EXPECT_THAT(asha.RungStates(), HasSubstr("step 1: 0.98 over 10 trials (at least 0.95), on"));
  EXPECT_EQ(worst_at_rung_1(101), Decision::kStop);
  EXPECT_NEAR(AshaStopper::SureCorrelation(0.86, 5), 0.5, 0.01);
  EXPECT_NEAR(AshaStopper::SureCorrelation(0.74, 10), 0.5, 0.01);
  EXPECT_LT(AshaStopper::SureCorrelation(0.9, 5), 0.9);
}

TEST(Asha, ARungThatDoesNotPredictTheEndStopsNobody) {
  AshaStopper asha({1, 9, 3, 1, 0, 0.5});  // rungs 1 and 3
  Trials t;
  for (int i = 0; i < 4; ++i) {
    double end = i + 1;
    t.Add(i, {{1, 5.0 - i}, {3, end}, {9, end}});
  }
  t.Add(4, {{1, 9.0}, {3, 9.0}});  // the worst at both rungs, with 4 trials at the end
  EXPECT_EQ(t.Decide(asha, 4), Decision::kContinue) << "only 4 trials reached max_resource";
  t.points[4].emplace_back(9, 5.0);  // the fifth
  t.Add(5, {{1, 9.0}});
  EXPECT_EQ(t.Decide(asha, 5), Decision::kContinue) << "rung 1 says nothing of the end";
  t.points[5].emplace_back(3, 9.5);
  auto others = t.Others(5);
  Curve mine{5, {t.points[5].data(), t.points[5].size()}, false, {}};
  StopDecision d = asha.Decide(mine, others, Direction::kMinimize);
  EXPECT_EQ(d.decision, Decision::kStop);
  EXPECT_NE(d.reason.find("its rank correlation with step 9 is 1.00 over 5 trials"),
            std::string::npos)
      << d.reason;
  StopperSpec spec;
  spec.name = "asha";
  spec.min_correlation = 0.5;
  EXPECT_FALSE(MakeStopper(spec).ok()) << "no max_resource";
  spec.max_resource = 9;
  EXPECT_TRUE(MakeStopper(spec).ok());
  spec.min_correlation = 1.5;
  EXPECT_FALSE(MakeStopper(spec).ok());
}

// unmeasured: stop: before 5 trials reached max_resource a rung stops trials as plain ASHA
// does; once they show it does not predict, it stops nobody.
TEST(Asha, ARungNotMeasuredYetStopsWhenAskedTo) {
  AshaStopper asha({1, 9, 3, 1, 0, 0.5, true});  // rungs 1 and 3
  Trials t;
  t.Add(0, {{1, 1.0}});
  t.Add(1, {{1, 2.0}});
  EXPECT_EQ(t.Decide(asha, 1), Decision::kStop) << "not measured: plain ASHA";
  auto others = t.Others(1);
  Curve mine{1, {t.points[1].data(), t.points[1].size()}, false, {}};
  EXPECT_NE(asha.Decide(mine, others, Direction::kMinimize).reason.find("not measured yet"),
            std::string::npos);
  Trials u;  // five trials whose rung-1 values run against their ends
  for (int i = 0; i < 5; ++i) u.Add(i, {{1, 5.0 - i}, {3, 1.0 + i}, {9, 1.0 + i}});
  u.Add(5, {{1, 9.0}});
  EXPECT_EQ(u.Decide(asha, 5), Decision::kContinue) << "shown not to predict: off";
}

TEST(Asha, IncrementalDecidesAsThePureForm) {
  for (auto [bootstrap, correlation, unmeasured_stop] :
       {std::tuple<int64_t, double, bool>{0, 0, false},
        {4, 0, false},
        {0, 0.3, false},
        {0, 0.3, true}}) {
    for (int brackets : {1, 3}) {
      for (Direction d : {Direction::kMinimize, Direction::kMaximize}) {
        for (uint32_t seed = 1; seed <= 5; ++seed) {
          std::mt19937 rng(seed);
          // Rungs that must predict need trials that reach max_resource (27 of their 40 steps).
          const int64_t most = correlation > 0 ? 27 : 81;
          AshaStopper pure({1, most, 3, brackets, bootstrap, correlation, unmeasured_stop}),
              incremental({1, most, 3, brackets, bootstrap, correlation, unmeasured_stop});
          Trials t;
          std::vector<bool> stopped;
          std::vector<double> quality;  // what each trial's values follow, with correlation
          for (int n = 0; n < 60; ++n) {
            t.Add(n, {});
            stopped.push_back(false);
            quality.push_back(static_cast<double>(rng() % 20));
          }
          int decisions = 0, stops = 0;
          for (int round = 0; round < 4000; ++round) {
            // With correlation, trials join a few at a time, so that the first reach the end
            // while later ones still cross the rungs.
            size_t i = rng() % (correlation > 0 ? std::min<size_t>(t.points.size(), 3 + round / 60)
                                                : t.points.size());
            if (stopped[i] || t.points[i].size() >= 40) continue;
            int64_t step = static_cast<int64_t>(t.points[i].size()) + 1;
            double value =
                correlation > 0
                    ? quality[i] + static_cast<double>(rng() % 4) / static_cast<double>(step)
                    : static_cast<double>(rng() % 20) / (1.0 + static_cast<double>(step % 7));
            t.points[i].emplace_back(step, value);
            Decision a = t.Decide(pure, i, d);
            Curve mine{t.numbers[i], {t.points[i].data(), t.points[i].size()}, false, {}};
            Decision b = incremental.Observe(mine, d).decision;
            ASSERT_EQ(a, b) << "seed " << seed << " brackets " << brackets << " bootstrap "
                            << bootstrap << " correlation " << correlation << " trial " << i
                            << " step " << step;
            ++decisions;
            if (a == Decision::kStop) {
              stopped[i] = true;
              ++stops;
            }
          }
          EXPECT_GT(decisions, 100);
          EXPECT_GT(stops, 10);
        }
      }
    }
  }
}

}  // namespace
}  // namespace hpo::algorithms
