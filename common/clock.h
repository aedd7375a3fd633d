#pragma once
// Clock: the one source of time for the daemon, its controller and its backends, so that tests
// and benchmarks can run in virtual time: what time it is, and waiting until a time.
//
// Thread safety: SystemClock is thread-safe. FakeClock is thread-safe; Advance() and Set() are
// meant to be called by the test that drives it, and wake every thread waiting on it.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace hpo {

// Seconds since the Unix epoch, with fractions (the store's and the dashboard's times).
inline double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // A timer: blocks on `cv`, with `lock` held on entry and on return, until `done()` holds or
  // this clock reaches `deadline`; returns done(). Whoever makes `done()` true notifies `cv`
  // as with any condition variable; the clock's time wakes it by itself.
  virtual bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                         absl::Time deadline, const std::function<bool()>& done) const = 0;
};

// Wall time.
class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 absl::Time deadline, const std::function<bool()>& done) const override;
  // A process-wide instance.
  static SystemClock& Get();
};

// Virtual time that moves only when told to. A thread waiting on it (WaitUntil) wakes when its
// deadline is reached by Advance or Set, however little real time passed.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 absl::Time deadline, const std::function<bool()>& done) const override;
  void Advance(absl::Duration d);
  void Set(absl::Time t);

 private:
  struct Waiter {
    std::mutex* mu;
    std::condition_variable* cv;
  };
  void WakeWaiters();

  mutable std::mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  // Threads in WaitUntil. Lock order: waiters_mu_, then a waiter's own mutex; a waiter takes
  // waiters_mu_ only with its own mutex released.
  mutable std::mutex waiters_mu_;
  mutable std::set<Waiter*> waiters_ ABSL_GUARDED_BY(waiters_mu_);
};

}  // namespace hpo
