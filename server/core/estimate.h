#pragma once
// EstimateSweep: what a sweep will cost before it runs (`hpo plan`): how many trials and steps it
// runs, its GPU-hours, node-hours and wall time, each as a range.
//
// The sweep's own schedule decides: its trial limit (max_trials, the grid), its concurrency, its
// budgets (wall time, GPU-hours) and its early stopping, whose real Stopper runs over synthetic
// trials in virtual time. Each trial has a quality drawn at random and a curve that keeps its
// rank (with a little noise); after its startup it reports `steps` steps (or
// budget.max_trial_steps), each `step_seconds` long (one of the measured trials, picked per
// trial, with that trial's startup and tail), unless the stopper stops it. Several runs with
// different draws give the range: the 10th percentile, the median and the 90th percentile of each
// figure. What the plan cannot know (a trial's length in steps, the time of a step) comes from the
// sweep file
// (`plan:`), the caller, or an earlier sweep's trials (EstimateInputs). Pure; no I/O.

#include <cstdint>
#include <map>
#include <optional>
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
  // The same trials' seconds before their first step (a trainer's start: imports, data loading)
  // and after their last report (saving, exit): empty, or one per step_seconds sample.
  std::vector<double> startup_seconds, tail_seconds;
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

// OK when something bounds the sweep: its trial limit (SweepPlan::limit), wall time or GPU-hours.
[[nodiscard]] absl::Status CheckBounded(const SweepSpec& spec, int64_t limit);

// The steps a trial reports as the file declares them (plan.steps, else
// early_stopping.max_resource); 0: not declared.
int64_t DeclaredSteps(const SweepSpec& spec);

// The estimate for `spec` (its early stopping, budget, resources, concurrency) with `in`.
// INVALID_ARGUMENT when nothing bounds the sweep or a trial's length is not known.
[[nodiscard]] absl::StatusOr<Estimate> EstimateSweep(const SweepSpec& spec,
                                                     const EstimateInputs& in);

// A trial's first and last report: when it made them, at which steps.
struct ReportSpan {
  int64_t first_step = 0, last_step = 0;
  absl::Time first, last;
};

// What an ended (or running) sweep's trials say of `steps` and the time of a step: the median
// last step of its completed trials (and of those stopped at its budget.max_trial_steps, `cap`,
// when set), and per finished trial its time per step. With the trial's
// report span (keyed by trial id) a step's time is the time between its first and its last
// report over the steps between them, and the rest of its run (before the first step, after the
// last report) is its startup and tail; without one it is its run time over its steps.
EstimateInputs InputsFromTrials(const std::vector<const TrialRecord*>& trials,
                                const std::map<int64_t, ReportSpan>& spans = {}, int64_t cap = 0);

// The estimate as stored with a sweep, and back (lenient: empty or malformed reads as none).
std::string EstimateJson(const Estimate& e);
std::optional<Estimate> EstimateFromJson(const std::string& text);

}  // namespace hpo::server
