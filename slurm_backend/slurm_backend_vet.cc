// SlurmBackend: what hpod asks slurmctld about a sweep before and around its trials: whether it
// could ever run (CheckFits, Vet), when it would start (ExpectedStart), the partitions' time
// limits, the nodes a sweep keeps away from (NodesOf, ExcludeNodes), and whether hpod hears what
// runs a step (InTouchSince). The rest is in slurm_backend.cc.
#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/address.h"
#include "slurm_backend/slurm_backend.h"
#include "spdlog/spdlog.h"

namespace hpo::slurm {

using backend::LaunchSpec;
using backend::Placement;
using backend::Resources;

void SlurmBackend::LoadPartitions() {
  partitions_at_ = clock_.Now();
  calls_.Post([this, api = api_.get()]() -> SlurmCalls::Then {
    absl::StatusOr<std::vector<PartitionLimits>> parts = api->QueryPartitions();
    if (!parts.ok()) {
      spdlog::warn(
          "cannot read the partitions' time limits (asking slurmctld for each "
          "allocation's instead): {}",
          parts.status().ToString());
      return nullptr;
    }
    return [this, parts = std::move(*parts)]() mutable { pool_.SetPartitions(std::move(parts)); };
  });
}

absl::Status SlurmBackend::CheckFits(const Resources& r, const Placement& p) {
  if (SlurmOf(p).mode == "jobs") return absl::OkStatus();  // only slurmctld can say (Vet)
  const AllocationShape& a = SlurmOf(p).allocation;
  if (options_.in_job && a.job != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "allocation.job: hpod runs as a Slurm job (--as-job), and the steps of your own "
        "allocation ",
        a.job,
        " are started by sruns on hpod's node, which would end with hpod's "
        "job at its next move: leave allocation.job out (hpod then holds the allocation, and its "
        "agent starts the steps), or run hpod outside Slurm for this sweep"));
  }
  if (r.nodes > a.nodes || r.gpus > a.gpus_per_node ||
      r.cpus * r.tasks_per_node > a.cpus_per_node) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a trial (", r.nodes, " node(s), ", r.gpus, " GPU(s) and ", r.cpus * r.tasks_per_node,
        " CPU(s) per node) does not fit in the sweep's allocation (", a.nodes, " node(s), ",
        a.gpus_per_node, " GPU(s) and ", a.cpus_per_node, " CPU(s) per node)"));
  }
  return absl::OkStatus();
}

JobRequest SlurmBackend::ProbeRequest(const Resources& r, const Placement& p) {
  LaunchSpec probe;
  probe.argv = {"true"};
  probe.workdir = "/tmp";
  probe.trial_dir = "/tmp";
  probe.resources = r;
  probe.placement = p;
  JobRequest req = Request(probe);
  req.environment = {"HPO_PROBE=1"};
  return req;
}

void SlurmBackend::ExpectedStart(const Resources& r, const Placement& p, Started done) {
  const SlurmPlacement& where = SlurmOf(p);
  if (where.mode != "jobs" && where.allocation.job != 0) {  // the user's own: no queue
    return done(
        QueueWait{clock_.Now(), absl::StrCat("the user's allocation ", where.allocation.job)});
  }
  const AllocationShape& a = where.allocation;
  std::string what =
      where.mode == "jobs"
          ? absl::StrCat("one trial's job (", r.nodes, " node(s), ", r.gpus, " GPU(s) each)")
          : absl::StrCat("the sweep's first allocation (", a.nodes, " node(s) with ",
                         a.gpus_per_node, " GPU(s) and ", a.cpus_per_node, " CPU(s) each)");
  JobRequest req = where.mode == "jobs" ? ProbeRequest(r, p) : AllocationRequest(0, p);
  calls_.Post([api = api_.get(), req = std::move(req), what, done]() -> SlurmCalls::Then {
    absl::StatusOr<absl::Time> start = api->WillRun(req);
    // A start a year or more ahead is slurmctld finding no time for the job at all (the nodes it
    // could use are held without an end, or are still being cleaned after a job), not a wait.
    if (start.ok() && *start - absl::Now() > absl::Hours(24 * 300)) {
      start = absl::UnavailableError(absl::StrCat(
          "unknown: slurmctld finds no start time for ", what,
          " now (its nodes are held without an end, or still being cleaned after a job)"));
    }
    return [done, start, what]() {
      if (!start.ok()) return done(start.status());
      done(QueueWait{*start, what});
    };
  });
}

void SlurmBackend::Vet(int64_t sweep_id, const Resources& r, const Placement& p, bool starts_now,
                       Vetted done) {
  std::string endpoint = options_.endpoint ? options_.endpoint() : "";
  if (endpoint.empty() || !(absl::StartsWith(endpoint, "unix:") || IsLoopback(endpoint))) {
    VetShape(sweep_id, r, p, starts_now, std::move(done));
    return;
  }
  // hpod listens where only this host reaches it: are the compute nodes this host?
  calls_.Post([this, api = api_.get(), endpoint, sweep_id, r, p, starts_now,
               done]() mutable -> SlurmCalls::Then {
    absl::StatusOr<std::vector<NodeHost>> nodes = api->QueryNodes();
    std::string away;
    if (nodes.ok()) {
      std::string here = HostName();
      for (const NodeHost& n : *nodes) {
        bool local = n.hostname == here || n.hostname == "localhost" || n.addr == here ||
                     IsLoopback(n.addr + ":0");
        if (!local) {
          away = absl::StrCat(n.name, " (", n.hostname, ")");
          break;
        }
      }
    }
    return [this, endpoint, away, sweep_id, r, p, starts_now, done]() mutable {
      if (away.empty()) {
        VetShape(sweep_id, r, p, starts_now, std::move(done));
        return;
      }
      done(absl::FailedPreconditionError(absl::StrCat(
          "hpod listens at ", endpoint, ", which the compute nodes (", away,
          ", among others) cannot reach, so this sweep's trials and agents could not report: "
          "restart hpod where they can reach it, keeping the trials that run: `hpo daemon stop "
          "--keep-trials && hpo daemon start --reconfigure --listen 0.0.0.0:0` (and "
          "--advertise NAME when the nodes know this host by another name)")));
    };
  });
}

void SlurmBackend::VetShape(int64_t sweep_id, const Resources& r, const Placement& p,
                            bool starts_now, Vetted done) {
  const SlurmPlacement& where = SlurmOf(p);
  if (where.mode == "jobs") {  // the request of one trial's job, checked
    JobRequest req = ProbeRequest(r, p);
    calls_.Post([api = api_.get(), req = std::move(req), done]() -> SlurmCalls::Then {
      absl::Status s = api->WillRun(req).status();
      return [done, s]() { done(s); };
    });
    return;
  }
  const AllocationShape& a = where.allocation;
  if (a.job != 0) {  // the user's own allocation: is it there?
    calls_.Post([api = api_.get(), job = a.job, done]() -> SlurmCalls::Then {
      absl::StatusOr<std::vector<JobStatus>> mine = api->QueryMine();
      absl::Status s = mine.status();
      if (mine.ok()) {
        s = absl::InvalidArgumentError(absl::StrCat("slurm allocation job ", job,
                                                    " is not a pending or running job of yours"));
        for (const JobStatus& j : *mine) {
          if (j.job_id == job && (j.state == JobState::kRunning || j.state == JobState::kPending))
            s = absl::OkStatus();
        }
      }
      return [done, s]() { done(s); };
    });
    return;
  }
  // The sweep's allocation: requested now when the sweep starts now (slurmctld's answer to
  // that request is the check, as with a user's own sbatch), checked with will_run otherwise.
  std::string shape =
      absl::StrCat("the sweep's allocation (", a.nodes, " node(s) with ", a.gpus_per_node,
                   " GPU(s) and ", a.cpus_per_node, " CPU(s) each): ");
  Vetted said = [done, shape](const absl::Status& s) {
    done(s.ok() ? s : absl::Status(s.code(), absl::StrCat(shape, s.message())));
  };
  if (sweep_id > 0 && starts_now && pool_.RequestFirst(sweep_id, p, said)) return;
  calls_.Post([api = api_.get(), req = AllocationRequest(0, p), said]() -> SlurmCalls::Then {
    absl::Status s = api->WillRun(req).status();
    return [said, s]() { said(s); };
  });
}

std::vector<std::string> SlurmBackend::NodesOf(const std::string& backend_id) const {
  size_t at = backend_id.find(" nodes=");
  if (at == std::string::npos) return {};
  at += 7;
  std::string list = backend_id.substr(at, backend_id.find(' ', at) - at);
  if (list.empty()) return {};
  return api_->ExpandHostlist(list);
}

std::optional<absl::Time> SlurmBackend::InTouchSince(const std::string& backend_id,
                                                     absl::Time now) const {
  if (options_.agent.hub == nullptr || !absl::EndsWith(backend_id, " agent")) {
    return absl::InfinitePast();
  }
  uint32_t job_id = 0;
  absl::string_view id = backend_id;
  if (!absl::ConsumePrefix(&id, "slurm:job=") ||
      !absl::SimpleAtoi(id.substr(0, id.find(' ')), &job_id)) {
    return absl::InfinitePast();
  }
  return options_.agent.hub->InTouchSince(job_id, now);
}

void SlurmBackend::ExcludeNodes(int64_t sweep_id, const std::set<std::string>& nodes) {
  if (nodes.empty()) {
    excluded_.erase(sweep_id);
  } else {
    excluded_[sweep_id] = nodes;
  }
  pool_.Exclude(sweep_id, nodes);
}

JobRequest SlurmBackend::Excluding(JobRequest r, int64_t sweep_id) const {
  if (auto it = excluded_.find(sweep_id); it != excluded_.end()) {
    r.exclude = absl::StrJoin(it->second, ",");
  }
  return r;
}

}  // namespace hpo::slurm
