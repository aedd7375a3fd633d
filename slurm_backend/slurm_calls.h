#pragma once
// SlurmCalls: where SlurmBackend's calls to slurmctld run (submits, signals, cancels, step
// queries), so that a slow or rate-limiting slurmctld never holds up the controller's thread.
//
// With a thread, each call runs on it in the order posted, one at a time; what the caller wants
// done with the answer (the call's continuation) runs on the controller's thread at its next
// RunDone (SlurmBackend::Poll). Without one (unit tests over a scripted slurmctld), each call
// and its continuation run at once, on the caller's thread, as if slurmctld answered instantly.
//
// The destructor runs every call still queued (the cancels of a stopping hpod must reach
// slurmctld) and drops their continuations.
//
// Thread safety: Post, RunDone, Idle and SetWakeup may be called from any one thread (the
// controller's); the calls themselves run on the worker.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace hpo::slurm {

class SlurmCalls {
 public:
  using Then = std::function<void()>;  // a continuation; may be empty
  using Call = std::function<Then()>;

  explicit SlurmCalls(bool thread);
  ~SlurmCalls();
  SlurmCalls(const SlurmCalls&) = delete;
  SlurmCalls& operator=(const SlurmCalls&) = delete;

  void Post(Call call);
  // Runs the continuations of the calls that finished, oldest first.
  void RunDone();
  // No call waits or runs, and no continuation waits.
  bool Idle() const;
  // Called (on the worker) after each call that left a continuation.
  void SetWakeup(std::function<void()> wake);

 private:
  void Loop();

  const bool threaded_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Call> waiting_;
  std::deque<Then> done_;
  bool busy_ = false;
  bool stopping_ = false;
  std::function<void()> wake_;
  std::thread thread_;
};

}  // namespace hpo::slurm
