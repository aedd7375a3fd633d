// SlurmCalls: calls to slurmctld off the controller's thread, their answers back on it.
#include "slurm_backend/slurm_calls.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace hpo::slurm {
namespace {

// Waits until `calls` has run everything posted and its continuations are taken.
void Drain(SlurmCalls& calls) {
  for (int i = 0; i < 500 && !calls.Idle(); ++i) {
    calls.RunDone();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  calls.RunDone();
}

TEST(SlurmCallsTest, CallsRunInOrderOffThisThreadAndTheirAnswersComeBackOnIt) {
  SlurmCalls calls(/*thread=*/true);
  std::atomic<int> woken{0};
  calls.SetWakeup([&] { ++woken; });
  const std::thread::id here = std::this_thread::get_id();
  std::vector<int> made;  // touched by the worker only, then read after Drain
  std::vector<int> answered;
  std::vector<bool> on_worker;
  for (int i = 0; i < 5; ++i) {
    calls.Post([&, i]() -> SlurmCalls::Then {
      on_worker.push_back(std::this_thread::get_id() != here);
      made.push_back(i);
      if (i % 2 == 1) return nullptr;  // a call without continuation (a cancel)
      return [&, i] {
        EXPECT_EQ(std::this_thread::get_id(), here);
        answered.push_back(i);
      };
    });
  }
  Drain(calls);
  EXPECT_EQ(made, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(answered, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(on_worker, std::vector<bool>(5, true));
  EXPECT_EQ(woken.load(), 3);
}

TEST(SlurmCallsTest, ASlowSlurmctldDoesNotHoldUpThePoster) {
  SlurmCalls calls(/*thread=*/true);
  std::atomic<bool> release{false};
  calls.Post([&]() -> SlurmCalls::Then {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return nullptr;
  });
  auto t0 = std::chrono::steady_clock::now();
  calls.Post([]() -> SlurmCalls::Then { return nullptr; });
  calls.RunDone();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));
  EXPECT_FALSE(calls.Idle());
  release = true;
  Drain(calls);
  EXPECT_TRUE(calls.Idle());
}

TEST(SlurmCallsTest, AStoppingHpodStillMakesTheCallsItQueued) {
  std::atomic<int> made{0};
  {
    SlurmCalls calls(/*thread=*/true);
    for (int i = 0; i < 20; ++i) {
      calls.Post([&]() -> SlurmCalls::Then {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ++made;
        return [] { FAIL() << "a continuation ran after the end"; };
      });
    }
  }  // the cancels of a stopping hpod reach slurmctld
  EXPECT_EQ(made.load(), 20);
}

TEST(SlurmCallsTest, WithoutAThreadACallAndItsAnswerRunAtOnce) {
  SlurmCalls calls(/*thread=*/false);
  std::vector<int> order;
  calls.Post([&]() -> SlurmCalls::Then {
    order.push_back(1);
    return [&] { order.push_back(2); };
  });
  order.push_back(3);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(calls.Idle());
}

}  // namespace
}  // namespace hpo::slurm
