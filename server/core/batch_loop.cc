#include "server/core/batch_loop.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>

#include "spdlog/spdlog.h"

namespace hpo::server {

BatchLoop::BatchLoop(Store& store, const Clock& clock, absl::Duration tick, Hooks hooks)
    : store_(store),
      clock_(clock),
      tick_(tick),
      hooks_(std::move(hooks)),
      next_tick_(clock.Now()) {}

BatchLoop::~BatchLoop() { Stop(); }

void BatchLoop::Start() {
  // Named, so that top -H and perf tell them apart from gRPC's threads.
  completer_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hpod-reply");
    CompleterLoop();
  });
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hpod-control");
    Loop();
  });
}

void BatchLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard lock(done_mu_);
    done_stopping_ = true;
  }
  done_cv_.notify_all();
  if (completer_.joinable()) completer_.join();
}

void BatchLoop::Post(Work work) {
  bool wake;
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(work));
    wake = waiting_;  // a busy loop takes the queue when its batch is done: no syscall needed
  }
  if (wake) cv_.notify_one();
}

void BatchLoop::Wake() {
  bool wake;
  {
    std::lock_guard lock(mu_);
    tick_requested_ = true;
    wake = waiting_;
  }
  if (wake) cv_.notify_one();
}

void BatchLoop::RunOnce() {
  std::vector<Work> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(queue_);
  }
  RunBatch(batch, true);
}

void BatchLoop::RunLast(std::vector<Work> work) { RunBatch(work, false); }

void BatchLoop::Loop() {
  std::vector<Work> batch;
  while (true) {
    bool tick = false;
    {
      std::unique_lock lock(mu_);
      // The next tick is a time on the controller's clock: in virtual time, advancing the clock
      // past it wakes the loop.
      waiting_ = true;
      clock_.WaitUntil(lock, cv_, next_tick_,
                       [&] { return !queue_.empty() || stopping_ || tick_requested_; });
      waiting_ = false;
      if (stopping_) break;
      batch.swap(queue_);
      tick = tick_requested_;
      tick_requested_ = false;
    }
    if (tick || clock_.Now() >= next_tick_) {
      tick = true;
      next_tick_ = clock_.Now() + tick_;
    }
    RunBatch(batch, tick);
    batch.clear();
  }
}

void BatchLoop::RunBatch(std::vector<Work>& batch, bool tick) {
  auto started = std::chrono::steady_clock::now();
  absl::Status begin = store_.Begin();
  if (!begin.ok()) spdlog::error("store: {}", begin.ToString());
  std::vector<Done> dones;
  dones.reserve(batch.size());
  for (Work& work : batch) {
    if (Done done = work()) dones.push_back(std::move(done));
  }
  if (tick && hooks_.tick) hooks_.tick();
  absl::Status commit = begin.ok() ? store_.Commit() : begin;
  if (hooks_.measured) {
    hooks_.measured(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  if (hooks_.committed) hooks_.committed(commit);
  if (dones.empty()) return;
  if (!completer_.joinable()) {  // RunOnce: complete inline
    for (Done& done : dones) done(commit);
    return;
  }
  {
    std::lock_guard lock(done_mu_);
    done_queue_.emplace_back(std::move(dones), commit);
  }
  done_cv_.notify_one();
}

void BatchLoop::CompleterLoop() {
  while (true) {
    std::vector<std::pair<std::vector<Done>, absl::Status>> work;
    {
      std::unique_lock lock(done_mu_);
      done_cv_.wait(lock, [&] { return !done_queue_.empty() || done_stopping_; });
      if (done_queue_.empty() && done_stopping_) return;
      work.swap(done_queue_);
    }
    for (auto& [dones, commit] : work) {
      for (Done& done : dones) done(commit);
    }
  }
}

}  // namespace hpo::server
