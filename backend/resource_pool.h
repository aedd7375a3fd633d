#pragma once
// ResourcePool: the GPUs and CPU slots of one node, handed out so that no two trials ever hold
// the same GPU. The local and simulated backends hand out this machine's; the Slurm backend
// keeps one per node of each allocation it holds. Thread-compatible.

#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace hpo::backend {

struct Grant {
  std::vector<int> gpus;  // GPU indices
  int cpus = 0;
  std::string CudaVisibleDevices() const;  // "0,2"; "" for none
};

class ResourcePool {
 public:
  ResourcePool(int gpus, int cpus);
  // A grant when `r` fits now (single-node view: gpus, cpus * tasks_per_node), else nullopt.
  std::optional<Grant> Acquire(const Resources& r);
  // Exactly these GPUs (those out of range are dropped) and CPUs, even when that overcommits:
  // a trial re-adopted after a restart keeps what it holds.
  Grant AcquireExact(const std::vector<int>& gpus, int cpus);
  void Release(const Grant& g);
  bool Fits(const Resources& r) const;
  [[nodiscard]] absl::Status CheckFits(const Resources& r) const;
  int total_gpus() const { return static_cast<int>(gpu_free_.size()); }
  int total_cpus() const { return total_cpus_; }
  int free_cpus() const { return free_cpus_; }
  int free_gpus() const;
  bool IsFree(int gpu) const {
    return gpu >= 0 && gpu < total_gpus() && gpu_free_[static_cast<size_t>(gpu)];
  }

 private:
  std::vector<bool> gpu_free_;
  int total_cpus_;
  int free_cpus_;
};

}  // namespace hpo::backend
