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
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/auth/auth.h"
#include "server/core/reads.h"
#include "server/core/telemetry.h"

namespace hpo::server {

class Metrics final : public Telemetry {
 public:
  Metrics();
  void ObserveReport(double seconds) override;  // one report, from receipt to its reply
  void ObserveBatch(double seconds) override;   // one controller batch, from start to commit
  // Which sweeps' series a reader gets; null: every sweep's, and the daemon's GPU gauges.
  using SweepFilter = std::function<bool(const Sweep&)>;
  // The text exposition (version 0.0.4): the counters and histograms, and the gauges of the
  // core as `reads` shows it. With `only`, the series of the sweeps it passes and no
  // daemon-wide gauge (what other users' trials hold).
  std::string Text(const CoreReads& reads, const SweepFilter& only) const;
  // What `caller` may read: every sweep's series for the owner and a metrics token, only the
  // sweeps a user may see (server/auth) for a user.
  std::string TextFor(const CoreReads& reads, const Caller& caller) const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter* reports_;
  prometheus::Histogram* report_latency_;
  prometheus::Histogram* batch_duration_;
};

}  // namespace hpo::server
