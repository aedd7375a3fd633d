// TPE against random search on Branin and Hartmann-6: the same trial budget over 10 seeds each,
// compared as distributions (medians and per-seed wins), not one run.
#include <cmath>
#include <set>

#include "algorithms/random_sampler.h"
#include "algorithms/tpe_sampler.h"
#include "gtest/gtest.h"
#include "tests/unit/algorithms/test_functions.h"

namespace hpo::algorithms {
namespace {

using namespace ::hpo::algorithms::testing;  // NOLINT

void Compare(const SearchSpace& space, const Objective& f, int trials, const char* name,
             bool multivariate) {
  RandomSampler random;
  TpeSampler tpe({10, 24, multivariate});
  std::vector<double> r, t;
  int wins = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    r.push_back(Run(random, space, f, trials, seed));
    t.push_back(Run(tpe, space, f, trials, seed));
    wins += t.back() < r.back() ? 1 : 0;
  }
  std::printf(
      "%s, %d trials, 10 seeds: median best random %.4f, %s TPE %.4f; TPE better in %d/10\n", name,
      trials, Median(r), multivariate ? "multivariate" : "univariate", Median(t), wins);
  EXPECT_LT(Median(t), Median(r)) << name;
  EXPECT_GE(wins, 7) << name;
}

// The median x1 of 21 proposals (trial numbers 100..120, seed 7) from `history` on `space`.
double MedianProposal(const TpeSampler& tpe, const SearchSpace& space,
                      const std::vector<HistoryEntry>& history) {
  std::vector<double> xs;
  for (int64_t t = 0; t < 21; ++t) {
    SuggestRequest req{&space, &history, 100 + t, 7, Direction::kMinimize};
    auto p = tpe.Suggest(req);
    EXPECT_TRUE(p.ok() && p->has_value());
    xs.push_back(X(**p, "x1"));
  }
  return Median(xs);
}

class TpeVariants : public ::testing::TestWithParam<bool> {};

TEST_P(TpeVariants, BeatsRandomOnBranin) {
  Compare(Box({{-5, 10}, {0, 15}}), Branin, 100, "Branin", GetParam());
}

TEST_P(TpeVariants, BeatsRandomOnHartmann6) {
  Compare(Box(std::vector<std::pair<double, double>>(6, {0, 1})), Hartmann6, 100, "Hartmann-6",
          GetParam());
}

TEST_P(TpeVariants, SameSeedSameSuggestionsAndTypesKept) {
  SearchSpace s;
  s.params.push_back(
      {"lr", ::hpo::algorithms::ParamType::kFloat, 1e-4, 1e-1, true, std::nullopt, {}, {}});
  s.params.push_back({"units", ::hpo::algorithms::ParamType::kInt, 8, 64, false, 8.0, {}, {}});
  s.params.push_back({"act",
                      ::hpo::algorithms::ParamType::kCategorical,
                      0,
                      0,
                      false,
                      std::nullopt,
                      {std::string("a"), std::string("b")},
                      {}});
  TpeSampler tpe({5, 24, GetParam()});
  std::vector<HistoryEntry> history;
  for (int t = 0; t < 30; ++t) {
    SuggestRequest req{&s, &history, t, 3, Direction::kMaximize};
    auto a = tpe.Suggest(req), b = tpe.Suggest(req);
    ASSERT_TRUE(a.ok() && a->has_value());
    EXPECT_EQ(**a, **b);
    EXPECT_TRUE(s.Contains(**a));
    EXPECT_EQ(std::get<int64_t>((**a).at("units")) % 8, 0);
    double lr = std::get<double>((**a).at("lr"));
    history.push_back({t, **a, true, -std::abs(std::log10(lr) + 2)});  // best near lr = 0.01
  }
}

INSTANTIATE_TEST_SUITE_P(Tpe, TpeVariants, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "Multivariate" : "Univariate";
                         });

// With curves (a sweep with a stopper), trials are compared at the furthest step at least half of
// them reached, and running trials count. Here 40 trials spread over [0, 1] reported step 1, best
// near x = 0.8; 4 trials near x = 0.2 looked bad at step 1 but ran to step 27, where every value
// is lower, as curves fall. Compared at step 1, x = 0.8 is good; by final objective, x = 0.2.
TEST_P(TpeVariants, ComparesCurvesAtTheStepMostTrialsReached) {
  SearchSpace s = Box({{0, 1}});
  std::vector<std::vector<std::pair<int64_t, double>>> curves;
  curves.reserve(64);
  std::vector<HistoryEntry> history;
  auto add = [&](double x, std::vector<std::pair<int64_t, double>> curve, bool finished) {
    curves.push_back(std::move(curve));
    int64_t n = static_cast<int64_t>(history.size());
    history.push_back({n,
                       {{"x1", x}},
                       finished,
                       finished ? std::optional(curves.back().back().second) : std::nullopt,
                       -1,
                       -1,
                       &curves.back()});
  };
  for (int i = 0; i < 40; ++i) {
    double x = (i + 0.5) / 40.0;
    // Some are still running: they count too.
    add(x, {{1, 1.0 + (x - 0.8) * (x - 0.8)}}, i % 4 != 0);
  }
  for (int i = 0; i < 4; ++i) {
    std::vector<std::pair<int64_t, double>> curve;
    for (int64_t step = 1; step <= 27; ++step) curve.emplace_back(step, step == 1 ? 2.0 : 0.1);
    add(0.15 + 0.03 * i, curve, true);
  }
  TpeSampler tpe({10, 24, GetParam()});
  auto proposed = [&] { return MedianProposal(tpe, s, history); };
  EXPECT_NEAR(proposed(), 0.8, 0.1);
  // Without curves it ranks finished trials by objective: the x = 0.2 trials win.
  for (HistoryEntry& h : history) {
    h.finished = true;
    h.objective = h.curve->back().second;
    h.curve = nullptr;
  }
  EXPECT_NEAR(proposed(), 0.2, 0.1);
}

// Twelve trials around x = 0.8 report the very same curve, the best of all: one configuration
// run again and again, as far as the objective tells (a trainer that maps nearby values to one
// model). Counted once, among the good, with its repeats among the bad, they no longer draw the
// proposals: those go where the other good trials are (x = 0.3). The same twelve with curves
// that differ, however little, are twelve good trials, and draw them.
TEST_P(TpeVariants, ACurveThatRepeatsAnEarlierOneCountsAmongTheBad) {
  SearchSpace s = Box({{0, 1}});
  auto proposed = [&](bool repeats) {
    std::vector<std::vector<std::pair<int64_t, double>>> curves;
    curves.reserve(64);
    std::vector<HistoryEntry> history;
    auto add = [&](double x, double value) {
      curves.push_back({{1, value}, {2, value}, {3, value}});
      int64_t n = static_cast<int64_t>(history.size());
      history.push_back({n, {{"x1", x}}, true, value, -1, -1, &curves.back()});
    };
    for (int i = 0; i < 40; ++i) {
      double x = (i + 0.5) / 40.0;
      add(x, 1.0 + (x - 0.3) * (x - 0.3));
    }
    for (int i = 0; i < 12; ++i) add(0.76 + 0.007 * i, repeats ? 0.5 : 0.5 + 1e-6 * i);
    return MedianProposal(TpeSampler({10, 24, GetParam()}), s, history);
  };
  EXPECT_NEAR(proposed(false), 0.8, 0.1);
  EXPECT_NEAR(proposed(true), 0.3, 0.1);
}

}  // namespace
}  // namespace hpo::algorithms

namespace hpo::algorithms {
namespace {

// A space of finitely many configurations (8 x 8 x 3 = 192) and 60 trials: multivariate TPE
// runs no configuration twice while its draws turn up fresh ones (a repeat tells it nothing).
TEST(Tpe, RunsNoConfigurationTwiceInAFiniteSpace) {
  SearchSpace space;
  for (const char* name : {"a", "b"}) {
    ParamDef p;
    p.name = name;
    p.type = ParamType::kInt;
    p.low = 0;
    p.high = 7;
    space.params.push_back(p);
  }
  ParamDef c;
  c.name = "c";
  c.type = ParamType::kCategorical;
  c.choices = {std::string("x"), std::string("y"), std::string("z")};
  space.params.push_back(c);
  TpeSampler tpe({10, 24, true});
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    std::vector<HistoryEntry> history;
    std::set<Params> seen;
    for (int n = 0; n < 60; ++n) {
      SuggestRequest req;
      req.space = &space;
      req.history = &history;
      req.trial_number = n;
      req.seed = seed;
      auto p = tpe.Suggest(req);
      ASSERT_TRUE(p.ok() && p->has_value());
      // A bowl around a = 3, b = 4, c = y: the model homes in on a few configurations.
      double a = static_cast<double>(std::get<int64_t>((**p).at("a")));
      double b = static_cast<double>(std::get<int64_t>((**p).at("b")));
      double v = (a - 3) * (a - 3) + (b - 4) * (b - 4) +
                 (std::get<std::string>((**p).at("c")) == "y" ? 0 : 2);
      bool fresh = seen.insert(**p).second;
      if (n >= 10) {  // the random start-up draws may repeat
        EXPECT_TRUE(fresh) << "seed " << seed << " trial " << n;
      }
      history.push_back({n, **p, true, v});
    }
  }
}

}  // namespace
}  // namespace hpo::algorithms

namespace hpo::algorithms {
namespace {

// A history of n finished trials on one float parameter x1, trial i scoring `score(i)`.
template <typename Score>
std::vector<HistoryEntry> Scored(int n, Score score) {
  std::vector<HistoryEntry> history;
  for (int i = 0; i < n; ++i) {
    Params p;
    p["x1"] = static_cast<double>(i % 1000) / 1000.0;
    history.push_back({i, p, true, score(i)});
  }
  return history;
}

std::set<int64_t> Numbers(const std::vector<const HistoryEntry*>& entries) {
  std::set<int64_t> out;
  for (const HistoryEntry* h : entries) out.insert(h->number);
  return out;
}

// Up to 1,000 trials TPE models them all; past that the 900 most recent and the 100 best of the
// others, in history order, whichever way the objective goes.
TEST(Tpe, ModelsTheRecentTrialsAndTheBestOfTheOthersPastAThousand) {
  SearchSpace space = Box({{0, 1}});
  auto small = Scored(1000, [](int i) { return static_cast<double>(i); });
  SuggestRequest req{&space, &small, 1000, 1, Direction::kMinimize};
  EXPECT_EQ(TpeSampler::Modelled(req).size(), 1000u);
  // 5,000 trials; the best ones (lowest score) are every 40th of the first 4,100.
  auto big = Scored(5000, [](int i) { return i < 4100 && i % 40 == 0 ? -1.0 * i : 1.0 * i; });
  for (Direction direction : {Direction::kMinimize, Direction::kMaximize}) {
    if (direction == Direction::kMaximize) {
      for (HistoryEntry& h : big) h.objective = -*h.objective;
    }
    req = SuggestRequest{&space, &big, 5000, 1, direction};
    std::vector<const HistoryEntry*> modelled = TpeSampler::Modelled(req);
    ASSERT_EQ(modelled.size(), 1000u);
    std::set<int64_t> want;
    for (int i = 0; i < 4100; i += 40) want.insert(i);  // 103 of them: the best 100 are kept
    want.erase(0), want.erase(40), want.erase(80);
    for (int i = 4100; i < 5000; ++i) want.insert(i);
    EXPECT_EQ(Numbers(modelled), want);
    EXPECT_TRUE(std::is_sorted(modelled.begin(), modelled.end(),
                               [](auto* a, auto* b) { return a->number < b->number; }));
  }
  // Unfinished or without an objective: never among the best.
  for (HistoryEntry& h : big) h.finished = h.number % 80 != 0;
  req = SuggestRequest{&space, &big, 5000, 1, Direction::kMaximize};
  for (const HistoryEntry* h : TpeSampler::Modelled(req)) {
    EXPECT_TRUE(h->number >= 4100 || h->finished) << h->number;
  }
}

// With two objectives, the best of the earlier trials by each objective in turn, feasible first.
TEST(Tpe, ModelsTheBestOfEachObjectivePastAThousand) {
  SearchSpace space = Box({{0, 1}});
  auto history = Scored(3000, [](int) { return 0.0; });
  for (HistoryEntry& h : history) {
    double i = static_cast<double>(h.number);
    h.values = {i, -i};  // the first objective is best early, the second late
  }
  history[5].violation = 1;  // infeasible: after every feasible trial
  const std::vector<Direction> two = {Direction::kMinimize, Direction::kMinimize};
  SuggestRequest req{&space, &history, 3000, 1, Direction::kMinimize};
  req.directions = &two;
  std::set<int64_t> got = Numbers(TpeSampler::Modelled(req)), want;
  for (int i = 0; i < 51; ++i) want.insert(i == 5 ? 50 : i);  // the 50 lowest feasible
  for (int i = 2050; i < 3000; ++i) want.insert(i);  // the 50 highest of the earlier, the recent
  EXPECT_EQ(got, want);
}

// A long sweep whose best trials came early still proposes near them: the model keeps them.
// Trials 0..999 found the bowl at x1 = 0.2; the 20,000 after them were poorer, best near 0.8
// (a window of recent trials alone proposes there).
TEST(Tpe, ALongSweepStillLearnsFromItsEarlyBest) {
  SearchSpace space = Box({{0, 1}});
  std::vector<HistoryEntry> history;
  for (int i = 0; i < 21000; ++i) {
    Params p;
    double x = ((i * 7919) % 1000) / 1000.0;
    p["x1"] = x;
    history.push_back({i, p, true, i < 1000 ? (x - 0.2) * (x - 0.2) : 1.0 + std::abs(x - 0.8)});
  }
  TpeSampler tpe({10, 24, true});
  double median = MedianProposal(tpe, space, history);
  EXPECT_LT(std::abs(median - 0.2), 0.15) << median;
  std::vector<HistoryEntry> later(history.begin() + 1000, history.end());
  for (size_t i = 0; i < later.size(); ++i) later[i].number = static_cast<int64_t>(i);
  EXPECT_GT(MedianProposal(tpe, space, later), 0.6);  // the same trials without the early ones
}

// What `auto` says it does (random draws, or modelling) comes from the last few trials in a long
// sweep; it agrees with counting the trials the model learns from.
TEST(Tpe, ModelsAtLeastAgreesWithTheTrialsLearnedFrom) {
  SearchSpace space = Box({{0, 1}});
  std::vector<std::vector<std::pair<int64_t, double>>> curves(3000);
  for (bool with_curves : {false, true}) {
    for (int n : {0, 5, 12, 30, 3000}) {
      std::vector<HistoryEntry> history;
      for (int i = 0; i < n; ++i) {
        Params p;
        p["x1"] = (i % 97) / 97.0;
        // Every third trial still runs; curves of 1 to 4 steps.
        bool finished = i % 3 != 0;
        history.push_back({i, p, finished, finished ? std::optional<double>(i % 7) : std::nullopt});
        if (with_curves) {
          curves[static_cast<size_t>(i)].clear();
          for (int s = 1; s <= 1 + i % 4; ++s)
            curves[static_cast<size_t>(i)].push_back({s, 1.0 * s});
          history.back().curve = &curves[static_cast<size_t>(i)];
        }
      }
      SuggestRequest req{&space, &history, n, 1, Direction::kMinimize};
      size_t learned = TpeSampler::Learned(req);
      for (size_t k : {1u, 4u, 10u, 11u, 25u}) {
        EXPECT_EQ(TpeSampler::ModelsAtLeast(req, k), learned >= k)
            << n << " trials, curves " << with_curves << ", k " << k << ", learned " << learned;
      }
    }
  }
}

}  // namespace
}  // namespace hpo::algorithms
