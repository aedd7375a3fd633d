// Clock's timers (common/clock.h): a thread waiting on a FakeClock wakes when virtual time
// reaches its deadline, however little real time passed; on the SystemClock it wakes in real
// time; either wakes as soon as what it waits for holds.
#include "common/clock.h"

#include <thread>

#include "gtest/gtest.h"

namespace hpo {
namespace {

TEST(FakeClockTimer, WakesWhenVirtualTimeReachesTheDeadline) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  const absl::Time deadline = clock.Now() + absl::Hours(1);
  std::atomic<bool> woke{false};
  std::thread waiter([&] {
    std::unique_lock lock(mu);
    clock.WaitUntil(lock, cv, deadline, [] { return false; });
    woke = true;
  });
  clock.Advance(absl::Minutes(59));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(woke) << "an hour of virtual time has not passed";
  absl::Time real = absl::Now();
  clock.Advance(absl::Minutes(1));
  waiter.join();
  EXPECT_TRUE(woke);
  EXPECT_LT(absl::Now() - real, absl::Seconds(5)) << "woken by the clock, not by real time";
}

TEST(FakeClockTimer, WakesWhenWhatItWaitsForHolds) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  std::thread waiter([&] {
    std::unique_lock lock(mu);
    EXPECT_TRUE(clock.WaitUntil(lock, cv, clock.Now() + absl::Hours(1), [&] { return ready; }));
  });
  {
    std::lock_guard lock(mu);
    ready = true;
  }
  cv.notify_all();
  waiter.join();
}

TEST(FakeClockTimer, ADeadlineInThePastReturnsAtOnce) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock lock(mu);
  EXPECT_FALSE(clock.WaitUntil(lock, cv, clock.Now(), [] { return false; }));
  EXPECT_TRUE(lock.owns_lock());
}

TEST(SystemClockTimer, WaitsInRealTime) {
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock lock(mu);
  absl::Time start = absl::Now();
  EXPECT_FALSE(
      SystemClock::Get().WaitUntil(lock, cv, start + absl::Milliseconds(50), [] { return false; }));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(45));
  EXPECT_TRUE(lock.owns_lock());
}

}  // namespace
}  // namespace hpo
