#pragma once
// SlurmBackend: trials on a Slurm cluster through libslurm (SlurmApi).
//
// Mode "steps" (the default): hpod holds allocations for each sweep — batch "holder" jobs that
// only sleep — and runs every trial as a job step in one of them (`srun --jobid=J --exact` with
// the trial's nodes, tasks, CPUs and `--gres=gpu:N`, or `--gres=none`). hpod knows which GPUs and
// CPUs of each node of each allocation its steps hold, so a step is only started where it fits
// (`--nodelist`): trials of different sizes are packed and no two share a GPU (Slurm hands the
// step its GPUs, CUDA_VISIBLE_DEVICES). While trials wait for room, the pool grows by one
// allocation at a time up to the sweep's `allocation.max`; an allocation that holds no step
// goes after `allocation.idle_timeout`, and all of a sweep's go when it ends (SweepEnded).
// A step's outcome is its srun's exit status (Slurm keeps no record of finished steps without
// accounting), which hpo-shim writes down next to the trial. A step canceled from outside, or
// whose allocation ended under it, is LOST.
//
// Mode "jobs": one batch job per trial, with the trial's nodes, tasks, CPUs and GPUs
// (`gres:gpu:N` per node). Exit codes come from the job record (slurmctld keeps it for
// MinJobAge), so no accounting database is needed. A job that ends CANCELLED without hpod
// asking, or with NODE_FAIL / BOOT_FAIL / PREEMPTED, or that vanishes, is LOST.
//
// Both: status comes from one query of the user's jobs per Poll (plus, while a new step's id is
// not known yet, one query of the steps), never one call per trial. Stop sends the trial's stop
// signal (to the step, or to every step of the job) and cancels after the grace period.
//
// Restart (Adopt): a step is found again through the srun that hpo-shim recorded in the trial
// directory (its command line names the allocation and nodes), its allocation is taken back
// instead of canceled, and its outcome comes from the shim; a trial's job (jobs mode) is found by
// its stored id or its name (hpo-<sweep>-<trial>) in the user's jobs.
//
// Thread safety: controller thread only (see Backend), except SetWakeup.

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <set>

#include "common/clock.h"
#include "slurm_backend/backend.h"
#include "slurm_backend/process.h"
#include "slurm_backend/slurm_api.h"

namespace hpo::backend {

class SlurmBackend final : public Backend {
 public:
  struct Options {
    // Names this daemon's allocations (hpo-alloc-<instance>-<sweep>), so that a restarted daemon
    // cancels the ones it left and never another daemon's.
    std::string instance = "0";
    std::string srun = "srun";
    // hpo-shim, which runs each step's srun and records how it ended, so that a restarted
    // daemon re-adopts running steps and learns the outcome of those that ended meanwhile.
    // Empty: srun runs bare, and a restarted daemon cannot re-adopt steps.
    std::string shim;
    // How often slurmctld is asked about jobs and allocations (sites rate-limit it); more often
    // for a few seconds after hpod submitted something, so that starts are seen quickly.
    absl::Duration query_interval = absl::Seconds(1);
    absl::Duration fast_query_interval = absl::Milliseconds(100);
    absl::Duration fast_query_window = absl::Seconds(10);
  };
  SlurmBackend(std::unique_ptr<SlurmApi> api, const Clock& clock, Options options);
  SlurmBackend(std::unique_ptr<SlurmApi> api, const Clock& clock)
      : SlurmBackend(std::move(api), clock, Options()) {}
  ~SlurmBackend() override;

  std::string Name() const override { return "slurm"; }
  absl::Status CheckFits(const Resources& r, const Placement& p) override;
  bool CanLaunch(int64_t sweep_id, const Resources& r, const Placement& p) override;
  absl::Status Launch(const LaunchSpec& spec) override;
  absl::Status Stop(int64_t trial_id, absl::Duration grace) override;
  std::vector<BackendEvent> Poll() override;
  absl::Status Adopt(const LaunchSpec& spec, const std::string& backend_id,
                     const std::string& gpus) override;
  void Reclaim(int64_t trial_id, const std::string& backend_id) override;
  int Running() const override { return static_cast<int>(jobs_.size() + steps_.size()); }
  std::string Describe() const override;
  void SweepEnded(int64_t sweep_id) override;
  // Steps and jobs keep running, and so do the allocations (a restart takes back those in use
  // and cancels the rest as leftovers).
  void Detach() override {
    steps_.clear();
    jobs_.clear();
    allocs_.clear();
  }
  void SetWakeup(std::function<void()> wake) override { watcher_.SetWakeup(std::move(wake)); }

  // The batch request a trial becomes in jobs mode (exposed for tests).
  static JobRequest Request(const LaunchSpec& spec);
  // The holder job of an allocation for a sweep.
  JobRequest AllocationRequest(int64_t sweep_id, const Placement& p) const;
  // The srun command line of a step (exposed for tests and the benchmark).
  std::vector<std::string> StepArgv(uint32_t job_id, const std::vector<std::string>& nodes,
                                    const LaunchSpec& spec, int64_t mem_per_cpu_mb) const;

 private:
  struct Job {  // jobs mode
    uint32_t job_id = 0;
    bool started = false;
    bool stop_requested = false;
    int stop_signal = 15;
    std::optional<absl::Time> kill_at;
    int polls_missing = 0;
  };
  struct Allocation {  // steps mode
    uint32_t job_id = 0;
    int64_t sweep_id = 0;
    Placement placement;
    bool running = false;
    bool external = false;   // the user's own job (allocation.job): never canceled by hpod
    bool gone = false;       // ended under us
    std::string why_gone;
    std::vector<std::string> nodes;
    std::vector<int> free_gpus, free_cpus;  // per node
    int steps = 0;
    absl::Time since;        // submitted, or idle since
    int polls_missing = 0;
  };
  struct Step {
    int64_t trial_id = 0;
    uint32_t job_id = 0;
    std::optional<uint32_t> step_id;
    TrialProcess process;         // the shim (or bare srun) running the step
    std::vector<std::string> nodes;
    std::vector<int> node_index;  // into the allocation's nodes; empty until it runs (re-adopted)
    int gpus = 0, cpus = 0;       // per node
    std::string nodelist;
    std::string stderr_path;
    absl::Time launched;
    bool stop_requested = false;
    int stop_signal = 15;
    std::optional<absl::Time> kill_at;
    int tasks = 1;                 // its tasks, each of which records its GPUs (StepArgv)
    bool gpus_recorded = false;    // its GPUs were read back (or it asked for none)
    absl::Time gpus_checked;       // when they were last looked for
  };

  // The nodes of `a` where a step with `r` fits now (best fit), or nullopt.
  static std::optional<std::vector<int>> PickNodes(const Allocation& a, const Resources& r);
  Allocation* FindRoom(int64_t sweep_id, const Resources& r, std::vector<int>* nodes);
  absl::Status LaunchJob(const LaunchSpec& spec);
  absl::Status LaunchStep(const LaunchSpec& spec);
  void PollJobs(const std::map<uint32_t, const JobStatus*>& by_id, std::vector<BackendEvent>& out);
  void PollAllocations(const std::map<uint32_t, const JobStatus*>& by_id);
  void ReapSteps(std::vector<BackendEvent>& out);
  // The event for a step whose srun ended (`outcome`) or vanished (nullptr); gives its room back.
  BackendEvent StepEnded(Step& step, const ExitRecord* outcome);
  absl::Status AdoptJob(const LaunchSpec& spec, const std::string& backend_id);
  absl::Status AdoptStep(const LaunchSpec& spec, const std::string& backend_id);
  // The user's jobs, asked at most once a second while re-adopting.
  absl::StatusOr<std::vector<JobStatus>> MineForAdoption();
  void IdentifySteps(bool force, std::vector<BackendEvent>& out);
  // Reads back which GPUs Slurm gave the step (what its tasks recorded, see StepArgv) once every
  // task did, at most once a second, or with `force` whatever is there (the step ended), and
  // reports them (kUpdated).
  void RecordStepGpus(Step& step, bool force, std::vector<BackendEvent>& out);
  void ResizePools();
  void ReleaseAllocation(std::map<uint32_t, Allocation>::iterator it, const std::string& why);
  std::string StepBackendId(const Step& s) const;

  std::unique_ptr<SlurmApi> api_;
  const Clock& clock_;
  Options options_;
  std::map<int64_t, Job> jobs_;            // by trial id
  std::map<uint32_t, Allocation> allocs_;  // by job id
  std::map<int64_t, Step> steps_;          // by trial id
  std::map<int64_t, Placement> demand_;    // sweeps with a trial that found no room, this tick
  std::map<int64_t, absl::Time> retry_submit_at_;  // sweeps whose allocation request failed
  std::set<int64_t> ended_sweeps_;
  std::vector<BackendEvent> events_;
  bool swept_leftovers_ = false;
  absl::Time last_query_ = absl::InfinitePast();
  absl::Time fast_until_ = absl::InfinitePast();  // query often until then
  std::optional<std::vector<JobStatus>> adopt_mine_;
  absl::Time adopt_mine_at_ = absl::InfinitePast();
  ChildWatcher watcher_;  // last: its thread stops first
};

}  // namespace hpo::backend
