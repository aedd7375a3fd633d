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

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/spec/sweep_spec.h"
#include "server/store/store.h"

namespace hpo::server {

struct Scores {
  std::vector<double> values;  // per objective, in the spec's order; NaN where unknown
  double violation = 0;        // summed over the constraints; +inf when a metric is unknown
  bool complete = false;       // every objective has a value
};

// The scores `metrics` give under `spec`.
Scores ScoresOf(const SweepSpec& spec, const std::map<std::string, double>& metrics);

// The metrics hpod measures of a trial holding `gpus` GPUs as of `at` (its running time and
// GPU-hours: kRuntimeMetric, kGpuHoursMetric), set in `metrics`.
void AddMeasuredMetrics(const TrialRecord& rec, int gpus, absl::Time at,
                        std::map<std::string, double>& metrics);

// A sweep's trial records by number.
using RecordOf = std::function<const TrialRecord&(int64_t number)>;

// `trial` completed: the front with it taken in unless a member dominates it, and without the
// members it dominates.
std::vector<int64_t> UpdatedFront(const SweepSpec& spec, const std::vector<int64_t>& front,
                                  const TrialRecord& trial, const RecordOf& record);
// Every one of `n` trials' Pareto rank (0: on the front), -1 for trials not ranked (not
// COMPLETED, or from a warm start), by number.
std::vector<int> ParetoRanks(const SweepSpec& spec, size_t n, const RecordOf& record);

}  // namespace hpo::server
