#pragma once
// SlurmApi: the narrow adapter over libslurm. LibSlurm (libslurm.cc) is the only code that
// includes <slurm/slurm.h>; everything else talks to this interface, so tests can substitute it.
//
// Thread safety: LibSlurm makes one call at a time (libslurm's own thread safety is not
// documented), so it may be called from several threads.
// Errors: UNAVAILABLE when slurmctld does not answer (retryable), RESOURCE_EXHAUSTED when it
// refuses for its RPC rate limit, INVALID_ARGUMENT when Slurm refuses a request (bad partition,
// impossible GRES...), with Slurm's own message.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hpo::slurm {

struct JobRequest {
  std::string name;
  std::string script;  // starts with #!
  std::string workdir;
  std::string stdout_path, stderr_path;
  std::vector<std::string> environment;  // KEY=VALUE
  int nodes = 1;
  int tasks_per_node = 1;
  int cpus_per_task = 1;
  int gpus_per_node = 0;
  std::string partition, account, qos, constraint, reservation;
  uint32_t time_limit_minutes = 0;  // 0: the partition's default
  int64_t memory_mb = 0;            // per node; 0: the site's default
  bool exclusive = false;
  std::string comment, licenses;
  // Slurm's own warning before the time limit (`sbatch --signal=B:SIG@SECONDS`): the batch
  // shell gets `warn_signal` `warn_seconds` before the end. 0: none.
  int warn_signal = 0;
  uint16_t warn_seconds = 0;
  bool append_output = false;  // stdout/stderr opened for appending (`--open-mode=append`)
  std::string exclude;         // nodes it may not run on (`--exclude`), comma-separated
};

enum class JobState {
  kPending,
  kRunning,
  kCompleted,
  kFailed,
  kCancelled,
  kTimeout,
  kNodeFail,
  kPreempted,
  kBootFail,
  kDeadline,
  kOutOfMemory,
  kOther
};

struct JobStatus {
  uint32_t job_id = 0;
  JobState state = JobState::kOther;
  uint32_t exit_code = 0;  // wait(2) status of the batch script
  std::string nodes;
  std::string name;
  // slurmctld's times: when the job was submitted, started and ends (for a running job with a
  // time limit, the time it will be ended; InfiniteFuture when it has none); when preemption
  // began (with GraceTime the job runs on for a while), if it did. InfinitePast when not known.
  absl::Time submit_time = absl::InfinitePast();
  absl::Time start_time = absl::InfinitePast();
  absl::Time end_time = absl::InfinitePast();
  absl::Time preempt_time = absl::InfinitePast();
};

// A partition's time limits, for the jobs that ask for none: `default_time` when the partition
// sets one, else `max_time`; absl::InfiniteDuration() for none (UNLIMITED).
struct PartitionLimits {
  std::string name;
  bool is_default = false;                     // where a job that names no partition runs
  std::optional<absl::Duration> default_time;  // nullopt: the partition sets none
  absl::Duration max_time = absl::InfiniteDuration();
  // How long a job without a time limit of its own may run here.
  absl::Duration JobLimit() const { return default_time.value_or(max_time); }
};

// A node of the cluster, as slurmctld names it and reaches it.
struct NodeHost {
  std::string name;      // NodeName
  std::string hostname;  // NodeHostname: the host's own name
  std::string addr;      // NodeAddr: where slurmctld reaches it
};

struct StepStatus {
  uint32_t job_id = 0;
  uint32_t step_id = 0;
  std::string name;
  std::string nodes;
};

class SlurmApi {
 public:
  virtual ~SlurmApi() = default;
  [[nodiscard]] virtual absl::StatusOr<uint32_t> Submit(const JobRequest& req) = 0;
  // Checks a request without submitting it (slurm_job_will_run, as `sbatch --test-only`): when
  // slurmctld expects it to start.
  [[nodiscard]] virtual absl::StatusOr<absl::Time> WillRun(const JobRequest& req) = 0;
  // The current user's jobs, in one call.
  [[nodiscard]] virtual absl::StatusOr<std::vector<JobStatus>> QueryMine() = 0;
  // The cluster's partitions and their time limits, in one call.
  [[nodiscard]] virtual absl::StatusOr<std::vector<PartitionLimits>> QueryPartitions() = 0;
  // Sends `signal` to every step of the job, the batch script included.
  [[nodiscard]] virtual absl::Status Signal(uint32_t job_id, int signal) = 0;
  [[nodiscard]] virtual absl::Status Cancel(uint32_t job_id) = 0;
  // The steps of job `job_id`, in one call (steps being set up are left out).
  [[nodiscard]] virtual absl::StatusOr<std::vector<StepStatus>> QuerySteps(uint32_t job_id) = 0;
  // Sends `signal` to the step's tasks only.
  [[nodiscard]] virtual absl::Status SignalStep(uint32_t job_id, uint32_t step_id, int signal) = 0;
  // Ends the step (what `scancel J.S` does).
  [[nodiscard]] virtual absl::Status CancelStep(uint32_t job_id, uint32_t step_id) = 0;
  // The cluster's nodes, in one call.
  [[nodiscard]] virtual absl::StatusOr<std::vector<NodeHost>> QueryNodes() = 0;
  // "n[1-3],gpu7" -> n1 n2 n3 gpu7.
  virtual std::vector<std::string> ExpandHostlist(const std::string& list) = 0;
};

// The real thing. `conf`: path of slurm.conf, or "" for $SLURM_CONF / the default.
std::unique_ptr<SlurmApi> MakeLibSlurm(const std::string& conf);

}  // namespace hpo::slurm
