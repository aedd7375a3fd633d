#pragma once
// Where a trial runs on a Slurm cluster: the sweep file's `slurm:` section, as the Slurm backend
// reads it. Carried opaquely by everything else (backend::Placement::details): the sweep-file
// parser fills it, the core passes it along, and only the Slurm backend looks inside.
// Plain values, header-only: the parser links no Slurm.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "backend/resources.h"

namespace hpo::slurm {

// The allocations hpod holds for a sweep in `steps` mode (the sweep's `slurm.allocation`). The
// sweep spec fills every field from the trials' resources when the file leaves it out.
struct AllocationShape {
  int nodes = 1;
  int gpus_per_node = 0;
  int cpus_per_node = 1;
  int64_t memory_mb = 0;  // per node; 0: the site's default. Steps get an even share per CPU.
  int max = 1;            // allocations the pool may grow to
  absl::Duration idle_timeout = absl::Seconds(30);  // an allocation with no steps goes after this
  uint32_t job = 0;  // not 0: use this running job of the user's (salloc, sbatch) instead;
                     // hpod neither requests more nor cancels it

  // A step's even share of a node's memory per CPU (--mem-per-cpu); 0: none set.
  int64_t MemPerCpuMb() const {
    return memory_mb > 0 ? memory_mb / (cpus_per_node > 1 ? cpus_per_node : 1) : 0;
  }
};

struct SlurmPlacement final : backend::BackendPlacement {
  std::string mode = "steps";  // "steps": steps in allocations hpod holds; "jobs": a job per trial
  std::string partition, account, qos, constraint, reservation;
  int time_limit_minutes = 0;  // 0: the partition's default (per allocation, or per trial job)
  AllocationShape allocation;  // steps mode
  bool exclusive = false;      // whole nodes (sbatch --exclusive)
  std::string comment, licenses;

  std::string_view Backend() const override { return "slurm"; }
  bool InAllocations() const override { return mode == "steps"; }
};

// The Slurm settings of a placement: its own, or the defaults when it carries none.
inline const SlurmPlacement& SlurmOf(const backend::Placement& p) {
  static const SlurmPlacement kDefaults;
  const auto* own = dynamic_cast<const SlurmPlacement*>(p.details.get());
  return own != nullptr ? *own : kDefaults;
}

// A placement on Slurm with these settings.
inline backend::Placement OnSlurm(SlurmPlacement settings) {
  backend::Placement p;
  p.backend = "slurm";
  p.details = std::make_shared<const SlurmPlacement>(std::move(settings));
  return p;
}

}  // namespace hpo::slurm
