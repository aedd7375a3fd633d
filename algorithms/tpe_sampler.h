#pragma once
// TpeSampler: the tree-structured Parzen estimator (Bergstra et al., 2011), univariate.
//
// After `startup_trials` random draws, the finished trials with an objective are split into the
// best gamma(n) = min(ceil(0.1 n), 25) ("good") and the rest ("bad"). For each parameter, two
// densities are fitted — l(x) on the good values, g(x) on the bad ones, each a mixture with one
// truncated Gaussian per observation (in log space for log parameters) plus a wide prior — and
// `candidates` draws from l are scored by log l(x) - log g(x); the best is proposed. Categorical
// parameters use smoothed counts. Deterministic in (seed, trial number, history); no state.

#include "algorithms/sampler.h"

namespace hpo::algorithms {

struct TpeOptions {
  int startup_trials = 10;
  int candidates = 24;
};

class TpeSampler final : public Sampler {
 public:
  explicit TpeSampler(const TpeOptions& options) : options_(options) {}
  std::string Name() const override { return "tpe"; }
  absl::StatusOr<std::optional<Params>> Suggest(const SuggestRequest& req) const override;
  std::optional<int64_t> Capacity(const SearchSpace&) const override { return std::nullopt; }

 private:
  TpeOptions options_;
};

}  // namespace hpo::algorithms
