#pragma once
// GpSampler: Bayesian optimization with a Gaussian process (`algorithm: gp`).
//
// The model. Every parameter is one coordinate in [0, 1]: numeric ones on the axis TPE uses (log
// space for log parameters; ints and stepped parameters widened by half a step, rounded back when
// proposed), categoricals as a choice whose distance to another is 0 or 1. The kernel is
// Matérn-5/2 with a length scale per parameter (automatic relevance determination), a signal
// variance and a noise variance; the objective is standardized (minimized, mean 0, variance 1)
// and its prior mean is 0. The kernel's settings maximize the log marginal likelihood plus weak
// log-normal priors (length scales around 0.5, noise around 1e-3, which keep a fit on a few
// trials from collapsing), by 30 steps of Adam on their logarithms from the same start each time,
// with the likelihood's analytic gradient, on at most 128 of the modelled trials (the 48 best and
// the most recent others; the model then conditions on all of them).
//
// The choice. After `startup_trials` random draws, the proposal maximizes the logarithm of the
// expected improvement over the best trial (log EI, computed so that it stays finite and ordered
// far from the incumbent): 512 random points, then a local search from the best 4 of them and
// the 4 best trials (Gaussian steps per coordinate, halved when no step helps, 24 rounds).
//
// What it learns from: finished trials with a finite objective. A trial early stopping ended
// counts with the value it ended at (a shorter run's, which the stopper judged worse). Running
// trials are believed (kriging believer): once the model is fitted, each is added at its own
// configuration with the value the model predicts there, so that the variance drops around it and
// W running trials draw W different proposals.
//
// Several objectives (ParEGO, Knowles 2006): each objective is scaled to [0, 1] over the modelled
// trials and the GP models their augmented Chebyshev scalarization max_i(w_i f_i) + 0.05
// sum_i(w_i f_i), with weights drawn per trial number, so that successive suggestions aim at
// different parts of the front. Constraints: a second GP models the trials' violation (0 when
// met); the acquisition adds the log probability that the violation is below a tenth of the
// violations' spread, and the incumbent is the best feasible trial (none yet: the proposal
// maximizes that probability alone).
//
// Its cost is bounded: a suggestion refits the model (the sampler keeps no state), over at most
// kModelled trials — all of them up to that; past it the kBest best and the most recent others —
// so that a suggestion costs the same at 300 trials as at 100,000 (bench/suggest_bench).
//
// Deterministic in (seed, trial number, history).

#include "algorithms/sampler.h"

namespace hpo::algorithms {

struct GpOptions {
  int startup_trials = 10;
};

class GpSampler final : public Sampler {
 public:
  explicit GpSampler(const GpOptions& options) : options_(options) {}
  std::string Name() const override { return "gp"; }
  [[nodiscard]] absl::StatusOr<std::optional<Params>> Suggest(
      const SuggestRequest& req) const override;
  std::optional<int64_t> MaxTrials(const SearchSpace&) const override { return std::nullopt; }
  // At most this many finished trials are modelled: past it the kBest best and the most recent.
  static constexpr size_t kModelled = 256, kBest = 96;
  // At most this many running trials are believed (the most recent).
  static constexpr size_t kBelieved = 64;
  const GpOptions& options() const { return options_; }

 private:
  GpOptions options_;
};

}  // namespace hpo::algorithms
