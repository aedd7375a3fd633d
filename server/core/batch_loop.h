#pragma once
// BatchLoop: the controller's single writer thread. It takes all the work posted since the last
// batch, runs it inside one store transaction, runs a tick when one is due, commits, and only
// then hands the work's continuations (which send the replies) to a completer thread, in order,
// with the commit's status. So an answered report is durable, many reports share one commit
// (group commit), and the next batch's work overlaps with sending this batch's replies.
//
// Threads: Start() starts the loop and the completer. Post and Wake are thread-safe; the work,
// the tick and `committed` run on the loop's thread. RunOnce (tests in virtual time, and
// shutdown) runs one batch, with a tick, on the calling thread and completes inline.
// Errors: a failed Begin or Commit is passed to `committed` and to every continuation.

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "server/store/store.h"

namespace hpo::server {

class BatchLoop {
 public:
  // Runs after the batch it ran in has been committed, with the commit's status.
  using Done = std::function<void(const absl::Status& commit)>;
  // Runs inside the batch's transaction; returns its continuation (or null).
  using Work = std::function<Done()>;
  struct Hooks {
    std::function<void()> tick;                                 // inside the transaction
    std::function<void(const absl::Status& commit)> committed;  // after the commit
    std::function<void(double seconds)> measured;  // a batch's duration, start to commit
  };

  BatchLoop(Store& store, const Clock& clock, absl::Duration tick, Hooks hooks);
  ~BatchLoop();  // Stop()
  BatchLoop(const BatchLoop&) = delete;
  BatchLoop& operator=(const BatchLoop&) = delete;

  void Start();
  // Finishes the current batch, completes what is queued for the completer and joins both
  // threads. Work posted afterwards is dropped.
  void Stop();
  void Post(Work work);
  // Runs a tick as soon as the loop is free (something happened that it should look at).
  void Wake();
  // Runs the queued work and one tick as one batch on this thread.
  void RunOnce();
  // Runs `work` alone, without a tick, as one batch on this thread (the daemon's last).
  void RunLast(std::vector<Work> work);

 private:
  void Loop();
  void CompleterLoop();
  void RunBatch(std::vector<Work>& batch, bool tick);

  Store& store_;
  const Clock& clock_;
  const absl::Duration tick_;
  Hooks hooks_;
  absl::Time next_tick_;  // the loop's thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Work> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool tick_requested_ ABSL_GUARDED_BY(mu_) = false;  // Wake
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;         // the loop sleeps on cv_
  std::thread thread_;

  // Continuations of committed batches, run in order on the completer thread.
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  std::vector<std::pair<std::vector<Done>, absl::Status>> done_queue_ ABSL_GUARDED_BY(done_mu_);
  bool done_stopping_ ABSL_GUARDED_BY(done_mu_) = false;
  std::thread completer_;
};

}  // namespace hpo::server
