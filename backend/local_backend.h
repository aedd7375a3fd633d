#pragma once
// LocalBackend: trials as process groups on this machine.
//
// Each trial is started in its own session (so its pid is its process group id), with stdout
// and stderr appended to stdout.log / stderr.log in its trial directory and its GPUs in
// CUDA_VISIBLE_DEVICES (empty for trials that asked for none). Stop sends the trial's stop signal
// to the whole group and SIGKILL after the grace period; when a trial's main process has exited,
// whatever it left in its group is killed too, so nothing outlives a trial.
//
// Trials run under hpo-shim (Options::shim), so they outlive a daemon that crashed, and a
// restarted daemon re-adopts them (Adopt): it finds each through the pid the shim recorded in
// the trial directory, watches it through a pidfd, and reads its outcome from the shim's record.
//
// Thread safety: controller thread only (see Backend).

#include <sys/types.h>

#include <map>
#include <optional>

#include "backend/backend.h"
#include "backend/process.h"
#include "backend/resource_pool.h"
#include "common/clock.h"

namespace hpo::backend {

class LocalBackend final : public Backend {
 public:
  struct Options {
    int gpus = -1;     // -1: count of `nvidia-smi -L` lines, 0 when it is absent
    int cpus = 0;      // 0: the number of online CPUs
    std::string shim;  // hpo-shim; empty: trials run bare and cannot be re-adopted
  };
  LocalBackend(const Options& options, const Clock& clock);
  ~LocalBackend() override;

  std::string Name() const override { return "local"; }
  [[nodiscard]] absl::Status CheckFits(const Resources& r, const Placement&) override {
    return pool_.CheckFits(r);
  }
  bool CanLaunch(int64_t, const Resources& r, const Placement&) override { return pool_.Fits(r); }
  [[nodiscard]] absl::Status Launch(const LaunchSpec& spec) override;
  [[nodiscard]] absl::Status Stop(int64_t trial_id, absl::Duration grace) override;
  [[nodiscard]] absl::Status SendSignal(int64_t trial_id, int signal) override;
  void Act() override;
  std::vector<BackendEvent> Poll() override;
  [[nodiscard]] absl::Status Adopt(const LaunchSpec& spec, const std::string& backend_id,
                                   const std::string& gpus) override;
  void Reclaim(int64_t trial_id, const std::string& backend_id) override;
  int Running() const override { return static_cast<int>(children_.size() + queued_.size()); }
  int FreeGpus() const override { return pool_.free_gpus(); }
  std::string Describe() const override;
  void SetWakeup(std::function<void()> wake) override { watcher_.SetWakeup(std::move(wake)); }

  // Kills every trial's group at once (daemon shutdown); their kExited events follow in Poll.
  void KillAll();
  void Detach() override {
    children_.clear();
    queued_.clear();
  }

  // GPUs `nvidia-smi -L` lists, 0 when it is not there.
  static int DetectGpus();

 private:
  struct Child {
    TrialProcess process;
    Grant grant;
    std::optional<absl::Time> kill_at;  // SIGKILL deadline after Stop
    bool stop_requested = false;
    int stop_signal = 15;
    absl::Duration grace;  // between the stop signal and SIGKILL
  };
  struct Queued {  // launched, to be started at the next Act
    LaunchSpec spec;
    Grant grant;
  };
  // Spawns a launched trial (Act).
  void Start(const LaunchSpec& spec, const Grant& grant);
  void Ended(int64_t trial_id, Child& child, const ExitRecord& outcome);

  Options options_;
  const Clock& clock_;
  ResourcePool pool_;
  std::map<int64_t, Child> children_;
  std::vector<std::pair<int64_t, int>> to_send_;  // SendSignal: trial, signal
  std::map<int64_t, Queued> queued_;              // by trial id
  std::vector<int64_t> to_signal_;                // stopped, to be signaled at the next Act
  std::vector<BackendEvent> events_;
  ChildWatcher watcher_;  // last: its thread stops before the rest goes
};

}  // namespace hpo::backend
