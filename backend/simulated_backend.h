#pragma once
// SimulatedBackend: trials that run in virtual time, for controller tests and benchmarks.
//
// A script decides each launched trial's fate (run time, exit code, whether it is lost); the
// backend reports kStarted after `start_delay` and kExited / kLost when the FakeClock passes the
// trial's end. Stop ends the trial after min(grace, stop_after) with the stop signal.
// Thread safety: controller thread only (see Backend).

#include <functional>
#include <map>

#include "backend/backend.h"
#include "backend/resource_pool.h"
#include "common/clock.h"

namespace hpo::backend {

struct SimulatedFate {
  absl::Duration start_delay = absl::ZeroDuration();
  absl::Duration run_time = absl::Seconds(10);
  int exit_code = 0;
  bool lost = false;                                       // ends kLost instead of kExited
  Interruption interruption = Interruption::kNodeFailure;  // what took it, when lost
  absl::Duration stop_after = absl::ZeroDuration();        // how long it takes to honour a stop
};

class SimulatedBackend final : public Backend {
 public:
  using Script = std::function<SimulatedFate(const LaunchSpec&)>;
  SimulatedBackend(const Clock& clock, int gpus, int slots, Script script);

  std::string Name() const override { return name_; }
  // Stands in for another backend (a Router routes by name): "local", "slurm".
  void set_name(std::string name) { name_ = std::move(name); }
  [[nodiscard]] absl::Status CheckFits(const Resources& r, const Placement&) override {
    return pool_.CheckFits(r);
  }
  bool CanLaunch(int64_t, const Resources& r, const Placement&) override { return pool_.Fits(r); }
  [[nodiscard]] absl::Status Launch(const LaunchSpec& spec) override;
  [[nodiscard]] absl::Status Stop(int64_t trial_id, absl::Duration grace) override;
  std::vector<BackendEvent> Poll() override;
  // The simulated trials outlive a controller (as processes outlive hpod): a new controller on
  // this backend takes back those still running.
  [[nodiscard]] absl::Status Adopt(const LaunchSpec& spec, const std::string& backend_id,
                                   const std::string& gpus) override;
  void Reclaim(int64_t, const std::string&) override {}
  int Running() const override { return static_cast<int>(trials_.size()); }
  std::string Describe() const override;

  // Every LaunchSpec seen, in order (for assertions); not kept after keep_launched(false), so
  // that a benchmark of many trials measures the controller's memory, not this record's.
  const std::vector<LaunchSpec>& launched() const { return launched_; }
  void keep_launched(bool keep) { keep_launched_ = keep; }

 private:
  std::string name_ = "simulated";
  struct Sim {
    SimulatedFate fate;
    Grant grant;
    absl::Time start;
    absl::Time end;
    bool started = false;
    bool stop_requested = false;
  };
  const Clock& clock_;
  ResourcePool pool_;
  Script script_;
  std::map<int64_t, Sim> trials_;
  std::vector<LaunchSpec> launched_;
  bool keep_launched_ = true;
};

}  // namespace hpo::backend
