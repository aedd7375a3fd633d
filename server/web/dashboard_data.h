#pragma once
// DashboardData: what the dashboard shows, as JSON, from the controller's memory (and, for
// learning curves and a trial's history, its store): a page of a sweep's trials sorted and
// filtered, curves cut down to a few hundred points, parameter importance, the GPU timeline and
// the Pareto front. Messages of the API (Sweep, Trial) are given as protobuf JSON.
//
// Controller thread only (inside a posted batch); every method only reads.
// Errors: NOT_FOUND for an unknown sweep or trial, INVALID_ARGUMENT for a bad query.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "server/core/reads.h"

namespace hpo::server {

// A page of the trial table.
struct TrialQuery {
  int64_t offset = 0;
  int64_t limit = 50;           // at most 1,000
  std::string sort = "number";  // number, state, objective, step, runtime, or a name:
                                // "param:NAME", "metric:NAME"
  bool descending = false;
  std::vector<v1::TrialState> states;  // empty: every state
  // Numeric parameters within [low, high] (from the parallel coordinates' brushes).
  std::map<std::string, std::pair<double, double>> ranges;
};

class DashboardData {
 public:
  explicit DashboardData(const CoreReads& reads)
      : table_(reads.sweeps), store_(reads.store), now_(reads.now) {}

  // {total, offset, rows: [Trial as JSON, with "pareto_rank" for a Pareto sweep]}.
  [[nodiscard]] absl::StatusOr<nlohmann::json> Trials(int64_t sweep_id,
                                                      const TrialQuery& query) const;
  // The objective metric per step of `trial_ids` (empty: the best `max_trials` finished ones
  // and every running one), each cut down to at most `max_points` points (largest-triangle
  // downsampling keeps a curve's shape): {metric, curves: [{trial, number, state, points}]}.
  [[nodiscard]] absl::StatusOr<nlohmann::json> Curves(int64_t sweep_id,
                                                      const std::vector<int64_t>& trial_ids,
                                                      int max_trials, int max_points) const;
  // The finished trials' objective by number, and the running best (one objective), or their
  // objective values and Pareto rank (several): {total, points: [[number, value, trial,
  // state]], best, ...}. Past `max_points` trials, every one that improved the running best (or
  // is on the front) and an even spread of the others over the trial numbers.
  [[nodiscard]] absl::StatusOr<nlohmann::json> Objective(int64_t sweep_id, int max_points) const;
  // The parameters' axes (range, log scale, choices) and the finished trials' points on them,
  // with their objective and state, for parallel coordinates: {total, axes, trials}. Past
  // `max_trials`, the best half of them and an even spread of the others.
  [[nodiscard]] absl::StatusOr<nlohmann::json> Parallel(int64_t sweep_id, int max_trials) const;
  // How much of the objective's variance each parameter explains on its own (main effects,
  // binned), with the trials compared at one step: the furthest step at least half of those
  // that reported reached (under early stopping most trials end early; values at different
  // steps do not compare). Past 20,000 such trials, an even spread of 20,000 of them.
  // {step, trials, sampled, importance: [{param, share}]}, largest first.
  [[nodiscard]] absl::StatusOr<nlohmann::json> Importance(int64_t sweep_id) const;
  // Which GPU (node and index) ran which trial, when: one bar per trial segment and GPU, the
  // latest `max_bars`.
  [[nodiscard]] absl::StatusOr<nlohmann::json> Timeline(int64_t sweep_id, int max_bars) const;
  // The trial, its state history with causes (from the event log) and its curves (every
  // reported metric, cut down to `max_points`).
  [[nodiscard]] absl::StatusOr<nlohmann::json> Trial(int64_t trial_id, int max_points) const;

  // Largest-triangle-three-buckets: at most `max` of `points` (sorted by x), the first and last
  // kept, each bucket's point that makes the largest triangle with its neighbours.
  static std::vector<std::pair<double, double>> Downsample(
      const std::vector<std::pair<double, double>>& points, size_t max);
  // Which of `n` items a chart shows when at most `max` fit: every one of `keep` (even past
  // `max`) and, in the room left, an even spread of the others; ascending. All when n <= max.
  static std::vector<size_t> Thin(size_t n, size_t max, std::vector<size_t> keep);

 private:
  absl::StatusOr<const Sweep*> Find(int64_t sweep_id) const;

  const SweepTable& table_;
  Store& store_;
  absl::Time now_;
};

// A protobuf message as JSON (field names as in the .proto).
nlohmann::json ProtoJson(const google::protobuf::Message& message);

}  // namespace hpo::server
