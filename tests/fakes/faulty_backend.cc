#include "tests/fakes/faulty_backend.h"

namespace hpo::fakes {

absl::Status FaultyBackend::Launch(const backend::LaunchSpec& spec) {
  if (absl::Status s = faults_.Next(Verb::kLaunch, "Launch"); !s.ok()) return s;
  return BackendWrapper::Launch(spec);
}

absl::Status FaultyBackend::Stop(int64_t trial_id, absl::Duration grace) {
  if (absl::Status s = faults_.Next(Verb::kStop, "Stop"); !s.ok()) return s;
  return BackendWrapper::Stop(trial_id, grace);
}

absl::Status FaultyBackend::Adopt(const backend::LaunchSpec& spec, const std::string& backend_id,
                                  const std::string& gpus) {
  if (absl::Status s = faults_.Next(Verb::kAdopt, "Adopt"); !s.ok()) return s;
  return BackendWrapper::Adopt(spec, backend_id, gpus);
}

void FaultyBackend::Vet(int64_t sweep_id, const backend::Resources& r, const backend::Placement& p,
                        bool starts_now, Vetted done) {
  if (hold_vet_) {
    held_.push_back(std::move(done));
    return;
  }
  BackendWrapper::Vet(sweep_id, r, p, starts_now, std::move(done));
}

void FaultyBackend::ReleaseVet(const absl::Status& answer) {
  hold_vet_ = false;
  std::vector<Vetted> held;
  held.swap(held_);
  for (Vetted& done : held) done(answer);
}

}  // namespace hpo::fakes
