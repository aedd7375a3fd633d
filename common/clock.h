#pragma once
// Clock: the one source of time for the daemon, its controller and its backends, so that tests
// and benchmarks can run in virtual time.
//
// Thread safety: SystemClock is thread-safe. FakeClock is thread-safe; Advance() is meant to be
// called by the test that drives it.

#include <atomic>
#include <mutex>

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
};

// Wall time.
class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  // A process-wide instance.
  static SystemClock& Get();
};

// Virtual time that moves only when told to.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    std::lock_guard lock(mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    std::lock_guard lock(mu_);
    now_ = t;
  }

 private:
  mutable std::mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hpo
