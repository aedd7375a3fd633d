#pragma once
// FaultyBackend: a pass-through Backend (BackendWrapper) that fails Launch, Stop or Adopt with a
// chosen code, a chosen number of times (flux-core's testexec, for a phase of a trial's life), or
// holds a sweep's vetting unanswered. Everything else goes to the wrapped backend.

#include <vector>

#include "backend/backend_wrapper.h"
#include "tests/fakes/fault_plan.h"

namespace hpo::fakes {

class FaultyBackend final : public backend::BackendWrapper {
 public:
  enum class Verb { kLaunch, kStop, kAdopt };
  explicit FaultyBackend(backend::Backend& inner) : BackendWrapper(inner) {}

  // The next `times` calls of `verb` fail with `code`; the wrapped backend is not called.
  void Fail(Verb verb, absl::StatusCode code, int times = 1) { faults_.Fail(verb, code, times); }
  int failed() const { return faults_.failed(); }
  // Vet holds its answer from now on (slurmctld still thinking it over); Release gives them.
  void HoldVet() { hold_vet_ = true; }
  void ReleaseVet(const absl::Status& answer);

  [[nodiscard]] absl::Status Launch(const backend::LaunchSpec& spec) override;
  [[nodiscard]] absl::Status Stop(int64_t trial_id, absl::Duration grace) override;
  [[nodiscard]] absl::Status Adopt(const backend::LaunchSpec& spec, const std::string& backend_id,
                                   const std::string& gpus) override;
  void Vet(int64_t sweep_id, const backend::Resources& r, const backend::Placement& p,
           bool starts_now, Vetted done) override;

 private:
  [[nodiscard]] absl::Status Injected(Verb verb, const char* name);

  FaultPlan<Verb> faults_;
  bool hold_vet_ = false;
  std::vector<Vetted> held_;
};

}  // namespace hpo::fakes
