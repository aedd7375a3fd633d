#pragma once
// SweepPlan: a sweep file parsed once, with the sampler and stopper the sweep runs with.
//
// PlanSweep is the one place a sweep's YAML becomes something to run: `hpo validate`, a submit
// and the recovery of a stored sweep all plan through it, so the spec is parsed and the sampler
// built once per use. Thread-compatible; no I/O.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "algorithms/sampler.h"
#include "algorithms/stopper.h"
#include "backend/backend.h"
#include "server/spec/sweep_spec.h"
#include "server/store/store.h"

namespace hpo::server {

struct SweepPlan {
  SweepSpec spec;
  // Shared with the suggester's thread while it makes a proposal (suggester.h).
  std::shared_ptr<const algorithms::Sampler> sampler;
  std::unique_ptr<algorithms::Stopper> stopper;
  int64_t limit = 0;  // SweepSpec::TrialLimit: trials the sweep runs at most; 0: unbounded
  // Whether the sweep keeps each trial's objective curve (it has a stopper, which reads it, as
  // does TPE); without one no curve is kept.
  bool keeps_curves = false;
  // Pareto ranking (SweepSpec::Pareto): the direction of each objective, for the sampler and
  // the stopper; empty otherwise.
  std::vector<algorithms::Direction> directions;
  // A stored sweep this release would refuse (ParseOptions::lenient): what it refuses; the sweep
  // runs as it was stored.
  std::vector<std::string> warnings;
};

struct PlanResult {
  std::optional<SweepPlan> plan;
  std::vector<std::string> errors;    // "file:line:column: what is wrong"; empty when plan is set
  std::vector<std::string> warnings;  // ParseOptions::lenient: what this release would refuse
};

// Parses `yaml` and builds its sampler and stopper. With `backend` set, also resolves where the
// sweep runs (its placement's backend, filled in) and checks that the sweep's largest trial fits
// there, as far as the backend knows by itself (Backend::CheckFits; what only the cluster can say
// is Backend::Vet's); recovery leaves it null, since a stored sweep was checked when it was
// submitted. `parse`: the defaults the file's omissions mean (ParseSweepSpec).
PlanResult PlanSweep(const std::string& yaml, const std::string& source,
                     const std::string& base_dir, backend::Backend* backend = nullptr,
                     const ParseOptions& parse = {});

// How a backend's refusal of the sweep's resources or placement reads, in PlanSweep's words.
std::string PlacementError(const SweepSpec& spec, absl::string_view message);

}  // namespace hpo::server
