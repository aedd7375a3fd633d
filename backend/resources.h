#pragma once
// What a trial asks for (Resources), where it runs (Placement), and an allocation's use
// (AllocationUsage): the values a sweep file declares, every backend reads and the store keeps.
// Plain values, no behaviour: the sweep-file parser and the store use them without linking any
// backend.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"

namespace hpo::backend {

// What one trial asks for.
struct Resources {
  int gpus = 0;           // per node (gpus_per_task x tasks_per_node when that is set)
  int gpus_per_task = 0;  // not 0: each task gets its own GPUs (Slurm: --gpus-per-task)
  int cpus = 1;           // per task
  int nodes = 1;
  int tasks_per_node = 1;
  // The most one segment of the trial may run (the sweep's `resources.time_limit`): given to
  // Slurm as the step's or the job's time limit. 0: no limit of its own.
  absl::Duration time_limit = absl::ZeroDuration();
  // How long the trial must be able to run where it starts: an allocation that ends sooner does
  // not take it. 0: any (a resumable trial, or one whose length nothing foretells).
  absl::Duration needs = absl::ZeroDuration();
};

// The allocations hpod holds for a sweep in Slurm `steps` mode (the sweep's `slurm.allocation`).
// The sweep spec fills every field from the trials' resources when the file leaves it out.
struct AllocationShape {
  int nodes = 1;
  int gpus_per_node = 0;
  int cpus_per_node = 1;
  int64_t memory_mb = 0;  // per node; 0: the site's default. Steps get an even share per CPU.
  int max = 1;            // allocations the pool may grow to
  absl::Duration idle_timeout = absl::Seconds(30);  // an allocation with no steps goes after this
  uint32_t job = 0;  // not 0: use this running job of the user's (salloc, sbatch) instead;
                     // hpod neither requests more nor cancels it
};

// Where a trial runs: which backend, and on a Slurm cluster where (the sweep's `slurm:`
// section, which the local backend ignores).
struct Placement {
  // The backend that runs the trial ("local", "slurm"; the sweep's `backend:`): a Router hands
  // the trial to it. Empty: the daemon's default. A single backend ignores it.
  std::string backend;
  std::string mode = "steps";  // "steps": steps in allocations hpod holds; "jobs": a job per trial
  std::string partition, account, qos, constraint, reservation;
  int time_limit_minutes = 0;  // 0: the partition's default (per allocation, or per trial job)
  AllocationShape allocation;  // steps mode
  bool exclusive = false;      // whole nodes (sbatch --exclusive)
  std::string comment, licenses;
};

// An allocation a backend holds for a sweep (Slurm steps mode): its trials run in it, and the
// site charges it from its start to its end whether they do or not.
struct AllocationUsage {
  std::string id;  // the backend's, unique within it ("slurm:1234")
  int64_t sweep_id = 0;
  int gpus = 0;  // over all its nodes
  int nodes = 0;
  absl::Time started_at;
  std::optional<absl::Time> ended_at;           // nullopt while it is held
  absl::Time ends_at = absl::InfiniteFuture();  // while held: when its time limit ends it
};

}  // namespace hpo::backend
