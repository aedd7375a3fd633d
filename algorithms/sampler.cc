#include "algorithms/sampler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "algorithms/auto_sampler.h"
#include "algorithms/genetic_sampler.h"
#include "algorithms/gp_sampler.h"
#include "algorithms/grid_sampler.h"
#include "algorithms/nsga2_sampler.h"
#include "algorithms/random_sampler.h"
#include "algorithms/tpe_sampler.h"
#include "common/status_macros.h"

namespace hpo::algorithms {

const std::vector<std::string>& SamplerNames() {
  static const std::vector<std::string> names = {"auto", "random",  "grid", "tpe",
                                                 "gp",   "genetic", "pbt",  "nsga2"};
  return names;
}

Points CompletedPoints(const SuggestRequest& req, std::vector<const HistoryEntry*>& entries) {
  std::vector<const HistoryEntry*> all;
  all.reserve(req.history->size());
  for (const HistoryEntry& h : *req.history) all.push_back(&h);
  return CompletedPoints(req, all, entries);
}

Points CompletedPoints(const SuggestRequest& req, const std::vector<const HistoryEntry*>& among,
                       std::vector<const HistoryEntry*>& entries) {
  const std::vector<Direction> one = {req.direction};
  const std::vector<Direction>& directions = req.MultiObjective() ? *req.directions : one;
  Points points;
  points.k = directions.size();
  for (const HistoryEntry* e : among) {
    const HistoryEntry& h = *e;
    if (!h.finished || h.stopped || !req.space->Contains(h.params)) continue;
    if (req.MultiObjective()) {
      if (h.values.size() != directions.size() ||
          !std::all_of(h.values.begin(), h.values.end(), [](double v) { return std::isfinite(v); }))
        continue;
      points.Add(h.values, directions, h.violation);
    } else {
      if (!h.objective || !std::isfinite(*h.objective)) continue;
      double v = *h.objective;
      points.Add({&v, 1}, directions, h.violation);
    }
    entries.push_back(&h);
  }
  return points;
}

absl::StatusOr<std::unique_ptr<Sampler>> MakeSampler(const AlgorithmSpec& spec,
                                                     const SearchSpace& space, bool pareto) {
  if (pareto && (spec.name == "genetic" || spec.name == "pbt")) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.name,
                     " ranks trials by one objective; with several objectives or constraints use "
                     "nsga2, tpe (multi-objective TPE) or random"));
  }
  if (spec.name == "auto") {
    AutoChoice choice = ChooseSampler(spec, space, pareto);
    ASSIGN_OR_RETURN(std::unique_ptr<Sampler> chosen, MakeSampler(choice.spec, space, pareto));
    return std::make_unique<AutoSampler>(std::move(choice), std::move(chosen));
  }
  if (spec.name == "random") return std::make_unique<RandomSampler>();
  if (spec.name == "nsga2") {
    Nsga2Options o{spec.population, spec.nsga2_crossover_rate, spec.nsga2_mutation_rate};
    RETURN_IF_ERROR(Nsga2Sampler::Validate(o));
    return std::make_unique<Nsga2Sampler>(o);
  }
  if (spec.name == "gp") {
    if (spec.startup_trials < 1)
      return absl::InvalidArgumentError("gp: startup_trials must be >= 1");
    return std::make_unique<GpSampler>(GpOptions{spec.startup_trials});
  }
  if (spec.name == "tpe") {
    if (spec.startup_trials < 1 || spec.tpe_candidates < 1) {
      return absl::InvalidArgumentError("tpe: startup_trials and candidates must be >= 1");
    }
    return std::make_unique<TpeSampler>(
        TpeOptions{spec.startup_trials, spec.tpe_candidates, spec.tpe_multivariate});
  }
  if (spec.name == "genetic") {
    GeneticOptions o{spec.population,    spec.tournament,        spec.crossover_rate,
                     spec.mutation_rate, spec.mutation_scale,    spec.elitism,
                     spec.demes,         spec.migration_interval};
    RETURN_IF_ERROR(GeneticSampler::Validate(o));
    return std::make_unique<GeneticSampler>(o);
  }
  if (spec.name == "pbt") {
    PbtOptions o{spec.population, spec.pbt_quantile, spec.pbt_resample_rate, spec.pbt_perturb};
    RETURN_IF_ERROR(PbtSampler::Validate(o));
    return std::make_unique<PbtSampler>(o);
  }
  if (spec.name == "grid") {
    if (spec.grid_points < 1) return absl::InvalidArgumentError("grid points must be >= 1");
    auto grid = std::make_unique<GridSampler>(space, spec.grid_points, spec.grid_shuffle);
    if (*grid->MaxTrials(space) > kMaxGridSize) {
      return absl::InvalidArgumentError(
          "the grid has more than 100,000,000 points; use fewer points or random search");
    }
    return grid;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown algorithm '", spec.name, "' (known: ", absl::StrJoin(SamplerNames(), ", "), ")"));
}

}  // namespace hpo::algorithms
