#pragma once
// Usage: what a sweep used of the machines it ran on, in GPU-hours and node-hours (budget.h
// judges it against budget.gpu_hours and budget.node_hours).
//
// What is counted against a budget (charged): where the sweep runs in allocations hpod holds
// (Slurm steps mode), the allocations, each from its start to its end, whether steps ran in it
// or not, since that is what the site charges. Elsewhere (local, Slurm jobs mode, external),
// each trial: the GPUs (per node, times nodes) and the nodes it asks for, times its running time
// over its segments (a retry is a trial of its own). GPU utilization, in steps mode, is the
// trials' GPU time over the allocations'.
//
// Pure functions over the SweepTable's records: one pass over the sweep's trials and
// allocations. Controller thread.

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "server/spec/sweep_spec.h"
#include "server/store/store.h"

namespace hpo::server {

class Sweep;

struct Usage {
  double trial_gpu_seconds = 0;
  double trial_node_seconds = 0;
  int trial_gpus = 0;  // held by its running trials now
  int trial_nodes = 0;
  double allocation_gpu_seconds = 0;
  double allocation_node_seconds = 0;
  int allocation_gpus = 0;  // in the allocations it holds now
  int allocation_nodes = 0;
  bool in_allocations = false;  // its trials run in allocations: those are charged

  double GpuSeconds() const { return in_allocations ? allocation_gpu_seconds : trial_gpu_seconds; }
  double NodeSeconds() const {
    return in_allocations ? allocation_node_seconds : trial_node_seconds;
  }
  int GpusHeld() const { return in_allocations ? allocation_gpus : trial_gpus; }
  int NodesHeld() const { return in_allocations ? allocation_nodes : trial_nodes; }
  // The trials' GPU time over the allocations'; nullopt outside allocations or before any GPU
  // time of them counted.
  std::optional<double> Utilization() const;
};

// When the trial's current (or last) segment started, if it did (a row stored before segments
// has only started_at).
std::optional<absl::Time> SegmentStart(const TrialRecord& trial);
// A trial's running time over its segments up to `at` (the running one up to then).
double RunSeconds(const TrialRecord& trial, absl::Time at);
// The sweep's usage up to `now`.
Usage MeasureUsage(const Sweep& sweep, absl::Time now);

}  // namespace hpo::server
