// TPE against random search on Branin and Hartmann-6: the same trial budget over 10 seeds each,
// compared as distributions (medians and per-seed wins), not one run.
#include <cmath>

#include "algorithms/random_sampler.h"
#include "algorithms/tpe_sampler.h"
#include "tests/unit/algorithms/test_functions.h"
#include "gtest/gtest.h"

namespace hpo::algorithms {
namespace {

using namespace ::hpo::algorithms::testing;  // NOLINT

void Compare(const SearchSpace& space, const Objective& f, int trials, const char* name) {
  RandomSampler random;
  TpeSampler tpe({10, 24});
  std::vector<double> r, t;
  int wins = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    r.push_back(Run(random, space, f, trials, seed));
    t.push_back(Run(tpe, space, f, trials, seed));
    wins += t.back() < r.back() ? 1 : 0;
  }
  std::printf("%s, %d trials, 10 seeds: median best random %.4f, TPE %.4f; TPE better in %d/10\n", name,
              trials, Median(r), Median(t), wins);
  EXPECT_LT(Median(t), Median(r)) << name;
  EXPECT_GE(wins, 7) << name;
}

TEST(Tpe, BeatsRandomOnBranin) { Compare(Box({{-5, 10}, {0, 15}}), Branin, 100, "Branin"); }

TEST(Tpe, BeatsRandomOnHartmann6) { Compare(Box(std::vector<std::pair<double, double>>(6, {0, 1})), Hartmann6, 100, "Hartmann-6"); }

TEST(Tpe, SameSeedSameSuggestionsAndTypesKept) {
  SearchSpace s;
  s.params.push_back({"lr", ParamType::kFloat, 1e-4, 1e-1, true, std::nullopt, {}, {}});
  s.params.push_back({"units", ParamType::kInt, 8, 64, false, 8.0, {}, {}});
  s.params.push_back({"act", ParamType::kCategorical, 0, 0, false, std::nullopt, {std::string("a"), std::string("b")}, {}});
  TpeSampler tpe({5, 24});
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

}  // namespace
}  // namespace hpo::algorithms
