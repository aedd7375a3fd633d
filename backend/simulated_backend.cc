#include "backend/simulated_backend.h"

#include "absl/strings/str_cat.h"

namespace hpo::backend {

SimulatedBackend::SimulatedBackend(const Clock& clock, int gpus, int slots, Script script)
    : clock_(clock), pool_(gpus, slots), script_(std::move(script)) {}

std::string SimulatedBackend::Describe() const {
  return absl::StrCat("simulated: ", pool_.total_gpus(), " GPU(s), ", pool_.total_cpus(),
                      " slot(s)");
}

absl::Status SimulatedBackend::Launch(const LaunchSpec& spec) {
  std::optional<Grant> grant = pool_.Acquire(spec.resources);
  if (!grant) return absl::ResourceExhaustedError("no free simulated resources");
  Sim sim;
  sim.sweep_id = spec.sweep_id;
  sim.fate = script_(spec);
  sim.grant = *grant;
  sim.start = clock_.Now() + sim.fate.start_delay;
  sim.end = sim.start + sim.fate.run_time;
  trials_[spec.trial_id] = sim;
  if (keep_launched_) launched_.push_back(spec);
  if (model_) {
    Allocate(spec.sweep_id, clock_.Now());
    ++running_by_sweep_[spec.sweep_id];
  }
  return absl::OkStatus();
}

void SimulatedBackend::Allocate(int64_t sweep_id, absl::Time at) {
  Held& held = allocations_[sweep_id];
  held.idle_since = absl::InfiniteFuture();
  if (!held.usage.id.empty()) return;
  held.usage.id = absl::StrCat(name_, ":alloc-", next_allocation_++);
  held.usage.sweep_id = sweep_id;
  held.usage.gpus = model_->gpus;
  held.usage.nodes = model_->nodes;
  held.usage.started_at = at;
  BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kAllocation, 0, at);
  e.allocation = held.usage;
  allocation_events_.push_back(std::move(e));
}

void SimulatedBackend::ReleaseIdle(absl::Time now, std::vector<BackendEvent>& out) {
  for (auto it = allocations_.begin(); it != allocations_.end();) {
    Held& held = it->second;
    bool idle = running_by_sweep_[it->first] == 0;
    auto ended = ended_sweeps_.find(it->first);
    if (idle && (ended != ended_sweeps_.end() || now - held.idle_since >= model_->idle_timeout)) {
      held.usage.ended_at = ended != ended_sweeps_.end() ? std::max(held.idle_since, ended->second)
                                                         : held.idle_since + model_->idle_timeout;
      BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kAllocation, 0, *held.usage.ended_at);
      e.allocation = held.usage;
      out.push_back(std::move(e));
      it = allocations_.erase(it);
      continue;
    }
    ++it;
  }
}

void SimulatedBackend::AdoptAllocation(const AllocationUsage& allocation) {
  auto it = allocations_.find(allocation.sweep_id);
  if (it != allocations_.end() && it->second.usage.id == allocation.id) return;
  BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kAllocation, 0, clock_.Now());
  e.allocation = allocation;
  e.allocation.ended_at = clock_.Now();
  allocation_events_.push_back(std::move(e));
}

void SimulatedBackend::SweepEnded(int64_t sweep_id) {
  if (model_) ended_sweeps_[sweep_id] = clock_.Now();
}

absl::Status SimulatedBackend::Stop(int64_t trial_id, absl::Duration grace) {
  auto it = trials_.find(trial_id);
  if (it == trials_.end()) return absl::NotFoundError(absl::StrCat("trial ", trial_id, " unknown"));
  Sim& sim = it->second;
  if (!sim.stop_requested) {
    sim.stop_requested = true;
    if (sim.started && clock_.Now() >= sim.end) {
      sim.ended_first = true;  // ended, not yet heard of
      return absl::OkStatus();
    }
    absl::Time by = clock_.Now() + std::min(grace, sim.fate.stop_after);
    if (by < sim.end) {
      sim.end = std::max(by, sim.start);
      sim.fate.exit_code = 143;
    }
  }
  return absl::OkStatus();
}

std::map<int64_t, SimulatedBackend::Sim>::iterator SimulatedBackend::Forget(
    std::map<int64_t, Sim>::iterator it, absl::Time end) {
  const Sim& sim = it->second;
  pool_.Release(sim.grant);
  if (model_ && --running_by_sweep_[sim.sweep_id] == 0) {
    if (auto held = allocations_.find(sim.sweep_id); held != allocations_.end()) {
      held->second.idle_since = end;
    }
  }
  return trials_.erase(it);
}

void SimulatedBackend::Reclaim(int64_t trial_id, const std::string&) {
  if (auto it = trials_.find(trial_id); it != trials_.end()) Forget(it, clock_.Now());
}

bool SimulatedBackend::Runs(int64_t trial_id) const {
  auto it = trials_.find(trial_id);
  return it != trials_.end() && clock_.Now() < it->second.end;
}

absl::Status SimulatedBackend::Adopt(const LaunchSpec& spec, const std::string&,
                                     const std::string&) {
  auto it = trials_.find(spec.trial_id);
  if (it == trials_.end())
    return absl::NotFoundError(absl::StrCat("trial ", spec.trial_id, " unknown"));
  it->second.started = false;  // Poll reports it started (again), as the contract says
  it->second.start = std::min(it->second.start, clock_.Now());
  return absl::OkStatus();
}

void SimulatedBackend::Act() {
  for (int64_t trial_id : to_checkpoint_) {
    if (trials_.count(trial_id) > 0) checkpoint_signals_.push_back(trial_id);
  }
  to_checkpoint_.clear();
}

std::vector<std::string> SimulatedBackend::NodesOf(const std::string& backend_id) const {
  size_t at = backend_id.find(" nodes=");
  if (at == std::string::npos) return {};
  return {backend_id.substr(at + 7)};
}

std::vector<BackendEvent> SimulatedBackend::Poll() {
  std::vector<BackendEvent> out;
  out.swap(allocation_events_);
  absl::Time now = clock_.Now();
  for (auto it = trials_.begin(); it != trials_.end();) {
    Sim& sim = it->second;
    if (!sim.started && now >= sim.start) {
      sim.started = true;
      BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kStarted, it->first, sim.start);
      e.backend_id = absl::StrCat(name_, ":", it->first,
                                  sim.fate.node.empty() ? "" : " nodes=", sim.fate.node);
      e.gpus = sim.grant.CudaVisibleDevices();
      out.push_back(e);
    }
    if (sim.started && sim.fate.checkpoint_after && !sim.told_to_checkpoint &&
        now >= sim.start + *sim.fate.checkpoint_after && now < sim.end) {
      sim.told_to_checkpoint = true;
      BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kCheckpoint, it->first, now);
      e.interruption = sim.fate.interruption;
      e.message = absl::StrCat(InterruptionWords(sim.fate.interruption), " is near (simulated)");
      out.push_back(e);
      to_checkpoint_.push_back(it->first);
    }
    if (sim.started && now >= sim.end + sim.fate.end_heard_after) {
      BackendEvent e =
          BackendEvent::Of(sim.fate.lost ? BackendEvent::Kind::kLost : BackendEvent::Kind::kExited,
                           it->first, sim.end);
      e.exit_code = sim.fate.exit_code;
      e.stop_requested = sim.stop_requested;
      e.ended_first = sim.ended_first;
      if (sim.fate.lost) {
        e.interruption = sim.fate.interruption;
        e.message =
            absl::StrCat("lost to ", InterruptionWords(sim.fate.interruption), " (simulated)");
      }
      out.push_back(e);
      it = Forget(it, sim.end);
      continue;
    }
    ++it;
  }
  if (model_) ReleaseIdle(now, out);
  return out;
}

}  // namespace hpo::backend
