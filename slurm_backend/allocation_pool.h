#pragma once
// AllocationPool: the allocations hpod holds for its sweeps in Slurm steps mode, and the room
// their steps leave on each node.
//
// An allocation is a batch job that runs hpo-agent (agent_hub.h), or only sleeps, shaped by the
// sweep's `slurm.allocation` (or the user's own running job, `allocation.job`, which the pool uses
// but never requests or cancels). Each of its nodes has a backend::ResourcePool, the same per-node
// GPU and CPU accounting the local backend uses, so that a step is placed only where it fits
// (best fit: the nodes with the fewest GPUs, then CPUs, left) and no two steps share a GPU.
//
// Growth and shrinking (Resize, once per poll): a sweep with a trial that found no room
// (CanPlace answered false) gets one more allocation when none of its own is on its way, up to
// `allocation.max`; an allocation without steps goes after `allocation.idle_timeout` unless its
// sweep has a trial waiting; all of a sweep's go once it ended and their last step did.
//
// Time: the pool knows when each allocation ends (slurmctld's end time, or the moment
// preemption began). A step is placed only where the allocation has the time the trial needs
// (Resources::needs), and never in one being preempted. An allocation is *ending* once it has
// less left than the sweep's expected queue wait (the longest of the last three waits measured
// for its allocations) plus its checkpoint grace plus 30 s, or once preemption began: the pool
// then asks for its replacement, which does not count toward `allocation.max`, so that the
// trials moving out of it do not wait for one. An ending allocation without steps goes as soon
// as the sweep's waiting trials do not fit in it; its replacement is not released as idle while
// it still has steps.
//
// Cost: from the moment an allocation runs until it ends (hpod releases it, or slurmctld says it
// ended and when), the pool reports it (TakeUsage) with its GPUs and nodes, so that the
// controller counts the GPU- and node-hours the site charges. The user's own job counts from
// the moment the pool takes it until it lets it go. After a restart the controller hands back
// the allocations it had not seen end (Expect): those the pool takes back keep their record;
// for the others it reports slurmctld's end time, or, when slurmctld no longer knows the job,
// the sooner of now and the end its time limit set.
//
// Allocation job names are hpo-alloc-<instance>-<sweep>, where <instance> is the data
// directory's stable id: a restarted daemon takes back those its steps still run in (Adopt)
// and cancels the rest it left (SweepLeftovers), never another daemon's.
//
// Thread safety: the Slurm backend's thread only (the controller's).

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/resource_pool.h"
#include "common/clock.h"
#include "slurm_backend/agent_hub.h"
#include "slurm_backend/slurm_api.h"
#include "slurm_backend/slurm_calls.h"
#include "slurm_backend/slurm_placement.h"

namespace hpo::slurm {

// How the allocations hpod requests run hpo-agent (agent_hub.h); without a hub they only hold
// their nodes, and hpod starts each step's srun on its own host.
struct AgentLink {
  AgentHub* hub = nullptr;
  std::vector<std::string> argv;  // hpo-agent and its options
  // HPO_ENDPOINT_FILE and HPO_TLS_CA (HPO_ENDPOINT comes from the hub).
  std::map<std::string, std::string> env;
};

class AllocationPool {
 public:
  // `calls`: where its submits and cancels run (slurm_calls.h).
  AllocationPool(SlurmApi& api, SlurmCalls& calls, const Clock& clock, std::string instance,
                 AgentLink agent = {});
  // Cancels every allocation hpod requested that has not ended (not the user's own).
  ~AllocationPool();
  AllocationPool(const AllocationPool&) = delete;
  AllocationPool& operator=(const AllocationPool&) = delete;

  // Where a placed step runs.
  struct Placed {
    uint32_t job_id = 0;
    bool agent = false;  // its hpo-agent starts the step
    std::vector<std::string> nodes;
    int64_t mem_per_cpu_mb = 0;  // an even share of the allocation's memory per CPU; 0: none set
  };

  // True when a step of `sweep_id` with `r` fits in one of the sweep's running allocations now;
  // false notes the sweep as waiting (Resize grows its pool).
  bool CanPlace(int64_t sweep_id, const backend::Resources& r, const backend::Placement& p);
  // Reserves room for trial `trial_id`'s step, or nullopt when there is none now.
  std::optional<Placed> Place(int64_t trial_id, int64_t sweep_id, const backend::Resources& r);
  // After a restart: trial `trial_id`'s step still runs in allocation `job_id` on `nodes`. The
  // allocation is taken back instead of canceled as a leftover, and the step's room is held
  // once the allocation's nodes are known. `gpus` is the step's recorded GPUs ("n1:0,1 n2:2"),
  // possibly empty.
  void Adopt(int64_t trial_id, uint32_t job_id, int64_t sweep_id, const backend::Placement& p,
             const std::vector<std::string>& nodes, const backend::Resources& r,
             const std::string& gpus);
  // Trial `trial_id`'s step ended: its room goes back, and its allocation goes too when that
  // was its last step and the allocation ended or its sweep did.
  void Release(int64_t trial_id, absl::Time now);

  // Takes slurmctld's view of the user's jobs (one query per poll): allocations start running
  // (their nodes become known), end, or vanish.
  void Update(const std::map<uint32_t, const JobStatus*>& by_id);
  // Allocation `job_id`'s agent called: it runs, on `nodelist` ("n[1-2]"); slurmctld's next
  // answer adds its start and end times. True when that made it run.
  bool AgentCalled(uint32_t job_id, const std::string& nodelist);
  // The cluster's partitions: an allocation that asks for no time limit runs for its
  // partition's (JobLimit), so its end is known as soon as its agent calls.
  void SetPartitions(std::vector<PartitionLimits> partitions) {
    partitions_ = std::move(partitions);
  }
  // Whether an allocation hpod asked for waits for slurmctld to say that it runs: one whose
  // agent does not call (the user's own job, or one without an agent).
  bool AwaitingQuery() const;
  // Whether a trial waits for the start and end times of a running allocation that only its
  // agent has said runs (a trial with a time limit or a checkpoint, which must fit the rest of
  // the allocation's time): then slurmctld is worth asking now, not at the next interval.
  bool WantsTimes() const { return wants_times_; }
  // Once, from the first query of a new daemon: the allocations of this instance that an earlier
  // run left and no re-adopted step took back. Those of a sweep in `live` (the sweeps the new
  // daemon runs, with their placement) are taken back as that sweep's, pending or running; the
  // others are canceled.
  void SweepLeftovers(const std::vector<JobStatus>& mine,
                      const std::map<int64_t, backend::Placement>& live);
  // After a restart: allocation `job_id` was held (its record as the controller stored it) and
  // not seen to end (see Cost above).
  void Expect(uint32_t job_id, const backend::AllocationUsage& usage) { expected_[job_id] = usage; }
  // What allocations started, changed or ended since the last call, oldest first.
  std::vector<backend::AllocationUsage> TakeUsage();
  // Grows and shrinks the pools (see above). True when it requested or took an allocation,
  // so that the backend watches slurmctld closely for a while.
  bool Resize();
  // A sweep about to start: its first allocation is requested now, and `vetted` runs (on the
  // controller's thread) with slurmctld's answer. A refusal leaves nothing behind, and is not
  // retried: the sweep is not accepted. False when the sweep has an allocation already or one
  // on its way (nothing is requested, `vetted` does not run).
  bool RequestFirst(int64_t sweep_id, const backend::Placement& placement,
                    std::function<void(const absl::Status&)> vetted);
  // The sweep launches nothing more: its idle allocations go now, the others after their last
  // step.
  void SweepEnded(int64_t sweep_id);
  // It launches again: it may grow allocations again.
  void SweepReopened(int64_t sweep_id) { ended_sweeps_.erase(sweep_id); }
  // The sweep's quarantined nodes (all of them): its later steps go elsewhere, its later
  // allocations are requested without them, and one of its allocations whose every node is
  // quarantined counts no more (it is replaced when trials wait, and released once idle).
  void Exclude(int64_t sweep_id, std::set<std::string> nodes);
  // The daemon leaves its allocations to the next start: forget them without canceling.
  void Detach();

  // Whether allocation `job_id` ended under its steps: why (empty while it runs) and what took
  // it.
  struct Gone {
    std::string why;
    backend::Interruption interruption = backend::Interruption::kNone;
  };
  Gone WhyGone(uint32_t job_id) const;
  // When allocation `job_id` ends and why: its time limit (`at` is the end), or preemption
  // (`at` is when it began); nullopt while no end is known.
  struct Ending {
    absl::Time at;
    backend::Interruption why = backend::Interruption::kNone;
  };
  std::optional<Ending> EndOf(uint32_t job_id) const;
  // The sweep's trials are told to checkpoint `grace` before their allocation ends: its
  // replacement is asked for that much earlier.
  void NoteCheckpointGrace(int64_t sweep_id, absl::Duration grace);
  // What the pool expects the sweep's next allocation to wait in the queue.
  absl::Duration ExpectedWait(int64_t sweep_id) const;
  // Nothing to watch: no allocation, and none released whose end is still to be seen.
  bool empty() const { return allocs_.empty() && releasing_.empty(); }
  // Whether the agents tell hpod all it needs of every allocation now: each runs, with its end
  // known, no preemption seen, and its agent in touch (a released one until its grace ends);
  // none is being requested. Then slurmctld need only be asked now and then.
  bool CoveredByAgents(absl::Time now) const;
  // "2 allocation(s) held (1 running)".
  std::string Describe() const;

 private:
  struct Lease {
    uint32_t job_id = 0;
    std::vector<int> node_index;         // into the allocation's nodes
    std::vector<backend::Grant> grants;  // per node, in node_index order
    // Adopted before the allocation's nodes were known: held once they are.
    std::vector<std::string> pending_nodes;
    backend::Resources resources;
    std::string recorded_gpus;
  };
  struct Allocation {
    uint32_t job_id = 0;
    int64_t sweep_id = 0;
    backend::Placement placement;
    bool running = false;
    bool external = false;  // the user's own job (allocation.job): never canceled by hpod
    bool gone = false;      // ended under us
    std::string why_gone;
    backend::Interruption interruption = backend::Interruption::kNone;
    std::vector<std::string> nodes;
    std::vector<backend::ResourcePool> room;  // per node
    int steps = 0;
    absl::Time since;  // submitted, or idle since
    int polls_missing = 0;
    absl::Time ends_at = absl::InfiniteFuture();  // while running: slurmctld's end time
    bool times_known = false;  // slurmctld said it runs (not only its agent): ends_at is known
    absl::Time preempted_at = absl::InfinitePast();  // preemption began (GraceTime runs)
    bool ending = false;             // its replacement was asked for (see above); it counts no more
    bool quarantined = false;        // every node of it is (Exclude): it counts no more
    backend::AllocationUsage usage;  // what it costs; id empty until it runs
  };

  // The nodes of `a` where a step with `r` fits now (best fit) and has the time it needs, or
  // nullopt.
  std::optional<std::vector<int>> PickNodes(const Allocation& a, const backend::Resources& r,
                                            absl::Time now) const;
  // Whether `node` is quarantined for `sweep_id`.
  bool Excluded(int64_t sweep_id, const std::string& node) const;
  // Marks `a` quarantined when every node of it is.
  void CheckQuarantined(Allocation& a);
  // Notes the allocations that became ending (see above) and asks for their replacements.
  bool ReplaceEnding(absl::Time now);
  Allocation* FindRoom(int64_t sweep_id, const backend::Resources& r, std::vector<int>* nodes);
  // It runs on `nodelist`, as slurmctld (`st`) or its agent (no `st`) said.
  void Runs(Allocation& a, const std::string& nodelist, const JobStatus* st);
  // Holds the room of an adopted step once its allocation runs.
  void HoldAdopted(Allocation& a, Lease& lease);
  void Cancel(Allocation& a, const std::string& why);
  // Its cost starts to count (it runs: `st`, or the user's own job was taken), or ends at `at`.
  void OpenUsage(Allocation& a, const JobStatus* st);
  void CloseUsage(Allocation& a, absl::Time at);
  // The expected allocations no run of this daemon took back: when each ended (see Cost).
  void CloseExpected(const std::vector<JobStatus>& mine);
  void Erase(std::map<uint32_t, Allocation>::iterator it, const std::string& why);
  // `vetted`: RequestFirst's.
  bool Grow(int64_t sweep_id, const backend::Placement& placement, absl::Time now,
            std::function<void(const absl::Status&)> vetted = nullptr);
  std::string Name(int64_t sweep_id) const;

  SlurmApi& api_;
  SlurmCalls& calls_;
  // Sweeps whose allocation request is with slurmctld now (its job id not known yet).
  std::set<int64_t> submitting_;
  // Cancels allocation `job_id` (through calls_), logging what slurmctld refused.
  void CancelJob(int64_t sweep_id, uint32_t job_id);
  const Clock& clock_;
  std::string instance_;
  AgentLink agent_;
  std::map<uint32_t, Allocation> allocs_;    // by job id
  bool wants_times_ = false;                 // WantsTimes
  std::vector<PartitionLimits> partitions_;  // SetPartitions
  // How long an allocation of `placement` runs, as far as hpod knows without asking: the time
  // limit it asked for, else its partition's; nullopt when not known.
  std::optional<absl::Duration> TimeLimit(const backend::Placement& placement) const;
  // Allocations released through their agents, until slurmctld says they ended (or kReleaseGrace
  // passed, and they are canceled).
  struct Releasing {
    int64_t sweep_id = 0;
    absl::Time cancel_at;
  };
  std::map<uint32_t, Releasing> releasing_;
  static constexpr absl::Duration kReleaseGrace = absl::Seconds(30);
  void CheckReleased(const std::map<uint32_t, const JobStatus*>& by_id);
  // slurmctld answered the request for allocation `a` (the `held`+1-th of at most `max`).
  void Requested(Allocation a, const absl::StatusOr<uint32_t>& id, int held, int max,
                 const std::function<void(const absl::Status&)>& vetted);
  std::map<int64_t, Lease> leases_;                // by trial id
  std::map<int64_t, backend::Placement> demand_;   // sweeps with a trial that found no room
  std::map<int64_t, absl::Time> retry_submit_at_;  // sweeps whose allocation request failed
  std::set<int64_t> ended_sweeps_;
  std::map<int64_t, std::set<std::string>> excluded_;      // by sweep (Exclude)
  std::map<int64_t, std::vector<absl::Duration>> waits_;   // by sweep: measured queue waits
  std::map<int64_t, absl::Duration> grace_;                // by sweep: checkpoint grace
  std::map<uint32_t, backend::AllocationUsage> expected_;  // by job id (Expect)
  std::vector<backend::AllocationUsage> usage_out_;        // for TakeUsage
};

// The holder job of an allocation for a sweep (exposed for tests and CheckFits): it runs
// `agent`'s hpo-agent with `token` when there is one, else it only sleeps.
JobRequest AllocationRequest(const std::string& name, int64_t sweep_id, const backend::Placement& p,
                             const AgentLink& agent = {}, const std::string& token = "");
// The sweep's `slurm:` settings that any job hpod submits carries (a trial's job or a holder).
void ApplyPlacement(const backend::Placement& p, JobRequest& r);

}  // namespace hpo::slurm
