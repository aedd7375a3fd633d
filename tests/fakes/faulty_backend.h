#pragma once
// FaultyBackend: a pass-through Backend that fails Launch, Stop or Adopt with a chosen code, a
// chosen number of times (flux-core's testexec, for a phase of a trial's life). Everything
// else goes to the wrapped backend.

#include "backend/backend.h"
#include "tests/fakes/fault_plan.h"

namespace hpo::fakes {

class FaultyBackend final : public backend::Backend {
 public:
  enum class Verb { kLaunch, kStop, kAdopt };
  explicit FaultyBackend(backend::Backend& inner) : inner_(inner) {}

  // The next `times` calls of `verb` fail with `code`; the wrapped backend is not called.
  void Fail(Verb verb, absl::StatusCode code, int times = 1) { faults_.Fail(verb, code, times); }
  int failed() const { return faults_.failed(); }

  [[nodiscard]] absl::Status CheckFits(const backend::Resources& r,
                                       const backend::Placement& p) override {
    return inner_.CheckFits(r, p);
  }
  bool CanLaunch(int64_t sweep_id, const backend::Resources& r,
                 const backend::Placement& p) override {
    return inner_.CanLaunch(sweep_id, r, p);
  }
  int Running() const override { return inner_.Running(); }
  int FreeGpus() const override { return inner_.FreeGpus(); }
  std::string Describe() const override { return inner_.Describe(); }
  std::string Name() const override { return inner_.Name(); }
  [[nodiscard]] absl::Status Launch(const backend::LaunchSpec& spec) override;
  [[nodiscard]] absl::Status Stop(int64_t trial_id, absl::Duration grace) override;
  std::vector<backend::BackendEvent> Poll() override { return inner_.Poll(); }
  [[nodiscard]] absl::Status Adopt(const backend::LaunchSpec& spec, const std::string& backend_id,
                                   const std::string& gpus) override;
  void Reclaim(int64_t trial_id, const std::string& backend_id) override {
    inner_.Reclaim(trial_id, backend_id);
  }
  void AdoptAllocation(const backend::AllocationUsage& allocation) override {
    inner_.AdoptAllocation(allocation);
  }
  void Act() override { inner_.Act(); }
  void Detach() override { inner_.Detach(); }
  void SweepEnded(int64_t sweep_id) override { inner_.SweepEnded(sweep_id); }
  void SweepReopened(int64_t sweep_id) override { inner_.SweepReopened(sweep_id); }
  void SetWakeup(std::function<void()> wake) override { inner_.SetWakeup(std::move(wake)); }

 private:
  [[nodiscard]] absl::Status Injected(Verb verb, const char* name);

  backend::Backend& inner_;
  FaultPlan<Verb> faults_;
};

}  // namespace hpo::fakes
