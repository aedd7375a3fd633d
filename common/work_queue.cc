#include "common/work_queue.h"

#include <sys/resource.h>
#include <unistd.h>

#include <utility>

namespace hpo {

WorkQueue::~WorkQueue() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    jobs_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WorkQueue::Run(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    jobs_.push_back(std::move(job));
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  }
  cv_.notify_all();
}

void WorkQueue::Loop() {
  // Best effort: a thread that may not lower its priority runs at the process's.
  if (priority_ == Priority::kBackground) (void)::setpriority(PRIO_PROCESS, ::gettid(), 19);
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (stopping_) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    job = nullptr;  // what it held goes on this thread, before the next
    lock.lock();
  }
}

}  // namespace hpo
