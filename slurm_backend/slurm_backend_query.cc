// SlurmBackend::QueryThread: the batched query of the user's jobs, on a thread of its own so that
// a slow slurmctld never holds up the controller. The rest is in slurm_backend.cc.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "slurm_backend/slurm_backend.h"
#include "spdlog/spdlog.h"

namespace hpo::slurm {

SlurmBackend::QueryThread::QueryThread(SlurmApi& api) : api_(api) {
  thread_ = std::thread([this] { Loop(); });
}

SlurmBackend::QueryThread::~QueryThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SlurmBackend::QueryThread::SetWakeup(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  wake_ = std::move(wake);
}

void SlurmBackend::QueryThread::Ask() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    asked_ = busy_ = true;
  }
  cv_.notify_all();
}

bool SlurmBackend::QueryThread::Busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

std::optional<absl::StatusOr<std::vector<JobStatus>>> SlurmBackend::QueryThread::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<absl::StatusOr<std::vector<JobStatus>>> out;
  out.swap(answer_);
  return out;
}

void SlurmBackend::QueryThread::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return asked_ || stopping_; });
    if (stopping_) return;
    asked_ = false;
    lock.unlock();
    absl::StatusOr<std::vector<JobStatus>> mine = api_.QueryMine();
    lock.lock();
    answer_ = std::move(mine);
    busy_ = false;
    if (wake_) wake_();
  }
}

}  // namespace hpo::slurm
