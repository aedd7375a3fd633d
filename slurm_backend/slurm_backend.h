#pragma once
// SlurmBackend: trials on a Slurm cluster through libslurm (SlurmApi).
//
// Mode "jobs" (built): one batch job per trial, with the trial's nodes, tasks, CPUs and GPUs
// (`gres:gpu:N` per node) and the sweep's partition/account/qos/constraint/reservation/time
// limit. Status comes from one query of the user's jobs per Poll, never one call per trial.
// Exit codes come from the job record (slurmctld keeps it for MinJobAge), so no accounting
// database is needed. Stop: SIGTERM to every step of the job, SIGKILL (cancel) after the grace
// period. A job that ends CANCELLED without hpod asking, or with NODE_FAIL / BOOT_FAIL /
// PREEMPTED, or that vanishes, is LOST (an infrastructure failure, retried).
// Mode "steps" (job steps packed into allocations hpod holds) is not built yet: CheckFits says so.
//
// Thread safety: controller thread only (see Backend).

#include <map>
#include <memory>
#include <optional>

#include "common/clock.h"
#include "slurm_backend/backend.h"
#include "slurm_backend/slurm_api.h"

namespace hpo::backend {

class SlurmBackend final : public Backend {
 public:
  SlurmBackend(std::unique_ptr<SlurmApi> api, const Clock& clock);

  std::string Name() const override { return "slurm"; }
  absl::Status CheckFits(const Resources& r, const Placement& p) override;
  bool CanLaunch(const Resources&) const override { return true; }  // Slurm queues
  absl::Status Launch(const LaunchSpec& spec) override;
  absl::Status Stop(int64_t trial_id, absl::Duration grace) override;
  std::vector<BackendEvent> Poll() override;
  void Reclaim(int64_t trial_id, const std::string& backend_id) override;
  int Running() const override { return static_cast<int>(jobs_.size()); }
  std::string Describe() const override { return "slurm (jobs mode)"; }

  // The batch request a trial becomes (exposed for tests).
  static JobRequest Request(const LaunchSpec& spec);

 private:
  struct Job {
    uint32_t job_id = 0;
    bool started = false;
    bool stop_requested = false;
    std::optional<absl::Time> kill_at;
    int polls_missing = 0;
  };
  std::unique_ptr<SlurmApi> api_;
  const Clock& clock_;
  std::map<int64_t, Job> jobs_;  // by trial id
};

}  // namespace hpo::backend
