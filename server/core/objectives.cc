#include "server/core/objectives.h"

#include <cmath>
#include <limits>

#include "hpo/v1/states.h"
#include "server/core/usage.h"

namespace hpo::server {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool Ranked(const TrialRecord& rec) {
  return rec.state == v1::TRIAL_STATE_COMPLETED && rec.origin != kWarmStart;
}

// The trials' points, minimized, for `numbers`.
algorithms::Points PointsOf(const SweepSpec& spec, const std::vector<int64_t>& numbers,
                            const RecordOf& record) {
  algorithms::Points p;
  p.k = spec.objectives.size();
  std::vector<algorithms::Direction> d = spec.Directions();
  for (int64_t n : numbers) {
    Scores s = ScoresOf(spec, record(n).last_metrics);
    p.Add(s.values, d, s.violation);
  }
  return p;
}

}  // namespace

Scores ScoresOf(const SweepSpec& spec, const std::map<std::string, double>& metrics) {
  Scores s;
  s.complete = true;
  for (const Objective& o : spec.objectives) {
    auto it = metrics.find(o.metric);
    s.values.push_back(it != metrics.end() ? it->second : kNaN);
    s.complete = s.complete && it != metrics.end();
  }
  for (const Constraint& c : spec.constraints) {
    auto it = metrics.find(c.metric);
    s.violation +=
        it != metrics.end() ? c.Violation(it->second) : std::numeric_limits<double>::infinity();
  }
  return s;
}

void AddMeasuredMetrics(const TrialRecord& rec, int gpus, absl::Time at,
                        std::map<std::string, double>& metrics) {
  double seconds = RunSeconds(rec, at);
  metrics[kRuntimeMetric] = seconds;
  metrics[kGpuHoursMetric] = seconds * gpus / 3600;
}

std::vector<int64_t> UpdatedFront(const SweepSpec& spec, const std::vector<int64_t>& front,
                                  const TrialRecord& trial, const RecordOf& record) {
  if (!Ranked(trial) || !ScoresOf(spec, trial.last_metrics).complete) return front;
  std::vector<int64_t> numbers = front;
  numbers.push_back(trial.number);
  algorithms::Points p = PointsOf(spec, numbers, record);
  size_t me = numbers.size() - 1;
  for (size_t i = 0; i < me; ++i) {
    if (algorithms::ConstrainedDominates(p, i, me)) return front;  // not on the front
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < me; ++i) {
    if (!algorithms::ConstrainedDominates(p, me, i)) out.push_back(numbers[i]);
  }
  out.push_back(trial.number);
  return out;
}

std::vector<int> ParetoRanks(const SweepSpec& spec, size_t n, const RecordOf& record) {
  std::vector<int> out(n, -1);
  std::vector<int64_t> numbers;
  for (size_t i = 0; i < n; ++i) {
    const TrialRecord& r = record(static_cast<int64_t>(i));
    if (Ranked(r) && ScoresOf(spec, r.last_metrics).complete) numbers.push_back(r.number);
  }
  std::vector<int> ranks = algorithms::NonDominatedRanks(PointsOf(spec, numbers, record));
  for (size_t i = 0; i < numbers.size(); ++i) out[static_cast<size_t>(numbers[i])] = ranks[i];
  return out;
}

}  // namespace hpo::server
