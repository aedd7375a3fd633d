// TPE against random search on Branin and Hartmann-6: the same trial budget over 10 seeds each,
// compared as distributions (medians and per-seed wins), not one run.
#include <cmath>

#include "algorithms/random_sampler.h"
#include "algorithms/tpe_sampler.h"
#include "gtest/gtest.h"

namespace hpo::algorithms {
namespace {

using Objective = std::function<double(const Params&)>;

double X(const Params& p, const std::string& k) { return std::get<double>(p.at(k)); }

// Branin on [-5, 10] x [0, 15]; minimum 0.397887.
double Branin(const Params& p) {
  double x1 = X(p, "x1"), x2 = X(p, "x2");
  double b = 5.1 / (4 * M_PI * M_PI), c = 5 / M_PI, t = 1 / (8 * M_PI);
  return std::pow(x2 - b * x1 * x1 + c * x1 - 6, 2) + 10 * (1 - t) * std::cos(x1) + 10;
}

// Hartmann-6 on [0, 1]^6; minimum -3.32237.
double Hartmann6(const Params& p) {
  static const double a[4] = {1.0, 1.2, 3.0, 3.2};
  static const double A[4][6] = {{10, 3, 17, 3.5, 1.7, 8}, {0.05, 10, 17, 0.1, 8, 14},
                                 {3, 3.5, 1.7, 10, 17, 8}, {17, 8, 0.05, 10, 0.1, 14}};
  static const double P[4][6] = {{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
                                 {0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
                                 {0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
                                 {0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381}};
  double total = 0;
  for (int i = 0; i < 4; ++i) {
    double e = 0;
    for (int j = 0; j < 6; ++j) {
      double x = X(p, "x" + std::to_string(j + 1));
      e += A[i][j] * (x - P[i][j]) * (x - P[i][j]);
    }
    total += a[i] * std::exp(-e);
  }
  return -total;
}

SearchSpace Box(const std::vector<std::pair<double, double>>& bounds) {
  SearchSpace s;
  for (size_t i = 0; i < bounds.size(); ++i) {
    ParamDef p;
    p.name = "x" + std::to_string(i + 1);
    p.low = bounds[i].first;
    p.high = bounds[i].second;
    s.params.push_back(p);
  }
  return s;
}

// Best value after `n` sequential trials.
double Run(const Sampler& sampler, const SearchSpace& space, const Objective& f, int n, uint64_t seed) {
  std::vector<HistoryEntry> history;
  double best = INFINITY;
  for (int t = 0; t < n; ++t) {
    SuggestRequest req{&space, &history, t, seed, Direction::kMinimize};
    auto params = sampler.Suggest(req);
    EXPECT_TRUE(params.ok() && params->has_value());
    EXPECT_TRUE(space.Contains(**params));
    double y = f(**params);
    best = std::min(best, y);
    history.push_back({t, **params, true, y});
  }
  return best;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

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
