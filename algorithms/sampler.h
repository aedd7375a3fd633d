#pragma once
// Sampler: proposes the parameters of the next trial.
//
// A sampler is a pure function of its settings, the space, the sweep's history, the trial's
// number and the sweep's seed: it keeps no state between calls, so a daemon that reloads the
// history from its store continues the same search. Implementations are thread-compatible.

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/pareto.h"
#include "algorithms/search_space.h"

namespace hpo::algorithms {

// What the sampler may know of a trial that already exists.
struct HistoryEntry {
  int64_t number = 0;
  Params params;
  bool finished = false;            // in a final state
  std::optional<double> objective;  // the trial's objective once it finished (if it reported one)
  int64_t parent = -1;              // PBT: the trial (number) whose checkpoint it started from
  int64_t lineage = -1;             // PBT: the population member it belongs to
  // The objective metric per step (step, value), for finished and running trials alike, when the
  // sweep keeps curves (it has a stopper); null otherwise. TPE compares trials on it.
  const std::vector<std::pair<int64_t, double>>* curve = nullptr;
  // Pareto ranking (SuggestRequest::directions): once the trial finished, its value of each
  // objective, in the sweep's order (NaN where it has none); empty otherwise.
  std::vector<double> values = {};
  double violation = 0;  // how far it missed the sweep's constraints; 0: met (or none)
  bool stopped = false;  // early stopping ended it: its values are those of a shorter run
  // Pareto ranking with curves: per point of `curve`, every objective's value and the point's
  // violation (Curve::vectors), for finished and running trials alike; null otherwise.
  const std::vector<double>* vectors = nullptr;
};

// What SuggestRequest::objectives holds for an entry: its objective once it finished with a
// finite one, NaN otherwise.
inline double ObjectiveColumn(const HistoryEntry& h) {
  return h.finished && h.objective && std::isfinite(*h.objective)
             ? *h.objective
             : std::numeric_limits<double>::quiet_NaN();
}

// What a sampler that continues trials (PBT) says besides the parameters.
struct SuggestOutput {
  int64_t parent = -1;  // the trial whose checkpoint the new one starts from; -1: from scratch
  int64_t lineage = -1;
};

struct SuggestRequest {
  const SearchSpace* space = nullptr;
  const std::vector<HistoryEntry>* history = nullptr;
  int64_t trial_number = 0;  // 0-based number of the trial to propose
  uint64_t seed = 0;
  Direction direction = Direction::kMinimize;
  SuggestOutput* output = nullptr;  // filled by samplers that continue trials; may be null
  // Optional, for long sweeps: objectives[i] is the objective of the trial numbered i
  // (history[i].number == i) when it finished with a finite one, NaN otherwise. Samplers that
  // scan the whole history (genetic) read this column instead of every entry.
  const std::vector<double>* objectives = nullptr;
  // A sweep that ranks trials by constrained Pareto dominance (several objectives, or
  // constraints): the direction of each objective (HistoryEntry::values). Null: one objective,
  // `direction`, and no constraints.
  const std::vector<Direction>* directions = nullptr;

  bool MultiObjective() const { return directions != nullptr && !directions->empty(); }
};

// The finished trials a multi-objective sampler learns from: those that ran to their end (not
// stopped early) with a value for every objective, in history order, and their values as
// Points (minimized, with their violations). `entries` receives the trials, in Points' order.
Points CompletedPoints(const SuggestRequest& req, std::vector<const HistoryEntry*>& entries);
// The same over `among` (entries of req.history), in its order.
Points CompletedPoints(const SuggestRequest& req, const std::vector<const HistoryEntry*>& among,
                       std::vector<const HistoryEntry*>& entries);

// Algorithm settings from the sweep file (`algorithm:` section).
struct AlgorithmSpec {
  // "auto" (auto_sampler.h) | "random" | "grid" | "tpe" | "gp" | "genetic" | "pbt" | "nsga2"
  std::string name = "auto";
  int grid_points = 5;           // grid: values per continuous parameter
  bool grid_shuffle = false;     // grid: visit points in a seeded random order
  int startup_trials = 10;       // tpe, gp: random trials before the model is used
  int tpe_candidates = 24;       // tpe: draws scored per suggestion
  bool tpe_multivariate = true;  // tpe: one joint density instead of one per parameter
  // genetic (see genetic_sampler.h)
  int population = 20;
  int tournament = 3;
  double crossover_rate = 0.5;
  double mutation_rate = 0.3;
  double mutation_scale = 0.1;
  int elitism = 2;
  int demes = 1;
  int migration_interval = 10;
  // pbt (genetic_sampler.h: PbtSampler); population as above
  double pbt_quantile = 0.25;
  double pbt_resample_rate = 0.25;
  double pbt_perturb = 0.2;
  // nsga2 (nsga2_sampler.h); population as above
  double nsga2_crossover_rate = 0.9;
  double nsga2_mutation_rate = 0;  // per parameter; 0: 1 / the number of parameters
  // auto: what the rest of the sweep file says that the choice depends on (the parser fills
  // them in from `budget:`).
  int64_t max_trials = 0;   // budget.max_trials; 0: none
  int64_t concurrency = 1;  // budget.max_concurrent
};

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::string Name() const = 0;
  // The parameters of trial `req.trial_number`, or nullopt when the sampler has nothing more to
  // propose (a finished grid). Errors are INVALID_ARGUMENT for a space it cannot handle.
  [[nodiscard]] virtual absl::StatusOr<std::optional<Params>> Suggest(
      const SuggestRequest& req) const = 0;
  // How many trials the sampler can propose at most; nullopt when unbounded.
  virtual std::optional<int64_t> MaxTrials(const SearchSpace& space) const = 0;
  // Whether its proposals depend on the history (false: on the trial's number and the seed
  // alone, so a caller may leave the history empty).
  virtual bool ReadsHistory() const { return true; }
  // What it does at this point of the sweep (req: the next suggestion's request), and why, in
  // words, for a sampler that chooses (auto); empty for one that does one thing.
  virtual std::string Choice(const SuggestRequest& /*req*/) const { return ""; }
};

// INVALID_ARGUMENT when the name is unknown or the settings do not fit the space, or when the
// sweep ranks trials by constrained Pareto dominance (`pareto`: several objectives, or
// constraints) and the sampler ranks by one objective alone (genetic, pbt).
[[nodiscard]] absl::StatusOr<std::unique_ptr<Sampler>> MakeSampler(const AlgorithmSpec& spec,
                                                                   const SearchSpace& space,
                                                                   bool pareto = false);

// Names MakeSampler accepts.
const std::vector<std::string>& SamplerNames();

}  // namespace hpo::algorithms
