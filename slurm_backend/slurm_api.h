#pragma once
// SlurmApi: the narrow adapter over libslurm. LibSlurm (libslurm.cc) is the only code that
// includes <slurm/slurm.h>; everything else talks to this interface, so tests can substitute it.
//
// Thread safety: libslurm's is unknown; call from one thread (the controller's).
// Errors: UNAVAILABLE when slurmctld does not answer (retryable), INVALID_ARGUMENT when Slurm
// refuses a request (bad partition, impossible GRES...), with Slurm's own message.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hpo::backend {

struct JobRequest {
  std::string name;
  std::string script;                    // starts with #!
  std::string workdir;
  std::string stdout_path, stderr_path;
  std::vector<std::string> environment;  // KEY=VALUE
  int nodes = 1;
  int tasks_per_node = 1;
  int cpus_per_task = 1;
  int gpus_per_node = 0;
  std::string partition, account, qos, constraint, reservation;
  uint32_t time_limit_minutes = 0;       // 0: the partition's default
};

enum class JobState { kPending, kRunning, kCompleted, kFailed, kCancelled, kTimeout, kNodeFail,
                      kPreempted, kBootFail, kDeadline, kOutOfMemory, kOther };

struct JobStatus {
  uint32_t job_id = 0;
  JobState state = JobState::kOther;
  uint32_t exit_code = 0;  // wait(2) status of the batch script
  std::string nodes;
};

class SlurmApi {
 public:
  virtual ~SlurmApi() = default;
  virtual absl::StatusOr<uint32_t> Submit(const JobRequest& req) = 0;
  // Checks a request without submitting it (slurm_job_will_run).
  virtual absl::Status WillRun(const JobRequest& req) = 0;
  // The current user's jobs, in one call.
  virtual absl::StatusOr<std::vector<JobStatus>> QueryMine() = 0;
  // Sends `signal` to every step of the job, the batch script included.
  virtual absl::Status Signal(uint32_t job_id, int signal) = 0;
  virtual absl::Status Cancel(uint32_t job_id) = 0;
};

// The real thing. `conf`: path of slurm.conf, or "" for $SLURM_CONF / the default.
std::unique_ptr<SlurmApi> MakeLibSlurm(const std::string& conf);

}  // namespace hpo::backend
