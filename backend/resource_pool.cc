#include "backend/resource_pool.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hpo::backend {

std::string Grant::CudaVisibleDevices() const { return absl::StrJoin(gpus, ","); }

ResourcePool::ResourcePool(int gpus, int cpus)
    : gpu_free_(static_cast<size_t>(std::max(gpus, 0)), true),
      total_cpus_(std::max(cpus, 1)),
      free_cpus_(total_cpus_) {}

int ResourcePool::free_gpus() const {
  int n = 0;
  for (bool f : gpu_free_) n += f ? 1 : 0;
  return n;
}

bool ResourcePool::Fits(const Resources& r) const {
  return r.gpus <= free_gpus() && r.cpus * r.tasks_per_node <= free_cpus_;
}

absl::Status ResourcePool::CheckFits(const Resources& r) const {
  if (r.nodes > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resources.nodes is ", r.nodes, " but the local backend runs on one node; use Slurm"));
  }
  if (r.gpus > total_gpus()) {
    return absl::InvalidArgumentError(absl::StrCat("resources.gpus is ", r.gpus,
                                                   " but this machine has ", total_gpus(),
                                                   " GPU(s) (hpod --gpus sets the count)"));
  }
  if (r.cpus * r.tasks_per_node > total_cpus_) {
    return absl::InvalidArgumentError(absl::StrCat("a trial asks for ", r.cpus * r.tasks_per_node,
                                                   " CPU(s) but hpod has ", total_cpus_,
                                                   " (hpod --cpus sets the count)"));
  }
  return absl::OkStatus();
}

std::optional<Grant> ResourcePool::Acquire(const Resources& r) {
  if (!Fits(r)) return std::nullopt;
  Grant g;
  for (size_t i = 0; i < gpu_free_.size() && static_cast<int>(g.gpus.size()) < r.gpus; ++i) {
    if (gpu_free_[i]) {
      gpu_free_[i] = false;
      g.gpus.push_back(static_cast<int>(i));
    }
  }
  g.cpus = r.cpus * r.tasks_per_node;
  free_cpus_ -= g.cpus;
  return g;
}

Grant ResourcePool::AcquireExact(const std::vector<int>& gpus, int cpus) {
  Grant g;
  for (int i : gpus) {
    if (i < 0 || i >= total_gpus() || !gpu_free_[static_cast<size_t>(i)]) continue;
    gpu_free_[static_cast<size_t>(i)] = false;
    g.gpus.push_back(i);
  }
  g.cpus = cpus;
  free_cpus_ -= cpus;
  return g;
}

void ResourcePool::Release(const Grant& g) {
  for (int i : g.gpus) gpu_free_[static_cast<size_t>(i)] = true;
  free_cpus_ += g.cpus;
}

}  // namespace hpo::backend
