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
  sim.fate = script_(spec);
  sim.grant = *grant;
  sim.start = clock_.Now() + sim.fate.start_delay;
  sim.end = sim.start + sim.fate.run_time;
  trials_[spec.trial_id] = sim;
  if (keep_launched_) launched_.push_back(spec);
  return absl::OkStatus();
}

absl::Status SimulatedBackend::Stop(int64_t trial_id, absl::Duration grace) {
  auto it = trials_.find(trial_id);
  if (it == trials_.end()) return absl::NotFoundError(absl::StrCat("trial ", trial_id, " unknown"));
  Sim& sim = it->second;
  if (!sim.stop_requested) {
    sim.stop_requested = true;
    absl::Time by = clock_.Now() + std::min(grace, sim.fate.stop_after);
    if (by < sim.end) {
      sim.end = std::max(by, sim.start);
      sim.fate.exit_code = 143;
    }
  }
  return absl::OkStatus();
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

std::vector<BackendEvent> SimulatedBackend::Poll() {
  std::vector<BackendEvent> out;
  absl::Time now = clock_.Now();
  for (auto it = trials_.begin(); it != trials_.end();) {
    Sim& sim = it->second;
    if (!sim.started && now >= sim.start) {
      sim.started = true;
      BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kStarted, it->first, sim.start);
      e.backend_id = absl::StrCat("sim:", it->first);
      e.gpus = sim.grant.CudaVisibleDevices();
      out.push_back(e);
    }
    if (sim.started && now >= sim.end) {
      BackendEvent e =
          BackendEvent::Of(sim.fate.lost ? BackendEvent::Kind::kLost : BackendEvent::Kind::kExited,
                           it->first, sim.end);
      e.exit_code = sim.fate.exit_code;
      e.stop_requested = sim.stop_requested;
      if (sim.fate.lost) {
        e.interruption = sim.fate.interruption;
        e.message =
            absl::StrCat("lost to ", InterruptionWords(sim.fate.interruption), " (simulated)");
      }
      out.push_back(e);
      pool_.Release(sim.grant);
      it = trials_.erase(it);
      continue;
    }
    ++it;
  }
  return out;
}

}  // namespace hpo::backend
