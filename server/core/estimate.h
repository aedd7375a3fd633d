#pragma once
// EstimateSweep: what a sweep will cost before it runs (`hpo plan`): how many trials and steps it
// runs, its GPU-hours, node-hours and wall time, each as a range.
//
// The sweep's own schedule decides: its trial limit (max_trials, the grid), its concurrency, its
// budgets (wall time, GPU-hours) and its early stopping, whose real Stopper runs over synthetic
// trials in virtual time. Each trial has a quality drawn at random and a curve that keeps its
// rank (with a little noise); it reports `steps` steps, each `step_seconds` long (one of the
// samples, picked per trial), unless the stopper stops it. Several runs with different draws
// give the range: the 10th percentile, the median and the 90th percentile of each figure. What
// the plan cannot know (a trial's length in steps, the time of a step) comes from the sweep file
// (`plan:`), the caller, or an earlier sweep's trials (EstimateInputs). Pure; no I/O.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/spec/sweep_spec.h"
#include "server/store/store.h"

namespace hpo::server {

struct EstimateInputs {
  int64_t limit = 0;  // the sweep's trial limit (SweepPlan::limit); 0: only budgets bound it
  int64_t steps = 0;  // steps a trial makes when nothing stops it; 0: unknown
  // Seconds per step, one sample per trial measured (or one declared); empty: unknown, and the
  // estimate has trials and steps only.
  std::vector<double> step_seconds;
  std::string basis;  // where `steps` and `step_seconds` came from, for the reader
  int runs = 15;      // simulated runs, for the range
};

struct EstimateRange {
  double low = 0, expected = 0, high = 0;
  bool operator==(const EstimateRange&) const = default;
};

struct Estimate {
  EstimateRange trials, steps;
  bool has_cost = false;  // a step time was known: the figures below are set
  EstimateRange gpu_hours, node_hours, wall_seconds;
  std::string basis;
  bool operator==(const Estimate&) const = default;
};

// The estimate for `spec` (its early stopping, budget, resources, concurrency) with `in`.
// INVALID_ARGUMENT when nothing bounds the sweep or a trial's length is not known.
[[nodiscard]] absl::StatusOr<Estimate> EstimateSweep(const SweepSpec& spec,
                                                     const EstimateInputs& in);

// What an ended (or running) sweep's trials say of `steps` and `step_seconds`: the median last
// step of its completed trials, and each finished trial's run time over its steps.
EstimateInputs InputsFromTrials(const std::vector<const TrialRecord*>& trials);

// The estimate as stored with a sweep, and back (lenient: empty or malformed reads as none).
std::string EstimateJson(const Estimate& e);
std::optional<Estimate> EstimateFromJson(const std::string& text);

}  // namespace hpo::server
