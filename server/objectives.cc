#include "server/objectives.h"

#include <cmath>
#include <limits>

#include "hpo/v1/states.h"
#include "server/usage.h"

namespace hpo::server {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool Ranked(const TrialRecord& rec) {
  return rec.state == v1::TRIAL_STATE_COMPLETED && rec.origin != kWarmStart;
}

// The trials' points, minimized, for `numbers`.
algorithms::Points PointsOf(const SweepRuntime& sweep, const std::vector<int64_t>& numbers) {
  algorithms::Points p;
  p.k = sweep.spec().objectives.size();
  std::vector<algorithms::Direction> d = sweep.spec().Directions();
  for (int64_t n : numbers) {
    Scores s = ScoresOf(sweep.spec(), sweep.trials[static_cast<size_t>(n)]->rec.last_metrics);
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

void AddMeasuredMetrics(const SweepRuntime& sweep, const TrialRecord& rec, absl::Time at,
                        std::map<std::string, double>& metrics) {
  double seconds = RunSeconds(rec, at);
  metrics[kRuntimeMetric] = seconds;
  metrics[kGpuHoursMetric] = seconds * sweep.TrialGpus(rec) / 3600;
}

void UpdateFront(SweepRuntime& sweep, const TrialRuntime& trial) {
  if (!Ranked(trial.rec) || !ScoresOf(sweep.spec(), trial.rec.last_metrics).complete) return;
  std::vector<int64_t> numbers = sweep.front;
  numbers.push_back(trial.rec.number);
  algorithms::Points p = PointsOf(sweep, numbers);
  size_t me = numbers.size() - 1;
  for (size_t i = 0; i < me; ++i) {
    if (algorithms::ConstrainedDominates(p, i, me)) return;  // not on the front
  }
  std::vector<int64_t> front;
  for (size_t i = 0; i < me; ++i) {
    if (!algorithms::ConstrainedDominates(p, me, i)) front.push_back(numbers[i]);
  }
  front.push_back(trial.rec.number);
  sweep.front = std::move(front);
}

std::vector<int> ParetoRanks(const SweepRuntime& sweep) {
  std::vector<int> out(sweep.trials.size(), -1);
  std::vector<int64_t> numbers;
  for (const auto& t : sweep.trials) {
    if (Ranked(t->rec) && ScoresOf(sweep.spec(), t->rec.last_metrics).complete) {
      numbers.push_back(t->rec.number);
    }
  }
  std::vector<int> ranks = algorithms::NonDominatedRanks(PointsOf(sweep, numbers));
  for (size_t i = 0; i < numbers.size(); ++i) out[static_cast<size_t>(numbers[i])] = ranks[i];
  return out;
}

}  // namespace hpo::server
