#include "slurm_backend/slurm_calls.h"

#include <utility>

namespace hpo::slurm {

SlurmCalls::SlurmCalls(bool thread) : threaded_(thread) {
  if (threaded_) thread_ = std::thread([this] { Loop(); });
}

SlurmCalls::~SlurmCalls() {
  if (!threaded_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SlurmCalls::Post(Call call) {
  if (!threaded_) {
    if (Then then = call()) then();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.push_back(std::move(call));
  }
  cv_.notify_all();
}

void SlurmCalls::RunDone() {
  std::deque<Then> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.swap(done_);
  }
  for (Then& then : done) then();
}

bool SlurmCalls::Idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_.empty() && done_.empty() && !busy_;
}

void SlurmCalls::SetWakeup(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  wake_ = std::move(wake);
}

void SlurmCalls::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return !waiting_.empty() || stopping_; });
    if (waiting_.empty()) return;  // stopping, and every call made
    Call call = std::move(waiting_.front());
    waiting_.pop_front();
    busy_ = true;
    lock.unlock();
    Then then = call();
    lock.lock();
    busy_ = false;
    if (then && !stopping_) {
      done_.push_back(std::move(then));
      if (wake_) wake_();
    }
  }
}

}  // namespace hpo::slurm
