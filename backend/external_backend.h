#pragma once
// ExternalBackend: trials that something else launches (`backend: external`, ask and tell).
// hpod proposes a trial's parameters when asked (`hpo ask`), the trial reports through the usual
// report path and is ended by `hpo tell`; this backend only keeps the account. A launch starts
// at once (kStarted, backend id "external"); a stop ends the trial at once (kExited with
// stop_requested): the trial learns it from its next report's reply, and hpod does not wait for
// it. Trials outlive hpod by nature: Adopt takes every one back.
//
// Thread safety: controller thread only (see Backend).

#include <set>
#include <vector>

#include "backend/backend.h"
#include "common/clock.h"

namespace hpo::backend {

class ExternalBackend final : public Backend {
 public:
  explicit ExternalBackend(const Clock& clock) : clock_(clock) {}

  [[nodiscard]] absl::Status CheckFits(const Resources&, const Placement&) override {
    return absl::OkStatus();
  }
  // Always: the controller creates an external sweep's trials only when asked.
  bool CanLaunch(int64_t, const Resources&, const Placement&) override { return true; }
  int Running() const override { return static_cast<int>(trials_.size()); }
  std::string Describe() const override;

  std::string Name() const override { return "external"; }
  [[nodiscard]] absl::Status Launch(const LaunchSpec& spec) override;
  [[nodiscard]] absl::Status Stop(int64_t trial_id, absl::Duration grace) override;
  std::vector<BackendEvent> Poll() override;
  [[nodiscard]] absl::Status Adopt(const LaunchSpec& spec, const std::string& backend_id,
                                   const std::string& gpus) override;
  void Reclaim(int64_t trial_id, const std::string&) override { trials_.erase(trial_id); }
  void Detach() override { trials_.clear(); }

 private:
  const Clock& clock_;
  std::set<int64_t> trials_;
  std::vector<BackendEvent> events_;
};

}  // namespace hpo::backend
