#pragma once
// Test functions and a sequential driver shared by the sampler comparisons.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/sampler.h"
#include "gtest/gtest.h"

namespace hpo::algorithms::testing {

using Objective = std::function<double(const Params&)>;

inline double X(const Params& p, const std::string& k) { return std::get<double>(p.at(k)); }

// Branin on [-5, 10] x [0, 15]; minimum 0.397887.
inline double Branin(const Params& p) {
  double x1 = X(p, "x1"), x2 = X(p, "x2");
  double b = 5.1 / (4 * M_PI * M_PI), c = 5 / M_PI, t = 1 / (8 * M_PI);
  return std::pow(x2 - b * x1 * x1 + c * x1 - 6, 2) + 10 * (1 - t) * std::cos(x1) + 10;
}

// Hartmann-6 on [0, 1]^6; minimum -3.32237.
inline double Hartmann6(const Params& p) {
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

inline SearchSpace Box(const std::vector<std::pair<double, double>>& bounds) {
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
inline double Run(const Sampler& sampler, const SearchSpace& space, const Objective& f, int n, uint64_t seed) {
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

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace hpo::algorithms::testing
