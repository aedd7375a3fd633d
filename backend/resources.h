#pragma once
// What a trial asks for (Resources), where it runs (Placement, with what only its backend reads),
// and an allocation's use (AllocationUsage): the values a sweep file declares, every backend
// reads and the store keeps.
// Plain values, no behaviour: the sweep-file parser and the store use them without linking any
// backend.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

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

// What one backend reads of where a trial runs, beyond its name (the Slurm backend's partition
// and allocation shape, slurm_backend/slurm_placement.h): defined by that backend, carried as is
// by everything else.
struct BackendPlacement {
  virtual ~BackendPlacement() = default;
  // The backend these settings are for ("slurm").
  virtual std::string_view Backend() const = 0;
  // True when that backend runs the trials in allocations it holds for the sweep, which the site
  // charges whether trials run in them or not.
  virtual bool InAllocations() const { return false; }
};

// Where a trial runs: which backend, and what that backend alone reads (the sweep file's
// section for it, e.g. `slurm:`).
struct Placement {
  // The backend that runs the trial ("local", "slurm"; the sweep's `backend:`): a Router hands
  // the trial to it. Empty: the daemon's default. A single backend ignores it.
  std::string backend;
  // Its backend's own settings, shared and never changed once made; null: that backend's
  // defaults. A backend reads only settings of its own kind.
  std::shared_ptr<const BackendPlacement> details;
  // True when the backend named runs trials in allocations it holds (see BackendPlacement).
  bool InAllocations(std::string_view resolved_backend) const {
    return details != nullptr && details->Backend() == resolved_backend && details->InAllocations();
  }
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
