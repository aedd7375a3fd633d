#pragma once
// Nsga2Sampler: NSGA-II (Deb et al., 2002) in asynchronous steady-state form, for one objective
// or several, with constraints.
//
// No generation barrier: each suggestion breeds one child as soon as a slot frees. The parents'
// pool is NSGA-II's survivors among every trial that ran to its end so far: the `population`
// best by (constrained) non-dominated rank, the front that does not fit whole cut by crowding
// distance. Two parents come from binary tournaments on (rank, crowding distance). With
// probability `crossover_rate` the child takes simulated binary crossover (SBX, distribution
// index 15) of numeric parameters, each with probability 1/2, in the space TPE models them in
// (log for log parameters), and each categorical from either parent; then each parameter
// mutates with probability `mutation_rate` (default 1 / the number of parameters): polynomial
// mutation (index 20) for numbers, another choice for categoricals. A child equal to a trial
// that exists already is mutated again. Until `population` trials finished, suggestions are
// random draws.
//
// Trials stopped early are left out (their values are of a shorter run); a trial that misses the
// sweep's constraints ranks after every one that meets them (HistoryEntry::violation).
//
// Pure and stateless: (settings, history, trial number, seed) decide, so a restarted daemon goes
// on alike. Thread-compatible.

#include "algorithms/rng.h"
#include "algorithms/sampler.h"

namespace hpo::algorithms {

struct Nsga2Options {
  int population = 20;
  double crossover_rate = 0.9;
  double mutation_rate = 0;  // per parameter; 0: 1 / the number of parameters
};

class Nsga2Sampler final : public Sampler {
 public:
  explicit Nsga2Sampler(const Nsga2Options& options) : options_(options) {}
  std::string Name() const override { return "nsga2"; }
  [[nodiscard]] absl::StatusOr<std::optional<Params>> Suggest(
      const SuggestRequest& req) const override;
  std::optional<int64_t> MaxTrials(const SearchSpace&) const override { return std::nullopt; }
  // INVALID_ARGUMENT naming the setting that is out of range.
  [[nodiscard]] static absl::Status Validate(const Nsga2Options& options);

 private:
  Nsga2Options options_;
};

}  // namespace hpo::algorithms
