#pragma once
// SlurmBackend: trials on a Slurm cluster through libslurm (SlurmApi).
//
// Mode "steps" (the default): hpod holds allocations for each sweep (AllocationPool) and runs
// every trial as a job step in one of them (`srun --jobid=J --exact` with the trial's nodes,
// tasks, CPUs and `--gres=gpu:N`, or `--gres=none`), only where it fits (`--nodelist`): trials of
// different sizes are packed and no two share a GPU (Slurm hands the step its GPUs,
// CUDA_VISIBLE_DEVICES).
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
// Agents: in the allocations hpod requests, hpo-agent starts each step (under hpo-shim, which
// writes the exit record into the trial directory) and reports how it runs and ends
// (agent_hub.h); hpod's host holds no process per step. A step whose agent stops listing it is
// ended by its exit record, or LOST when it left none.
//
// Restart (Adopt): an agent's step is taken back as such (its backend id ends in " agent"), and
// the agent tells how it went; a step hpod ran itself is found again through the srun that
// hpo-shim recorded in the trial directory (its command line names the allocation and nodes).
// Either way its allocation is taken back instead of canceled, and its outcome comes from the
// agent or the shim; a trial's job (jobs mode) is found by
// its stored id or its name (hpo-<sweep>-<trial>) in the user's jobs.
//
// Thread safety: controller thread only (see Backend), except SetWakeup.

#include <sys/types.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "backend/backend.h"
#include "backend/process.h"
#include "common/clock.h"
#include "slurm_backend/allocation_pool.h"
#include "slurm_backend/slurm_api.h"
#include "slurm_backend/slurm_calls.h"

namespace hpo::slurm {

class SlurmBackend final : public backend::Backend {
 public:
  struct Options {
    // Names this daemon's allocations (hpo-alloc-<instance>-<sweep>), so that a restarted daemon
    // cancels the ones it left and never another daemon's: the data directory's stable id.
    std::string instance = "0";
    std::string srun = "srun";
    // hpo-shim, which runs each step's srun and records how it ended, so that a restarted
    // daemon re-adopts running steps and learns the outcome of those that ended meanwhile.
    // Empty: srun runs bare, and a restarted daemon cannot re-adopt steps.
    std::string shim;
    // The allocations hpod requests run hpo-agent (agent_hub.h), which starts their steps: then
    // hpod's host holds no process per running step. Without a hub (and in the user's own
    // allocation, `allocation.job`), hpod runs each step's srun under hpo-shim itself.
    AgentLink agent;
    // How often slurmctld is asked about the user's jobs and allocations, in one call (sites
    // rate-limit it; the agents tell hpod the rest); more often for a few seconds after hpod
    // submitted a trial's job or an allocation without an agent, or while a job is being
    // stopped, so that starts and ends are seen quickly. A failed query doubles the interval
    // (up to 5 minutes) until one succeeds.
    absl::Duration query_interval = absl::Seconds(10);
    absl::Duration fast_query_interval = absl::Seconds(1);
    absl::Duration fast_query_window = absl::Seconds(10);
    // The interval while every allocation hpod holds is watched by its agent, and no trial runs
    // as a job of its own (AllocationPool::CoveredByAgents).
    absl::Duration agent_query_interval = absl::Seconds(60);
    // That query runs on a thread of its own, and every other call to slurmctld (submits,
    // signals, cancels, step queries) on another (slurm_calls.h), so that a slow slurmctld never
    // holds up the controller (answers are taken at the next Poll); false: each call where it
    // is made, as if slurmctld answered at once.
    bool query_thread = false;
    // Where trials and agents reach hpod (HPO_ENDPOINT), asked when a sweep is vetted: one on
    // loopback or a Unix socket only serves compute nodes that are this host, so a sweep is
    // refused where the cluster has others. Null: not checked.
    std::function<std::string()> endpoint;
    // hpod runs as a Slurm job of its own (--as-job): the sruns it would run itself on its own
    // node (steps in the user's allocation, `allocation.job`) would end with that job; such a
    // sweep is refused (CheckFits).
    bool in_job = false;
  };
  SlurmBackend(std::unique_ptr<SlurmApi> api, const Clock& clock, Options options);
  SlurmBackend(std::unique_ptr<SlurmApi> api, const Clock& clock)
      : SlurmBackend(std::move(api), clock, Options()) {}
  ~SlurmBackend() override;

  // Capacity.
  [[nodiscard]] absl::Status CheckFits(const backend::Resources& r,
                                       const backend::Placement& p) override;
  // will_run for the sweep's first allocation (steps mode) or one trial's job (jobs mode).
  void ExpectedStart(const backend::Resources& r, const backend::Placement& p,
                     Started done) override;
  // Whether the compute nodes reach hpod (Options::endpoint), then VetShape.
  void Vet(int64_t sweep_id, const backend::Resources& r, const backend::Placement& p,
           bool starts_now, Vetted done) override;
  bool CanLaunch(int64_t sweep_id, const backend::Resources& r,
                 const backend::Placement& p) override;
  int Running() const override {
    return static_cast<int>(jobs_.size() + submitting_.size() + steps_.size() + queued_.size());
  }
  std::string Describe() const override;

  // Lifecycle.
  std::string Name() const override { return "slurm"; }
  [[nodiscard]] absl::Status Launch(const backend::LaunchSpec& spec) override;
  [[nodiscard]] absl::Status Stop(int64_t trial_id, absl::Duration grace) override;
  [[nodiscard]] absl::Status SendSignal(int64_t trial_id, int signal) override;
  void Act() override;
  std::vector<backend::BackendEvent> Poll() override;
  [[nodiscard]] absl::Status Adopt(const backend::LaunchSpec& spec, const std::string& backend_id,
                                   const std::string& gpus) override;
  void Reclaim(int64_t trial_id, const std::string& backend_id) override;
  void AdoptAllocation(const backend::AllocationUsage& allocation) override;
  void SweepEnded(int64_t sweep_id) override { pool_.SweepEnded(sweep_id); }
  void SweepReopened(int64_t sweep_id) override { pool_.SweepReopened(sweep_id); }
  // The names in the " nodes=" part of a step's or job's backend id (StepBackendId).
  std::vector<std::string> NodesOf(const std::string& backend_id) const override;
  // A step that its allocation's agent started (" agent" in its id): since when the agent has
  // been in touch (AgentHub::InTouchSince); a step or job hpod watches itself: always.
  std::optional<absl::Time> InTouchSince(const std::string& backend_id,
                                         absl::Time now) const override;
  // Later steps skip them, and later allocations and trial jobs ask slurmctld to (`--exclude`).
  void ExcludeNodes(int64_t sweep_id, const std::set<std::string>& nodes) override;
  // Steps and jobs keep running, and so do the allocations (a restart takes back those in use
  // and cancels the rest as leftovers).
  void Detach() override {
    steps_.clear();
    jobs_.clear();
    submitting_.clear();
    queued_.clear();
    pool_.Detach();
  }
  void SetWakeup(std::function<void()> wake) override {
    if (options_.agent.hub != nullptr) options_.agent.hub->SetWakeup(wake);
    if (query_thread_) query_thread_->SetWakeup(wake);
    calls_.SetWakeup(wake);
    watcher_.SetWakeup(std::move(wake));
  }

  // What the pool expects the sweep's next allocation to wait in the queue (steps mode).
  absl::Duration ExpectedWait(int64_t sweep_id) const { return pool_.ExpectedWait(sweep_id); }
  // The batch request a trial becomes in jobs mode (exposed for tests): its command under
  // `shim` (hpo-shim) when given.
  static JobRequest Request(const backend::LaunchSpec& spec, const std::string& shim = "");
  // One trial's job as will_run is asked about it (jobs mode).
  static JobRequest ProbeRequest(const backend::Resources& r, const backend::Placement& p);
  // `r` with the sweep's quarantined nodes excluded.
  JobRequest Excluding(JobRequest r, int64_t sweep_id) const;
  // A trial's job (jobs mode) or step name: hpo-<sweep>-<trial>, with ".<segment>" for a
  // resumed trial's later segments, so that a restart never takes an earlier segment's job for
  // the current one.
  static std::string JobName(const backend::LaunchSpec& spec);
  // The holder job of an allocation for a sweep.
  JobRequest AllocationRequest(int64_t sweep_id, const backend::Placement& p) const;
  // The srun command line of a step (exposed for tests and the benchmark).
  std::vector<std::string> StepArgv(uint32_t job_id, const std::vector<std::string>& nodes,
                                    const backend::LaunchSpec& spec, int64_t mem_per_cpu_mb) const;

 private:
  // slurmctld's word on the sweep's allocation (steps mode) or one trial's job (jobs mode).
  void VetShape(int64_t sweep_id, const backend::Resources& r, const backend::Placement& p,
                bool starts_now, Vetted done);
  // What hpod's signals to a job or step found: one reached it, or the first found it gone (it
  // had ended on its own: BackendEvent::ended_first).
  struct Signals {
    bool reached = false;
    bool ended_first = false;
  };
  static void Reached(Signals& signals, const absl::Status& s);
  struct Job {  // jobs mode
    uint32_t job_id = 0;
    std::string dir;  // the trial's directory: hpo-shim's exit record
    int segment = 1;
    bool started = false;
    bool stop_requested = false;
    Signals signals;
    int stop_signal = 15;
    absl::Duration grace;  // between the stop signal and the cancel
    std::optional<absl::Time> kill_at;
    int polls_missing = 0;
    // A resumable trial (LaunchSpec::checkpoint_signal): Slurm warns it checkpoint_grace before
    // its time limit; hpod signals it when preemption begins.
    int checkpoint_signal = 0;
    absl::Duration checkpoint_grace;
    absl::Duration time_limit;                       // the sweep's slurm.time_limit; 0: unknown
    absl::Time ends_at = absl::InfinitePast();       // slurmctld's end time, while it ran
    absl::Time preempted_at = absl::InfinitePast();  // preemption began
  };
  struct Step {  // steps mode
    int64_t trial_id = 0;
    int64_t sweep_id = 0;
    uint32_t job_id = 0;
    std::optional<uint32_t> step_id;
    backend::TrialProcess process;  // the shim (or bare srun) running the step
    std::string nodelist;
    std::string stderr_path;
    absl::Time launched;
    bool stop_requested = false;
    Signals signals;
    int stop_signal = 15;
    absl::Duration grace;  // between the stop signal and the cancel
    std::optional<absl::Time> kill_at;
    int tasks = 1;                // its tasks, each of which records itself (StepArgv)
    bool tasks_recorded = false;  // every task's record was read back (or the step ended)
    absl::Time tasks_checked;     // when they were last looked for
    // A resumable trial (LaunchSpec::checkpoint_signal): told to checkpoint checkpoint_grace
    // before its allocation or its own time limit ends, or when preemption begins; its exit is
    // then an interruption (`interrupted`), not the trial's end.
    int checkpoint_signal = 0;
    absl::Duration checkpoint_grace;
    absl::Duration time_limit;  // resources.time_limit; 0: none
    backend::Interruption interrupted = backend::Interruption::kNone;
    std::string name;  // the step's (JobName)
    // Started by the allocation's hpo-agent (process.pid is then 0): its launch order, and how
    // the agent said it ended.
    bool agent = false;
    std::optional<v1::AgentOrder> launch_order;  // sent once more if the agent never had it
    bool relaunched = false;
    uint64_t launch_seq = 0;
    std::optional<backend::ExitRecord> agent_outcome;
    bool agent_vanished = false;
    // When hpod first saw it ended other than by exiting 0 (ReapSteps holds it for slurmctld's
    // next answer, which says whether its allocation was being preempted).
    std::optional<absl::Time> ended_badly_at;
    int agent_missing = 0;  // agent calls in a row that did not list it
  };

  struct Queued {  // launched, to be started at the next Act
    backend::LaunchSpec spec;
    AllocationPool::Placed placed;  // steps mode: the room it took
  };
  // Act: submits a trial's job; spawns a trial's step (its srun under hpo-shim).
  void StartJob(const backend::LaunchSpec& spec);
  void StartStep(const backend::LaunchSpec& spec, const AllocationPool::Placed& placed);
  // How a step is started: its srun under hpo-shim (by hpod, or by the allocation's agent, to
  // which the order carries the environment hpod would give it).
  backend::SpawnSpec StepSpawn(const backend::LaunchSpec& spec, uint32_t job_id,
                               const std::vector<std::string>& nodes, int64_t mem_per_cpu_mb) const;
  static v1::AgentOrder AgentLaunchOrder(const backend::LaunchSpec& spec,
                                         const backend::SpawnSpec& spawn);
  void LaunchFailed(int64_t trial_id, const absl::Status& why);
  // Act: the stop signal to a trial's step or job.
  [[nodiscard]] absl::Status Signal(int64_t trial_id);
  // One query of the user's jobs at a time, on a thread of its own (Options::query_thread).
  class QueryThread {
   public:
    explicit QueryThread(SlurmApi& api);
    ~QueryThread();
    void SetWakeup(std::function<void()> wake);
    void Ask();  // starts a query
    bool Busy() const;
    // The answer of the last query, once.
    std::optional<absl::StatusOr<std::vector<JobStatus>>> Take();

   private:
    void Loop();
    SlurmApi& api_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    bool asked_ = false, busy_ = false, stopping_ = false;
    std::optional<absl::StatusOr<std::vector<JobStatus>>> answer_;
    std::function<void()> wake_;
    std::thread thread_;
  };
  // What slurmctld said of the user's jobs.
  void TakeMine(absl::StatusOr<std::vector<JobStatus>> mine,
                std::vector<backend::BackendEvent>& out);
  void PollJobs(const std::map<uint32_t, const JobStatus*>& by_id,
                std::vector<backend::BackendEvent>& out);
  void ReapSteps(std::vector<backend::BackendEvent>& out);
  // What the agents said about their steps since the last Poll.
  void HearAgents();
  // An agent's step: ended (outcome), vanished, or still running.
  backend::TrialProcess::State CheckAgentStep(Step& step, backend::ExitRecord* outcome);
  // Sends a signal to a step that has no Slurm step id yet: to its srun, which passes it on.
  void SignalSrun(const Step& step, int signal);
  static Job NewJob(uint32_t job_id, const backend::LaunchSpec& spec);
  // A job slurmctld no longer knows ended as its exit record says (the start, too, if it was
  // never seen).
  void JobEndedByRecord(int64_t trial_id, const Job& job, const backend::ExitRecord& rec,
                        std::vector<backend::BackendEvent>& out);
  static void SetCheckpointing(const backend::LaunchSpec& spec, Step& step);
  // Poll: resumable steps whose allocation or time limit nears its end (or whose allocation is
  // being preempted) are reported (kCheckpoint) and signaled at the next Act.
  void CheckpointSteps(std::vector<backend::BackendEvent>& out);
  void SignalCheckpoint(int64_t trial_id);
  // Jobs mode: what ended a resumable trial's job that exited by itself, when Slurm's warning or
  // a preemption told it to checkpoint; kNone when the trial ended on its own.
  static backend::Interruption CheckpointedJob(const Job& job, const JobStatus& st);
  // The event for a step whose srun ended (`outcome`) or vanished (nullptr); gives its room back.
  backend::BackendEvent StepEnded(Step& step, const backend::ExitRecord* outcome);
  [[nodiscard]] absl::Status AdoptJob(const backend::LaunchSpec& spec,
                                      const std::string& backend_id);
  [[nodiscard]] absl::Status AdoptStep(const backend::LaunchSpec& spec,
                                       const std::string& backend_id, const std::string& gpus);
  [[nodiscard]] absl::Status AdoptAgentStep(const backend::LaunchSpec& spec, Step step,
                                            const std::string& gpus);
  // The user's jobs, asked at most once a second while re-adopting.
  [[nodiscard]] absl::StatusOr<std::vector<JobStatus>> MineForAdoption();
  void IdentifySteps();
  // The step's id (and nodes) as slurmctld gave them: recorded, and reported (kUpdated).
  void Identified(Step& step, uint32_t step_id, const std::string& nodes,
                  std::vector<backend::BackendEvent>& out);
  // Reads back what the step's tasks recorded (see StepArgv): its step id as soon as one task
  // wrote it, its nodes and GPUs once every task did, at most once a second, or with `force`
  // whatever is there (the step ended); reports them (kUpdated).
  void RecordTasks(Step& step, bool force, std::vector<backend::BackendEvent>& out);
  // Cancels a step or job, logging what slurmctld refused.
  void CancelStep(int64_t trial_id, uint32_t job_id, uint32_t step_id);
  void CancelJob(int64_t trial_id, uint32_t job_id);
  // Signals a trial's job (and cancels it when it cannot be signaled, with `or_cancel`: a
  // pending job), or its step: by its id, or by its name when its tasks have not written the id
  // down yet, or through its srun when slurmctld does not list it yet. All through calls_.
  void SignalJob(int64_t trial_id, uint32_t job_id, int signal, bool or_cancel);
  void SignalStep(const Step& step, int signal);
  // slurmctld answered a trial's job submission.
  void JobSubmitted(int64_t trial_id, const absl::StatusOr<uint32_t>& id);
  std::string StepBackendId(const Step& s) const;

  std::map<int64_t, std::set<std::string>> excluded_;  // by sweep (ExcludeNodes)
  std::unique_ptr<SlurmApi> api_;
  // Every call to slurmctld but the periodic query and those of a restart's Adopt (after api_:
  // it makes the calls still queued when hpod stops; before pool_, whose cancels it carries).
  SlurmCalls calls_;
  const Clock& clock_;
  Options options_;
  AllocationPool pool_;
  std::map<int64_t, Job> jobs_;                // by trial id
  std::map<int64_t, Job> submitting_;          // jobs mode: submitted, no job id yet
  std::map<int64_t, Step> steps_;              // by trial id
  std::map<int64_t, Queued> queued_;           // by trial id
  std::set<std::pair<int64_t, int>> orphans_;  // agents' steps hpod ended (trial, segment)
  std::vector<int64_t> to_signal_;             // stopped, to be signaled at the next Act
  std::vector<int64_t> to_checkpoint_;         // told to checkpoint, to be signaled at the next Act
  std::vector<backend::BackendEvent> events_;
  bool swept_leftovers_ = false;
  // The partitions' time limits (what an allocation that asks for none runs for), read when hpod
  // starts and every kPartitionsAge, so that an allocation's end is known when its agent calls.
  void LoadPartitions();
  static constexpr absl::Duration kPartitionsAge = absl::Hours(1);
  absl::Time partitions_at_ = absl::InfinitePast();
  absl::Time last_query_ = absl::InfinitePast();
  // When the query slurmctld last answered was asked; ask_now_: a step's end waits for its next
  // answer.
  std::vector<std::pair<int64_t, int>> to_send_;  // SendSignal: trial, signal
  absl::Time last_answer_ = absl::InfinitePast();
  bool ask_now_ = false;
  static constexpr absl::Duration kEndAnswerWait = absl::Seconds(15);
  bool watching_ = false;  // there was something to ask slurmctld about at the last Poll
  absl::Time watch_since_ = absl::InfinitePast();  // since when
  absl::Time last_steps_query_ = absl::InfinitePast();
  absl::Duration query_backoff_;  // after failed queries
  std::unique_ptr<QueryThread> query_thread_;
  absl::Time fast_until_ = absl::InfinitePast();  // query often until then
  bool awaiting_query_ = false;  // the pool had an allocation only slurmctld can say runs
  std::optional<std::vector<JobStatus>> adopt_mine_;
  // Steps-mode sweeps the restarted daemon runs (from Adopt), whose leftover allocations it
  // takes back instead of canceling.
  std::map<int64_t, backend::Placement> live_sweeps_;
  absl::Time adopt_mine_at_ = absl::InfinitePast();
  backend::ChildWatcher watcher_;  // last: its thread stops first
};

}  // namespace hpo::slurm
