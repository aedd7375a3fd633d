#include "slurm_backend/allocation_pool.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/shell_quote.h"
#include "common/token.h"
#include "spdlog/spdlog.h"

namespace hpo::slurm {

using backend::Grant;
using backend::Placement;
using backend::Resources;

void ApplyPlacement(const Placement& placement, JobRequest& r) {
  const SlurmPlacement& p = SlurmOf(placement);
  r.partition = p.partition;
  r.account = p.account;
  r.qos = p.qos;
  r.constraint = p.constraint;
  r.reservation = p.reservation;
  r.time_limit_minutes = static_cast<uint32_t>(p.time_limit_minutes);
  r.exclusive = p.exclusive;
  r.comment = p.comment;
  r.licenses = p.licenses;
}

JobRequest AllocationRequest(const std::string& name, int64_t sweep_id, const Placement& p,
                             const AgentLink& agent, const std::string& token) {
  const AllocationShape& a = SlurmOf(p).allocation;
  JobRequest r;
  r.name = name;
  r.script = absl::StrCat("#!/bin/sh\n# hpod holds this allocation for sweep ", sweep_id,
                          "; the sweep's trials run in it as job steps.\n");
  r.workdir = "/tmp";
  r.stdout_path = r.stderr_path = "/dev/null";
  const char* path = std::getenv("PATH");
  r.environment = {absl::StrCat("PATH=", path != nullptr ? path : "/usr/bin:/bin")};
  if (agent.hub != nullptr && !token.empty()) {
    r.script += "exec";
    for (const std::string& arg : agent.argv) absl::StrAppend(&r.script, " ", ShellQuote(arg));
    r.script += "\n";
    for (const auto& [k, v] : agent.env) r.environment.push_back(absl::StrCat(k, "=", v));
    if (std::string endpoint = agent.hub->Endpoint(); !endpoint.empty()) {
      r.environment.push_back(absl::StrCat("HPO_ENDPOINT=", endpoint));
    }
    r.environment.push_back(absl::StrCat("HPO_AGENT_TOKEN=", token));
  } else {
    r.script += "exec sleep infinity\n";
  }
  // One-CPU tasks, so that steps may split each node's CPUs any way they like.
  r.nodes = a.nodes;
  r.tasks_per_node = a.cpus_per_node;
  r.cpus_per_task = 1;
  r.gpus_per_node = a.gpus_per_node;
  r.memory_mb = a.memory_mb;
  ApplyPlacement(p, r);
  return r;
}

AllocationPool::AllocationPool(SlurmApi& api, SlurmCalls& calls, const Clock& clock,
                               std::string instance, AgentLink agent)
    : api_(api),
      calls_(calls),
      clock_(clock),
      instance_(std::move(instance)),
      agent_(std::move(agent)) {}

void AllocationPool::CancelJob(int64_t sweep_id, uint32_t job_id) {
  calls_.Post([api = &api_, sweep_id, job_id]() -> SlurmCalls::Then {
    if (absl::Status s = api->Cancel(job_id); !s.ok()) {
      spdlog::warn("sweep {}: cannot cancel allocation {}: {}", sweep_id, job_id, s.ToString());
    }
    return nullptr;
  });
}

AllocationPool::~AllocationPool() {
  for (auto& [job_id, a] : allocs_) {
    if (!a.gone && !a.external) Cancel(a, "hpod stopped");
    if (agent_.hub != nullptr) agent_.hub->Forget(job_id);
  }
  // Released ones whose agents may not have heard it yet.
  for (const auto& [job_id, r] : releasing_) CancelJob(r.sweep_id, job_id);
}

std::string AllocationPool::Name(int64_t sweep_id) const {
  return absl::StrCat("hpo-alloc-", instance_, "-", sweep_id);
}

bool AllocationPool::Excluded(int64_t sweep_id, const std::string& node) const {
  auto it = excluded_.find(sweep_id);
  return it != excluded_.end() && it->second.count(node) > 0;
}

void AllocationPool::Exclude(int64_t sweep_id, std::set<std::string> nodes) {
  if (nodes.empty()) {
    excluded_.erase(sweep_id);
  } else {
    excluded_[sweep_id] = std::move(nodes);
  }
  for (auto& [job_id, a] : allocs_) {
    if (a.sweep_id != sweep_id) continue;
    if (a.quarantined && !excluded_.count(sweep_id)) {
      a.quarantined = a.ending = false;  // let back in
    }
    CheckQuarantined(a);
  }
}

void AllocationPool::CheckQuarantined(Allocation& a) {
  if (!a.running || a.gone || a.quarantined || a.nodes.empty()) return;
  for (const std::string& node : a.nodes) {
    if (!Excluded(a.sweep_id, node)) return;
  }
  a.quarantined = true;
  if (a.external) return;  // the user's own: nothing to replace it with
  a.ending = true;
  spdlog::warn("sweep {}: every node of allocation {} is quarantined; it is replaced", a.sweep_id,
               a.job_id);
}

std::optional<std::vector<int>> AllocationPool::PickNodes(const Allocation& a, const Resources& r,
                                                          absl::Time now) const {
  if (!a.running || a.gone || a.preempted_at != absl::InfinitePast()) return std::nullopt;
  if (r.needs > absl::ZeroDuration() && (!a.times_known || a.ends_at - now < r.needs)) {
    return std::nullopt;
  }
  std::vector<int> fit;
  for (int i = 0; i < static_cast<int>(a.room.size()); ++i) {
    if (a.room[static_cast<size_t>(i)].Fits(r) && !Excluded(a.sweep_id, a.nodes[size_t(i)])) {
      fit.push_back(i);
    }
  }
  if (static_cast<int>(fit.size()) < r.nodes) return std::nullopt;
  // Best fit: the nodes with the fewest GPUs (then CPUs) left, so that large holes stay whole.
  auto key = [&](int i) {
    const backend::ResourcePool& n = a.room[static_cast<size_t>(i)];
    return std::pair(n.free_gpus(), n.free_cpus());
  };
  std::stable_sort(fit.begin(), fit.end(), [&](int x, int y) { return key(x) < key(y); });
  fit.resize(static_cast<size_t>(r.nodes));
  std::sort(fit.begin(), fit.end());
  return fit;
}

AllocationPool::Allocation* AllocationPool::FindRoom(int64_t sweep_id, const Resources& r,
                                                     std::vector<int>* nodes) {
  for (auto& [job_id, a] : allocs_) {
    if (a.sweep_id != sweep_id) continue;
    // A trial that needs to know how long the allocation lasts waits for slurmctld's times.
    if (a.running && !a.times_known && r.needs > absl::ZeroDuration()) wants_times_ = true;
    if (std::optional<std::vector<int>> picked = PickNodes(a, r, clock_.Now())) {
      if (nodes != nullptr) *nodes = std::move(*picked);
      return &a;
    }
  }
  return nullptr;
}

bool AllocationPool::CanPlace(int64_t sweep_id, const Resources& r, const Placement& p) {
  if (FindRoom(sweep_id, r, nullptr) != nullptr) return true;
  demand_[sweep_id] = p;
  return false;
}

std::optional<AllocationPool::Placed> AllocationPool::Place(int64_t trial_id, int64_t sweep_id,
                                                            const Resources& r) {
  std::vector<int> picked;
  Allocation* a = FindRoom(sweep_id, r, &picked);
  if (a == nullptr) return std::nullopt;
  Lease lease;
  lease.job_id = a->job_id;
  lease.resources = r;
  Placed placed;
  placed.job_id = a->job_id;
  placed.agent = !a->external && agent_.hub != nullptr && agent_.hub->Admitted(a->job_id);
  for (int i : picked) {
    std::optional<Grant> g = a->room[static_cast<size_t>(i)].Acquire(r);
    lease.node_index.push_back(i);
    lease.grants.push_back(std::move(*g));  // PickNodes checked that it fits
    placed.nodes.push_back(a->nodes[static_cast<size_t>(i)]);
  }
  const AllocationShape& shape = SlurmOf(a->placement).allocation;
  placed.mem_per_cpu_mb = shape.MemPerCpuMb();
  ++a->steps;
  leases_[trial_id] = std::move(lease);
  return placed;
}

void AllocationPool::Adopt(int64_t trial_id, uint32_t job_id, int64_t sweep_id, const Placement& p,
                           const std::vector<std::string>& nodes, const Resources& r,
                           const std::string& gpus) {
  auto [it, added] = allocs_.try_emplace(job_id);
  Allocation& a = it->second;
  if (added) {
    a.job_id = job_id;
    a.sweep_id = sweep_id;
    a.placement = p;
    a.external = SlurmOf(p).allocation.job == job_id;
    a.since = clock_.Now();
    spdlog::info("sweep {}: re-adopted Slurm allocation {}", sweep_id, job_id);
  }
  ++a.steps;
  Lease lease;
  lease.job_id = job_id;
  lease.pending_nodes = nodes;
  lease.resources = r;
  lease.recorded_gpus = gpus;
  Lease& held = leases_[trial_id] = std::move(lease);
  if (a.running) HoldAdopted(a, held);
}

void AllocationPool::HoldAdopted(Allocation& a, Lease& lease) {
  // The GPUs it recorded on each node ("n1:0,1 n2:2"), where known; else the first free ones.
  std::map<std::string, std::vector<int>> recorded;
  for (absl::string_view part : absl::StrSplit(lease.recorded_gpus, ' ', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(part, absl::MaxSplits(':', 1));
    for (absl::string_view g : absl::StrSplit(kv.second, ',', absl::SkipEmpty())) {
      int index = 0;
      if (absl::SimpleAtoi(g, &index)) recorded[kv.first].push_back(index);
    }
  }
  for (const std::string& node : lease.pending_nodes) {
    auto at = std::find(a.nodes.begin(), a.nodes.end(), node);
    if (at == a.nodes.end()) continue;
    int i = static_cast<int>(at - a.nodes.begin());
    backend::ResourcePool& room = a.room[static_cast<size_t>(i)];
    std::vector<int> gpus = recorded[node];
    for (int g = 0; g < room.total_gpus() && static_cast<int>(gpus.size()) < lease.resources.gpus;
         ++g) {
      if (room.IsFree(g) && std::find(gpus.begin(), gpus.end(), g) == gpus.end()) {
        gpus.push_back(g);
      }
    }
    lease.node_index.push_back(i);
    lease.grants.push_back(
        room.AcquireExact(gpus, lease.resources.cpus * lease.resources.tasks_per_node));
  }
  lease.pending_nodes.clear();
}

void AllocationPool::Release(int64_t trial_id, absl::Time now) {
  auto lease = leases_.find(trial_id);
  if (lease == leases_.end()) return;
  auto it = allocs_.find(lease->second.job_id);
  if (it != allocs_.end()) {
    Allocation& a = it->second;
    for (size_t k = 0; k < lease->second.grants.size(); ++k) {
      size_t i = static_cast<size_t>(lease->second.node_index[k]);
      if (i < a.room.size()) a.room[i].Release(lease->second.grants[k]);
    }
    if (--a.steps == 0) a.since = now;
    if (a.steps == 0 && (a.gone || ended_sweeps_.count(a.sweep_id))) Erase(it, "the sweep ended");
  }
  leases_.erase(lease);
}

void AllocationPool::Runs(Allocation& a, const std::string& nodelist, const JobStatus* st) {
  a.running = true;
  absl::Time now = clock_.Now();
  absl::Time submitted =
      st != nullptr && st->submit_time != absl::InfinitePast() ? st->submit_time : a.since;
  absl::Time started =
      st != nullptr && st->start_time != absl::InfinitePast() ? st->start_time : now;
  std::vector<absl::Duration>& waits = waits_[a.sweep_id];
  waits.push_back(std::max(absl::ZeroDuration(), started - submitted));
  if (waits.size() > 3) waits.erase(waits.begin());
  a.nodes = api_.ExpandHostlist(nodelist);
  const AllocationShape& shape = SlurmOf(a.placement).allocation;
  a.room.assign(a.nodes.size(), backend::ResourcePool(shape.gpus_per_node, shape.cpus_per_node));
  a.since = now;
  for (auto& [trial_id, lease] : leases_) {  // re-adopted steps already hold some of it
    if (lease.job_id == a.job_id && !lease.pending_nodes.empty()) HoldAdopted(a, lease);
  }
  OpenUsage(a, st);
  spdlog::info("sweep {}: allocation {} runs on {}{}", a.sweep_id, a.job_id, nodelist,
               st == nullptr ? " (its agent called)" : "");
  CheckQuarantined(a);
}

bool AllocationPool::AgentCalled(uint32_t job_id, const std::string& nodelist) {
  auto it = allocs_.find(job_id);
  if (it == allocs_.end() || it->second.running || it->second.gone || nodelist.empty()) {
    return false;
  }
  Allocation& a = it->second;
  Runs(a, nodelist, nullptr);
  // It started a moment ago, with the time limit hpod asked for or its partition's: its end is
  // known to within that moment, until slurmctld's next answer says it exactly.
  if (std::optional<absl::Duration> limit = TimeLimit(a.placement)) {
    a.ends_at = *limit == absl::InfiniteDuration() ? absl::InfiniteFuture() : clock_.Now() + *limit;
    a.times_known = true;
  }
  return true;
}

std::optional<absl::Duration> AllocationPool::TimeLimit(const Placement& placement) const {
  const SlurmPlacement& where = SlurmOf(placement);
  if (where.time_limit_minutes > 0) return absl::Minutes(where.time_limit_minutes);
  for (const PartitionLimits& p : partitions_) {
    if (where.partition.empty() ? p.is_default : p.name == where.partition) return p.JobLimit();
  }
  return std::nullopt;  // not read yet, or several partitions named: slurmctld says
}

bool AllocationPool::AwaitingQuery() const {
  for (const auto& [job_id, a] : allocs_) {
    if (a.running || a.gone) continue;
    if (a.external || agent_.hub == nullptr || !agent_.hub->Admitted(job_id)) return true;
  }
  return false;
}

bool AllocationPool::CoveredByAgents(absl::Time now) const {
  if (agent_.hub == nullptr || !submitting_.empty()) return false;
  for (const auto& [job_id, r] : releasing_) {
    if (now >= r.cancel_at) return false;
  }
  for (const auto& [job_id, a] : allocs_) {
    if (a.gone) continue;
    if (!a.running || a.external || !a.times_known || a.preempted_at != absl::InfinitePast() ||
        !agent_.hub->InTouch(job_id, now)) {
      return false;
    }
  }
  return true;
}

void AllocationPool::Update(const std::map<uint32_t, const JobStatus*>& by_id) {
  wants_times_ = false;
  CheckReleased(by_id);
  for (auto& [job_id, a] : allocs_) {
    if (a.gone) continue;
    auto found = by_id.find(job_id);
    if (found == by_id.end()) {
      if (++a.polls_missing >= 20) {
        a.gone = true;
        a.why_gone = absl::StrCat("allocation ", job_id, " vanished");
        a.interruption = backend::Interruption::kVanished;
        CloseUsage(a, clock_.Now());
      }
      continue;
    }
    a.polls_missing = 0;
    const JobStatus& st = *found->second;
    if (st.state == JobState::kPending) continue;
    if (st.state == JobState::kRunning) {
      a.times_known = true;
      // An administrator may move the end (scontrol update TimeLimit=...).
      if (st.end_time != absl::InfinitePast() && st.end_time != a.ends_at) {
        a.ends_at = st.end_time;
        if (!a.usage.id.empty() && !a.usage.ended_at) {
          a.usage.ends_at = a.ends_at;
          usage_out_.push_back(a.usage);
        }
      }
      if (st.preempt_time != absl::InfinitePast() && a.preempted_at == absl::InfinitePast()) {
        a.preempted_at = st.preempt_time;
        spdlog::warn("sweep {}: allocation {} is being preempted", a.sweep_id, job_id);
      }
      if (!a.running) Runs(a, st.nodes, &st);
      continue;
    }
    a.gone = true;
    CloseUsage(a, st.end_time != absl::InfinitePast() ? st.end_time : clock_.Now());
    const char* what = "ended";
    switch (st.state) {
      case JobState::kTimeout:
        what = "time limit";
        a.interruption = backend::Interruption::kTimeLimit;
        break;
      case JobState::kPreempted:
        what = "preempted";
        a.interruption = backend::Interruption::kPreempted;
        break;
      case JobState::kNodeFail:
      case JobState::kBootFail:
        what = "node failure";
        a.interruption = backend::Interruption::kNodeFailure;
        break;
      case JobState::kCancelled:
        what = "canceled";
        a.interruption = backend::Interruption::kCanceledOutside;
        break;
      default:
        a.interruption = backend::Interruption::kVanished;
        break;
    }
    a.why_gone = absl::StrCat("allocation ", job_id, " ended (", what, ")");
    spdlog::warn("sweep {}: {}", a.sweep_id, a.why_gone);
  }
  for (auto it = allocs_.begin(); it != allocs_.end();) {
    auto next = std::next(it);
    if (it->second.gone && it->second.steps == 0) Erase(it, it->second.why_gone);
    it = next;
  }
}

void AllocationPool::SweepLeftovers(const std::vector<JobStatus>& mine,
                                    const std::map<int64_t, Placement>& live) {
  std::string prefix = absl::StrCat("hpo-alloc-", instance_, "-");
  for (const JobStatus& s : mine) {
    bool alive = s.state == JobState::kPending || s.state == JobState::kRunning;
    if (!alive || !absl::StartsWith(s.name, prefix) || allocs_.count(s.job_id)) continue;
    int64_t sweep_id = 0;
    auto sweep = absl::SimpleAtoi(s.name.substr(prefix.size()), &sweep_id) ? live.find(sweep_id)
                                                                           : live.end();
    if (sweep != live.end() && !ended_sweeps_.count(sweep_id)) {
      // Requested by the earlier run for a sweep that still runs: it is this sweep's again
      // (Update sees it start running, or that it already does).
      Allocation a;
      a.job_id = s.job_id;
      a.sweep_id = sweep_id;
      a.placement = sweep->second;
      a.since = clock_.Now();
      allocs_[s.job_id] = std::move(a);
      spdlog::info("sweep {}: took back Slurm allocation {} ({}) left by an earlier run of hpod",
                   sweep_id, s.job_id, s.state == JobState::kPending ? "pending" : "running");
      continue;
    }
    spdlog::warn("canceling allocation {} ({}) left by an earlier run of hpod", s.job_id, s.name);
    CancelJob(0, s.job_id);
    if (agent_.hub != nullptr) agent_.hub->Forget(s.job_id);
  }
  CloseExpected(mine);
}

void AllocationPool::CloseExpected(const std::vector<JobStatus>& mine) {
  absl::Time now = clock_.Now();
  for (auto it = expected_.begin(); it != expected_.end();) {
    auto next = std::next(it);
    if (allocs_.count(it->first) == 0) {  // taken back: its record goes on (OpenUsage)
      backend::AllocationUsage u = it->second;
      auto found = std::find_if(mine.begin(), mine.end(),
                                [&](const JobStatus& s) { return s.job_id == it->first; });
      bool alive = found != mine.end() &&
                   (found->state == JobState::kPending || found->state == JobState::kRunning);
      if (found != mine.end() && !alive && found->end_time != absl::InfinitePast()) {
        u.ended_at = found->end_time;  // slurmctld remembers when it ended
      } else if (alive) {
        u.ended_at = now;  // a leftover, canceled above
      } else {
        u.ended_at = std::min(now, u.ends_at);  // gone from slurmctld's records
      }
      u.ended_at = std::max(*u.ended_at, u.started_at);
      spdlog::info("sweep {}: allocation {} held by an earlier run of hpod ended; counted up to {}",
                   u.sweep_id, u.id, absl::FormatTime(*u.ended_at));
      usage_out_.push_back(std::move(u));
      expected_.erase(it);
    }
    it = next;
  }
}

void AllocationPool::OpenUsage(Allocation& a, const JobStatus* st) {
  if (!a.usage.id.empty()) return;
  absl::Time now = clock_.Now();
  if (auto it = expected_.find(a.job_id); it != expected_.end()) {
    a.usage = it->second;  // held before a restart: the same record goes on
    expected_.erase(it);
  } else {
    // The site charges hpod's own allocations from their start; the user's own job only counts
    // while hpod uses it.
    a.usage.id = a.external ? absl::StrCat("slurm:", a.job_id, "@", absl::ToUnixSeconds(now))
                            : absl::StrCat("slurm:", a.job_id);
    a.usage.started_at = !a.external && st != nullptr && st->start_time != absl::InfinitePast()
                             ? st->start_time
                             : now;
  }
  a.usage.sweep_id = a.sweep_id;
  a.usage.nodes = static_cast<int>(a.nodes.size());
  a.usage.gpus = a.usage.nodes * SlurmOf(a.placement).allocation.gpus_per_node;
  a.usage.ends_at = a.ends_at;
  a.usage.ended_at.reset();
  usage_out_.push_back(a.usage);
}

void AllocationPool::CloseUsage(Allocation& a, absl::Time at) {
  if (a.usage.id.empty()) {
    // Taken back after a restart but ended before it ran again here: close the stored record.
    auto it = expected_.find(a.job_id);
    if (it == expected_.end()) return;  // it never ran: nothing was charged
    a.usage = it->second;
    expected_.erase(it);
  }
  if (a.usage.ended_at) return;
  a.usage.ended_at = std::max(at, a.usage.started_at);
  usage_out_.push_back(a.usage);
}

std::vector<backend::AllocationUsage> AllocationPool::TakeUsage() {
  std::vector<backend::AllocationUsage> out;
  out.swap(usage_out_);
  return out;
}

bool AllocationPool::RequestFirst(int64_t sweep_id, const Placement& placement,
                                  std::function<void(const absl::Status&)> vetted) {
  return Grow(sweep_id, placement, clock_.Now(), std::move(vetted));
}

bool AllocationPool::Grow(int64_t sweep_id, const Placement& placement, absl::Time now,
                          std::function<void(const absl::Status&)> vetted) {
  int held = 0;
  bool on_its_way = false;
  for (const auto& [job_id, a] : allocs_) {
    if (a.sweep_id != sweep_id || a.gone) continue;
    held += !a.ending;
    on_its_way |= !a.running;
  }
  on_its_way |= submitting_.count(sweep_id) > 0;
  // Held before a restart and not yet settled by the first query or by its agent's call: it
  // may still run, so it counts as one on its way (allocation.max holds across a restart).
  for (const auto& [job_id, usage] : expected_) {
    on_its_way |= usage.sweep_id == sweep_id && allocs_.count(job_id) == 0;
  }
  if (on_its_way || held >= SlurmOf(placement).allocation.max) return false;
  Allocation a;
  a.sweep_id = sweep_id;
  a.placement = placement;
  a.since = now;
  if (uint32_t job = SlurmOf(placement).allocation.job; job != 0) {
    if (allocs_.count(job)) return false;  // another sweep uses it now; this one waits its turn
    a.job_id = job;
    a.external = true;
    spdlog::info("sweep {}: using the user's Slurm allocation {}", sweep_id, job);
    allocs_[job] = std::move(a);
    return true;
  }
  // Its agent's token: written down once slurmctld names the job, before the agent can call.
  // The request goes to slurmctld off this thread; the allocation joins the pool when it answers.
  std::string token = agent_.hub != nullptr ? NewToken() : "";
  JobRequest request = AllocationRequest(Name(sweep_id), sweep_id, placement, agent_, token);
  if (auto ex = excluded_.find(sweep_id); ex != excluded_.end()) {
    request.exclude = absl::StrJoin(ex->second, ",");
  }
  int max = SlurmOf(placement).allocation.max;
  submitting_.insert(sweep_id);
  calls_.Post([this, api = &api_, hub = agent_.hub, request = std::move(request), token,
               a = std::move(a), held, max,
               vetted = std::move(vetted)]() mutable -> SlurmCalls::Then {
    absl::StatusOr<uint32_t> id = api->Submit(request);
    if (id.ok() && !token.empty()) {
      if (absl::Status s = hub->Admit(*id, token); !s.ok()) {
        spdlog::error("sweep {}: cannot keep the token of allocation {}'s agent: {}", a.sweep_id,
                      *id, s.ToString());
        if (absl::Status c = api->Cancel(*id); !c.ok()) {
          spdlog::warn("cannot cancel allocation {}: {}", *id, c.ToString());
        }
        id = s;
      }
    }
    return [this, id, a = std::move(a), held, max, vetted = std::move(vetted)]() mutable {
      Requested(std::move(a), id, held, max, vetted);
    };
  });
  return true;
}

void AllocationPool::Requested(Allocation a, const absl::StatusOr<uint32_t>& id, int held, int max,
                               const std::function<void(const absl::Status&)>& vetted) {
  int64_t sweep_id = a.sweep_id;
  submitting_.erase(sweep_id);
  if (!id.ok()) {
    if (vetted) return vetted(id.status());  // refused: the sweep is not accepted, no retry
    spdlog::error("sweep {}: cannot request an allocation (retrying in 30 s): {}", sweep_id,
                  id.status().ToString());
    retry_submit_at_[sweep_id] = clock_.Now() + absl::Seconds(30);
    return;
  }
  retry_submit_at_.erase(sweep_id);
  a.job_id = *id;
  spdlog::info("sweep {}: requested Slurm allocation {} ({} of {})", sweep_id, *id, held + 1, max);
  if (ended_sweeps_.count(sweep_id)) {  // it ended while slurmctld answered
    CancelJob(sweep_id, *id);
    if (agent_.hub != nullptr) agent_.hub->Forget(*id);
  } else {
    allocs_[*id] = std::move(a);
  }
  if (vetted) vetted(absl::OkStatus());
}

absl::Duration AllocationPool::ExpectedWait(int64_t sweep_id) const {
  auto it = waits_.find(sweep_id);
  if (it == waits_.end() || it->second.empty()) return absl::ZeroDuration();
  return *std::max_element(it->second.begin(), it->second.end());
}

void AllocationPool::NoteCheckpointGrace(int64_t sweep_id, absl::Duration grace) {
  absl::Duration& g = grace_[sweep_id];
  g = std::max(g, grace);
}

std::optional<AllocationPool::Ending> AllocationPool::EndOf(uint32_t job_id) const {
  auto it = allocs_.find(job_id);
  if (it == allocs_.end()) return std::nullopt;
  const Allocation& a = it->second;
  if (a.preempted_at != absl::InfinitePast()) {
    return Ending{a.preempted_at, backend::Interruption::kPreempted};
  }
  if (a.running && a.ends_at != absl::InfiniteFuture()) {
    return Ending{a.ends_at, backend::Interruption::kTimeLimit};
  }
  return std::nullopt;
}

bool AllocationPool::ReplaceEnding(absl::Time now) {
  bool grew = false;
  for (auto& [job_id, a] : allocs_) {
    if (a.gone || a.ending || !a.running || a.external || ended_sweeps_.count(a.sweep_id)) {
      continue;
    }
    auto grace = grace_.find(a.sweep_id);
    absl::Duration lead = ExpectedWait(a.sweep_id) + absl::Seconds(30) +
                          (grace != grace_.end() ? grace->second : absl::ZeroDuration());
    bool preempted = a.preempted_at != absl::InfinitePast();
    if (!preempted && a.ends_at - now > lead) continue;
    a.ending = true;
    spdlog::info("sweep {}: allocation {} {}; asking for its replacement", a.sweep_id, job_id,
                 preempted ? "is being preempted"
                           : absl::StrCat("ends in ", absl::FormatDuration(absl::Trunc(
                                                          a.ends_at - now, absl::Seconds(1)))));
    if (a.steps > 0 || demand_.count(a.sweep_id)) grew |= Grow(a.sweep_id, a.placement, now);
  }
  return grew;
}

bool AllocationPool::Resize() {
  absl::Time now = clock_.Now();
  bool grew = ReplaceEnding(now);
  // Grow: one more allocation for a sweep whose trials found no room, when none is on its way.
  for (const auto& [sweep_id, placement] : demand_) {
    if (ended_sweeps_.count(sweep_id)) continue;
    auto retry = retry_submit_at_.find(sweep_id);
    if (retry != retry_submit_at_.end() && now < retry->second) continue;
    grew |= Grow(sweep_id, placement, now);
  }
  // Shrink: an allocation without steps whose sweep has had nothing waiting for idle_timeout,
  // except a replacement whose sweep still has steps in an ending allocation.
  std::set<int64_t> moving;
  for (const auto& [job_id, a] : allocs_) {
    if (a.ending && a.steps > 0) moving.insert(a.sweep_id);
  }
  for (auto it = allocs_.begin(); it != allocs_.end();) {
    auto next = std::next(it);
    Allocation& a = it->second;
    if (a.steps == 0 && !a.gone) {
      if (a.quarantined && !a.external) {
        Erase(it, "every node of it is quarantined");
      } else if (moving.count(a.sweep_id) && !a.ending) {
        a.since = now;  // the replacement waits for the trials of the ending one
      } else if (demand_.count(a.sweep_id) && a.running && a.ending) {
        Erase(it, "too little time left for the sweep's waiting trials");
      } else if (demand_.count(a.sweep_id) && a.running) {
        a.since = now;  // trials wait for a bigger hole than this one has now
      } else if (demand_.count(a.sweep_id) == 0 &&
                 now - a.since >= SlurmOf(a.placement).allocation.idle_timeout) {
        Erase(it, "idle");
      }
    }
    it = next;
  }
  demand_.clear();
  return grew;
}

void AllocationPool::SweepEnded(int64_t sweep_id) {
  ended_sweeps_.insert(sweep_id);
  demand_.erase(sweep_id);
  retry_submit_at_.erase(sweep_id);
  for (auto it = allocs_.begin(); it != allocs_.end();) {
    auto next = std::next(it);
    if (it->second.sweep_id == sweep_id && it->second.steps == 0) Erase(it, "the sweep ended");
    it = next;
  }
}

void AllocationPool::Detach() {
  allocs_.clear();
  leases_.clear();
}

void AllocationPool::Cancel(Allocation& a, const std::string& why) {
  spdlog::info("sweep {}: releasing Slurm allocation {} ({})", a.sweep_id, a.job_id, why);
  CancelJob(a.sweep_id, a.job_id);
}

void AllocationPool::Erase(std::map<uint32_t, Allocation>::iterator it, const std::string& why) {
  Allocation& a = it->second;
  bool agent_in_touch = agent_.hub != nullptr && agent_.hub->LastHeard(a.job_id).has_value();
  if (!a.gone && !a.external && a.running && agent_in_touch) {
    // Its agent ends it (its batch script exits): no cancel through slurmctld, unless the agent
    // has not done so by kReleaseGrace.
    spdlog::info("sweep {}: releasing Slurm allocation {} ({}): its agent ends it", a.sweep_id,
                 a.job_id, why);
    agent_.hub->Release(a.job_id);
    releasing_[a.job_id] = {a.sweep_id, clock_.Now() + kReleaseGrace};
  } else {
    if (!a.gone && !a.external) Cancel(a, why);
    if (agent_.hub != nullptr) agent_.hub->Forget(a.job_id);
  }
  CloseUsage(a, clock_.Now());
  allocs_.erase(it);
}

void AllocationPool::CheckReleased(const std::map<uint32_t, const JobStatus*>& by_id) {
  absl::Time now = clock_.Now();
  for (auto it = releasing_.begin(); it != releasing_.end();) {
    auto found = by_id.find(it->first);
    bool ended = found == by_id.end() || (found->second->state != JobState::kPending &&
                                          found->second->state != JobState::kRunning);
    if (!ended && now >= it->second.cancel_at) {
      spdlog::warn("sweep {}: the agent of allocation {} did not end it; canceling it",
                   it->second.sweep_id, it->first);
      CancelJob(it->second.sweep_id, it->first);
      ended = true;
    }
    it = ended ? releasing_.erase(it) : std::next(it);
  }
}

AllocationPool::Gone AllocationPool::WhyGone(uint32_t job_id) const {
  auto it = allocs_.find(job_id);
  if (it == allocs_.end() || !it->second.gone) return {};
  return {it->second.why_gone, it->second.interruption};
}

std::string AllocationPool::Describe() const {
  int running = 0;
  for (const auto& [id, a] : allocs_) running += a.running && !a.gone;
  return absl::StrCat(allocs_.size(), " allocation(s) held (", running, " running)");
}

}  // namespace hpo::slurm
