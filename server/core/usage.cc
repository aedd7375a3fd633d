#include "server/core/usage.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "hpo/v1/states.h"
#include "server/core/sweep.h"

namespace hpo::server {
namespace {

double Seconds(absl::Time from, absl::Time to) {
  return std::max(0.0, absl::ToDoubleSeconds(to - from));
}

}  // namespace

std::optional<double> Usage::Utilization() const {
  if (!in_allocations || allocation_gpu_seconds <= 0) return std::nullopt;
  return trial_gpu_seconds / allocation_gpu_seconds;
}

std::optional<absl::Time> SegmentStart(const TrialRecord& trial) {
  if (trial.segment_started_at) return trial.segment_started_at;
  if (trial.segment == 1 && trial.started_at) return trial.started_at;
  return std::nullopt;
}

double RunSeconds(const TrialRecord& trial, absl::Time at) {
  double total = 0;
  for (const SegmentRecord& s : trial.segments) {
    total += Seconds(s.started_at, std::min(s.ended_at, at));
  }
  // The current (or last) segment, as the GPU-seconds count it.
  std::optional<absl::Time> start = SegmentStart(trial);
  if (!start) return total;
  if (trial.state == v1::TRIAL_STATE_RUNNING) {
    total += Seconds(*start, at);
  } else if (v1::IsFinal(trial.state) && trial.ended_at) {
    total += Seconds(*start, std::min(*trial.ended_at, at));
  }
  return total;
}

Usage MeasureUsage(const Sweep& sweep, absl::Time now) {
  Usage u;
  const bool final = sweep.Final();
  for (const auto& t : sweep.trials()) {
    const TrialRecord& rec = t->rec;
    if (!rec.started_at) continue;  // never ran (warm-start trials among them)
    backend::Resources r = sweep.spec().TrialResources(rec.params);
    u.trial_gpu_seconds += sweep.GpuSeconds(rec, now);
    u.trial_node_seconds += RunSeconds(rec, now) * r.nodes;
    if (rec.state == v1::TRIAL_STATE_RUNNING && !final) {
      u.trial_gpus += sweep.TrialGpus(rec);
      u.trial_nodes += r.nodes;
    }
  }
  const SweepSpec& spec = sweep.spec();
  u.in_allocations =
      !sweep.allocations().empty() || spec.placement.InAllocations(sweep.rec.backend);
  for (const auto& [id, a] : sweep.allocations()) {
    double held = Seconds(a.started_at, a.ended_at.value_or(now));
    u.allocation_gpu_seconds += held * a.gpus;
    u.allocation_node_seconds += held * a.nodes;
    if (!a.ended_at) {
      u.allocation_gpus += a.gpus;
      u.allocation_nodes += a.nodes;
    }
  }
  return u;
}

}  // namespace hpo::server
