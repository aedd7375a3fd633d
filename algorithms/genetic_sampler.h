#pragma once
// GeneticSampler: asynchronous steady-state evolution with no generation barrier.
//
// Each suggestion breeds one child as soon as a slot frees, from the trials that have finished so
// far: the population is the `population` most recently finished trials (per deme) plus the
// `elitism` best ever, which never age out (regularized / aging evolution with elites). Parents
// are picked by tournament; with probability `crossover_rate` a second parent gives each
// parameter with probability 1/2 (uniform crossover); then each parameter mutates with
// probability `mutation_rate`: floats and ints by a gaussian step of `mutation_scale` times their
// range (in log space for log parameters; reflected into the bounds, snapped to the step),
// categoricals by drawing another choice. A child that came out equal to its parent gets one
// parameter mutated. The first `population` trials, and any while a deme has fewer than two
// finished trials, are random draws.
//
// Demes (islands): trial n belongs to deme n mod demes and breeds only from its deme, except every
// `migration_interval`-th child of a deme, whose tournament also sees the best trial of the
// previous deme in the ring (migration).
//
// Pure and stateless: everything comes from (settings, history, trial number, seed), so a
// restarted daemon continues the same search. Thread-compatible.

#include "algorithms/rng.h"
#include "algorithms/sampler.h"

namespace hpo::algorithms {

struct GeneticOptions {
  int population = 20;
  int tournament = 3;
  double crossover_rate = 0.5;
  double mutation_rate = 0.3;   // per parameter
  double mutation_scale = 0.1;  // gaussian sigma as a fraction of the (log) range
  int elitism = 2;
  int demes = 1;
  int migration_interval = 10;  // 0: no migration
};

class GeneticSampler final : public Sampler {
 public:
  explicit GeneticSampler(const GeneticOptions& options) : options_(options) {}
  std::string Name() const override { return "genetic"; }
  [[nodiscard]] absl::StatusOr<std::optional<Params>> Suggest(
      const SuggestRequest& req) const override;
  std::optional<int64_t> MaxTrials(const SearchSpace&) const override { return std::nullopt; }

  // INVALID_ARGUMENT naming the setting that is out of range.
  [[nodiscard]] static absl::Status Validate(const GeneticOptions& options);
  // One parameter's mutation (exposed for tests): a value of the same type, inside the bounds.
  static ParamValue Mutate(const ParamDef& p, const ParamValue& v, double scale, Rng& rng);

 private:
  GeneticOptions options_;
};

// PbtSampler: the genetic sampler's population-based-training mode. Each trial is one segment
// of training of one of `population` members (lineages); it starts from its parent's checkpoint
// ({checkpoint_in}) and leaves its own ({checkpoint_out}). The first `population` trials start
// the members from scratch with random parameters. Afterwards, a freed slot continues the member
// whose last segment finished longest ago: if that segment ranks in the bottom `quantile` of the
// members' latest finished segments (or failed), the member exploits — it starts from the
// checkpoint of a random member of the top `quantile` — and explores: every parameter is
// resampled with probability `resample_rate`, else numbers are multiplied by 1 - `perturb` or
// 1 + `perturb` (kept in bounds and on the step lattice). Otherwise it continues from its own
// checkpoint with its own parameters. Stateless: parents and lineages are in the history.
struct PbtOptions {
  int population = 8;
  double quantile = 0.25;
  double resample_rate = 0.25;
  double perturb = 0.2;
};

class PbtSampler final : public Sampler {
 public:
  explicit PbtSampler(const PbtOptions& options) : options_(options) {}
  std::string Name() const override { return "pbt"; }
  [[nodiscard]] absl::StatusOr<std::optional<Params>> Suggest(
      const SuggestRequest& req) const override;
  std::optional<int64_t> MaxTrials(const SearchSpace&) const override { return std::nullopt; }
  [[nodiscard]] static absl::Status Validate(const PbtOptions& options);
  // Explore: one parameter's new value (exposed for tests).
  static ParamValue Explore(const ParamDef& p, const ParamValue& v, const PbtOptions& o, Rng& rng);

 private:
  PbtOptions options_;
};

}  // namespace hpo::algorithms
