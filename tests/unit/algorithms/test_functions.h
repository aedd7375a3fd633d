#pragma once
// Test functions and a sequential driver shared by the sampler comparisons.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/sampler.h"
#include "bench/functions.h"
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
inline double Hartmann6(const Params& p) { return ::hpo::bench::Hartmann6(p); }

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

// A parameter of every kind: a log float (lr), a float on a step of 0.05 (drop), a log int
// (units) and a categorical with `choices` (act).
inline SearchSpace EveryKind(std::vector<ParamValue> choices) {
  SearchSpace s;
  s.params.push_back({"lr", ParamType::kFloat, 1e-5, 1e-1, true, std::nullopt, {}, {}});
  s.params.push_back({"drop", ParamType::kFloat, 0.0, 0.5, false, 0.05, {}, {}});
  s.params.push_back({"units", ParamType::kInt, 8, 512, true, std::nullopt, {}, {}});
  s.params.push_back(
      {"act", ParamType::kCategorical, 0, 0, false, std::nullopt, std::move(choices), {}});
  return s;
}

// Best value after `n` sequential trials.
inline double Run(const Sampler& sampler, const SearchSpace& space, const Objective& f, int n,
                  uint64_t seed) {
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
