#pragma once
// Metrics: what hpod exports to Prometheus (/metrics on the dashboard's server), through
// prometheus-cpp: counters and histograms updated as things happen (reports received, report
// latency from receipt to the reply after commit, the controller's batch duration), and gauges
// read off the controller's memory when scraped: trials by state and sweep, GPU-hours by sweep
// and user, allocations held, GPUs held and idle, and one hpod_trial_info series per running
// trial and GPU with its Slurm job and step, node and GPU index, so that a site's GPU
// monitoring (which knows Slurm jobs only) can be joined to trials.
//
// Thread safety: the Observe methods are thread-safe; Text runs on the controller's thread.

#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "backend/backend.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/sweep_table.h"

namespace hpo::server {

class Metrics {
 public:
  Metrics();
  void ObserveReport(double seconds);  // one report, from receipt to its reply
  void ObserveBatch(double seconds);   // one controller batch, from its start to its commit
  // Which sweeps' series a reader gets; null: every sweep's, and the daemon's GPU gauges.
  using SweepFilter = std::function<bool(const SweepRuntime&)>;
  // The text exposition (version 0.0.4): the counters and histograms, and the gauges of
  // `table` and `capacity` as of `now`. With `only`, the series of the sweeps it passes and no
  // daemon-wide gauge (what other users' trials hold).
  std::string Text(const SweepTable& table, const backend::Capacity& capacity, absl::Time now,
                   const SweepFilter& only) const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter* reports_;
  prometheus::Histogram* report_latency_;
  prometheus::Histogram* batch_duration_;
};

}  // namespace hpo::server
