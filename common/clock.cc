#include "common/clock.h"

#include <chrono>

namespace hpo {

SystemClock& SystemClock::Get() {
  static SystemClock clock;
  return clock;
}

bool SystemClock::WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                            absl::Time deadline, const std::function<bool()>& done) const {
  // The condition variable waits on the steady clock: the wall clock may step meanwhile.
  absl::Duration left = deadline - Now();
  if (left <= absl::ZeroDuration()) return done();
  auto until = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(left);
  return cv.wait_until(lock, until, done);
}

bool FakeClock::WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          absl::Time deadline, const std::function<bool()>& done) const {
  Waiter me{lock.mutex(), &cv};
  lock.unlock();
  {
    std::lock_guard waiters(waiters_mu_);
    waiters_.insert(&me);
  }
  lock.lock();
  while (!done() && Now() < deadline) cv.wait(lock);
  lock.unlock();
  {
    std::lock_guard waiters(waiters_mu_);
    waiters_.erase(&me);
  }
  lock.lock();
  return done();
}

void FakeClock::Advance(absl::Duration d) {
  {
    std::lock_guard lock(mu_);
    now_ += d;
  }
  WakeWaiters();
}

void FakeClock::Set(absl::Time t) {
  {
    std::lock_guard lock(mu_);
    now_ = t;
  }
  WakeWaiters();
}

void FakeClock::WakeWaiters() {
  std::lock_guard waiters(waiters_mu_);
  for (Waiter* w : waiters_) {
    // Taking the waiter's mutex means it is either before its check (and sees the new time) or
    // inside cv.wait (and gets this notification): no wake-up is lost.
    std::lock_guard its(*w->mu);
    w->cv->notify_all();
  }
}

}  // namespace hpo
