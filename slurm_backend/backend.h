#pragma once
// Backend: runs trials somewhere (local processes, Slurm steps, a simulation).
//
// Every method is called from the controller's thread only; implementations need no locking
// of their own for these calls. Launch and Stop return at once; what happens afterwards arrives
// as BackendEvents from Poll(), which the controller calls on every tick.
//
// Errors: Launch returns RESOURCE_EXHAUSTED when the trial does not fit now, INVALID_ARGUMENT
// for a spec the backend can never run, UNAVAILABLE when the backend is temporarily away.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hpo::backend {

// What one trial asks for.
struct Resources {
  int gpus = 0;            // per node
  int cpus = 1;            // per task
  int nodes = 1;
  int tasks_per_node = 1;
};

// Where a trial may run on a Slurm cluster (the sweep's `slurm:` section). The local backend
// ignores it.
struct Placement {
  std::string mode = "jobs";  // "jobs": one batch job per trial; "steps": steps in allocations
  std::string partition, account, qos, constraint, reservation;
  int time_limit_minutes = 0;  // 0: the partition's default
};

struct LaunchSpec {
  int64_t trial_id = 0;
  int64_t sweep_id = 0;
  std::vector<std::string> argv;           // argv[0] is looked up in the trial's PATH
  std::map<std::string, std::string> env;  // set on top of the daemon's environment
  std::string workdir;                     // absolute
  std::string trial_dir;                   // absolute; exists; logs go here
  Resources resources;
  Placement placement;
};

struct BackendEvent {
  enum class Kind {
    kStarted,  // the trial's process runs; backend_id and gpus are set
    kExited,   // the process ended; exit_code / term_signal say how
    kLost,     // the backend can no longer tell what happened (infrastructure failure)
  };
  Kind kind = Kind::kStarted;
  int64_t trial_id = 0;
  absl::Time time;
  int exit_code = 0;       // kExited: the exit status, or -1 when killed by a signal
  int term_signal = 0;     // kExited: the signal that ended it, 0 if none
  bool stop_requested = false;  // kExited: Stop() had been called for it
  std::string backend_id;  // kStarted: e.g. "local:pid=1234"
  std::string gpus;        // kStarted: the CUDA_VISIBLE_DEVICES it got
  std::string message;     // human-readable detail (exec failure, loss reason)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string Name() const = 0;
  // OK when a trial with `r` could ever run here; INVALID_ARGUMENT saying why not otherwise.
  virtual absl::Status CheckFits(const Resources& r, const Placement& p) = 0;
  // True when a trial with `r` can start now.
  virtual bool CanLaunch(const Resources& r) const = 0;
  // Starts the trial. After OK, Poll() eventually reports kStarted and later kExited or kLost.
  virtual absl::Status Launch(const LaunchSpec& spec) = 0;
  // Asks a running trial to end: SIGTERM (or the configured signal), after `grace` SIGKILL.
  // NOT_FOUND when the backend does not know the trial (already ended).
  virtual absl::Status Stop(int64_t trial_id, absl::Duration grace) = 0;
  // Events since the last call, oldest first. Also drives the backend's own timers.
  virtual std::vector<BackendEvent> Poll() = 0;
  // A trial the store says was running when the daemon last stopped. This backend cannot
  // re-adopt it: end whatever is left of it so that it does not run unaccounted.
  virtual void Reclaim(int64_t trial_id, const std::string& backend_id) = 0;
  // Number of trials the backend is running.
  virtual int Running() const = 0;
  // Capacity for summaries ("4 GPUs, 8 CPUs").
  virtual std::string Describe() const = 0;
};

}  // namespace hpo::backend
