#include "server/web/metrics.h"

#include <unistd.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/address.h"
#include "hpo/v1/states.h"
#include "prometheus/gauge.h"
#include "prometheus/text_serializer.h"
#include "server/core/usage.h"

namespace hpo::server {
namespace {

const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5};

// The Slurm job and step in a trial's backend id ("slurm:job=12 step=3 nodes=n1"), if any.
std::pair<std::string, std::string> JobAndStep(const std::string& backend_id) {
  std::string job, step;
  for (absl::string_view part : absl::StrSplit(backend_id, absl::ByAnyChar(": "))) {
    if (absl::ConsumePrefix(&part, "job=")) job = std::string(part);
    if (absl::ConsumePrefix(&part, "step=")) step = std::string(part);
  }
  return {job, step};
}

}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  reports_ = &prometheus::BuildCounter()
                  .Name("hpod_reports_total")
                  .Help("Reports received from trials and stored")
                  .Register(*registry_)
                  .Add({});
  report_latency_ = &prometheus::BuildHistogram()
                         .Name("hpod_report_latency_seconds")
                         .Help("Time from a report's receipt to its reply, after its commit")
                         .Register(*registry_)
                         .Add({}, kLatencyBuckets);
  batch_duration_ = &prometheus::BuildHistogram()
                         .Name("hpod_controller_batch_seconds")
                         .Help("Duration of one controller batch, from its start to its commit")
                         .Register(*registry_)
                         .Add({}, kLatencyBuckets);
}

void Metrics::ObserveReport(double seconds) {
  reports_->Increment();
  report_latency_->Observe(seconds);
}

void Metrics::ObserveBatch(double seconds) { batch_duration_->Observe(seconds); }

std::string Metrics::TextFor(const CoreReads& reads, const Caller& caller) const {
  if (caller.owner() || caller.kind == Caller::Kind::kMetrics) return Text(reads, nullptr);
  return Text(reads, [&caller](const Sweep& sweep) {
    SweepRef ref{sweep.rec.id, sweep.rec.owner};
    return Authorize(caller, Action::kView, &ref).ok();
  });
}

std::string Metrics::Text(const CoreReads& reads, const SweepFilter& only) const {
  const SweepTable& table = reads.sweeps;
  const backend::Capacity& capacity = reads.capacity;
  const absl::Time now = reads.now;
  prometheus::Registry gauges;
  auto& trials = prometheus::BuildGauge()
                     .Name("hpod_trials")
                     .Help("Trials by sweep and state")
                     .Register(gauges);
  auto& gpu_hours = prometheus::BuildGauge()
                        .Name("hpod_gpu_hours")
                        .Help(
                            "GPU-hours a sweep used (what its budget counts: in Slurm steps mode "
                            "its allocations, else its trials)")
                        .Register(gauges);
  auto& allocations = prometheus::BuildGauge()
                          .Name("hpod_allocations_held")
                          .Help("Slurm allocations hpod holds for a sweep (steps mode)")
                          .Register(gauges);
  auto& gpus = prometheus::BuildGauge()
                   .Name("hpod_gpus")
                   .Help("GPUs held by running trials (state=held) and free for more (state=idle)")
                   .Register(gauges);
  auto& info = prometheus::BuildGauge()
                   .Name("hpod_trial_info")
                   .Help(
                       "1 for each GPU a running trial holds, labeled with its Slurm job and "
                       "step, node and GPU index (joins a site's GPU metrics to trials)")
                   .Register(gauges);
  auto& node_failures = prometheus::BuildGauge()
                            .Name("hpod_node_infrastructure_failures")
                            .Help(
                                "Trials of a sweep that failed on a node by the infrastructure's "
                                "fault (its failures rules), since the node was last allowed")
                            .Register(gauges);
  auto& quarantined = prometheus::BuildGauge()
                          .Name("hpod_node_quarantined")
                          .Help("1 for each node a sweep has quarantined (hpo nodes --allow)")
                          .Register(gauges);
  int held = 0, idle_in_allocations = 0;
  const std::string host = HostName();
  for (const auto& [id, sweep] : table.sweeps()) {
    if (only && !only(*sweep)) continue;
    const std::string sweep_label = std::to_string(id);
    std::map<std::string, int> counts;
    for (const auto& t : sweep->trials()) counts[v1::StateName(t->rec.state)]++;
    for (const auto& [state, n] : counts) {
      trials.Add({{"sweep", sweep_label}, {"state", state}}).Set(n);
    }
    Usage usage = MeasureUsage(*sweep, now);
    gpu_hours.Add({{"sweep", sweep_label}, {"user", sweep->rec.owner}})
        .Set(usage.GpuSeconds() / 3600);
    for (const auto& [node, n] : sweep->rec.nodes) {
      node_failures.Add({{"sweep", sweep_label}, {"node", node}}).Set(n.failures);
      if (n.quarantined) quarantined.Add({{"sweep", sweep_label}, {"node", node}}).Set(1);
    }
    int open = 0;
    for (const auto& [aid, a] : sweep->allocations()) open += !a.ended_at;
    if (open > 0) allocations.Add({{"sweep", sweep_label}}).Set(open);
    held += usage.trial_gpus;
    if (usage.in_allocations) {
      idle_in_allocations += std::max(0, usage.allocation_gpus - usage.trial_gpus);
    }
    for (const auto& t : sweep->trials()) {
      const TrialRecord& r = t->rec;
      if (r.state != v1::TRIAL_STATE_RUNNING || r.gpus.empty()) continue;
      auto [job, step] = JobAndStep(r.backend_id);
      // "0,1" (local) or "n1:0,1 n2:2" (Slurm).
      for (absl::string_view part : absl::StrSplit(r.gpus, ' ', absl::SkipEmpty())) {
        std::pair<std::string, std::string> node_gpus =
            part.find(':') == absl::string_view::npos
                ? std::pair<std::string, std::string>(host, std::string(part))
                : std::pair<std::string, std::string>(
                      absl::StrSplit(part, absl::MaxSplits(':', 1)));
        for (absl::string_view g : absl::StrSplit(node_gpus.second, ',', absl::SkipEmpty())) {
          info.Add({{"sweep", sweep_label},
                    {"trial", std::to_string(r.id)},
                    {"job", job},
                    {"step", step},
                    {"node", node_gpus.first},
                    {"gpu", std::string(g)}})
              .Set(1);
        }
      }
    }
  }
  if (!only) {
    gpus.Add({{"state", "held"}}).Set(held);
    gpus.Add({{"state", "idle"}}).Set(capacity.FreeGpus() + idle_in_allocations);
  }
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::vector<prometheus::MetricFamily> snapshot = gauges.Collect();
  families.insert(families.end(), snapshot.begin(), snapshot.end());
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace hpo::server
