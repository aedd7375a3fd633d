#pragma once
// Objectives: what a trial scored on a sweep's objectives and how far it missed its
// constraints, the metrics hpod measures itself, and the sweep's Pareto front.
//
// A sweep ranks its trials by constrained Pareto dominance when it has several objectives or
// constraints (SweepSpec::Pareto; algorithms/pareto.h has the rule). Its front is the set of its
// COMPLETED trials that no other COMPLETED trial dominates: a trial stopped early ran less, and
// a warm-start trial ran elsewhere, so neither is on it. The front is kept up to date as trials
// complete (a pass over the front, not over the sweep), and ranks of every trial are computed
// on demand (ListTrials, exports).
//
// Controller thread; no I/O.

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/sweep_table.h"

namespace hpo::server {

struct Scores {
  std::vector<double> values;  // per objective, in the spec's order; NaN where unknown
  double violation = 0;        // summed over the constraints; +inf when a metric is unknown
  bool complete = false;       // every objective has a value
};

// The scores `metrics` give under `spec`.
Scores ScoresOf(const SweepSpec& spec, const std::map<std::string, double>& metrics);

// The metrics hpod measures of a trial of `sweep` as of `at` (its running time and GPU-hours:
// kRuntimeMetric, kGpuHoursMetric), set in `metrics`.
void AddMeasuredMetrics(const SweepRuntime& sweep, const TrialRecord& rec, absl::Time at,
                        std::map<std::string, double>& metrics);

// A trial of `sweep` completed: the front takes it in unless a member dominates it, and lets go
// of the members it dominates.
void UpdateFront(SweepRuntime& sweep, const TrialRuntime& trial);
// Every trial's Pareto rank (0: on the front), -1 for trials not ranked (not COMPLETED, or from
// a warm start), by number.
std::vector<int> ParetoRanks(const SweepRuntime& sweep);

}  // namespace hpo::server
