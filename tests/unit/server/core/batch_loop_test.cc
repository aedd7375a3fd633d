// The batch loop on its own thread in virtual time (server/core/batch_loop.h): its ticks come
// when the controller's clock reaches them, so a test that advances a FakeClock by the tick gets
// the next one at once, and one that does not gets none.
#include "server/core/batch_loop.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"
#include "tests/fakes/test_daemon.h"

namespace hpo::server {
namespace {

// Polls `what` in real time for up to 5 s.
bool Eventually(const std::function<bool()>& what) {
  for (int i = 0; i < 500; ++i) {
    if (what()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return what();
}

TEST(BatchLoopTest, TicksInVirtualTime) {
  fakes::TestDaemon daemon;
  std::atomic<int> ticks{0};
  BatchLoop loop(daemon.store(), daemon.clock(), absl::Hours(1),
                 {[&] { ++ticks; }, nullptr, nullptr});
  loop.Start();
  ASSERT_TRUE(Eventually([&] { return ticks == 1; })) << "the first tick is due at once";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ticks, 1) << "no hour of virtual time passed";
  daemon.clock().Advance(absl::Hours(1));
  EXPECT_TRUE(Eventually([&] { return ticks == 2; })) << "the clock reached the next tick";
  // Posted work runs at once, without waiting for a tick.
  std::atomic<bool> ran{false};
  loop.Post([&]() -> BatchLoop::Done {
    ran = true;
    return nullptr;
  });
  EXPECT_TRUE(Eventually([&] { return ran.load(); }));
  EXPECT_EQ(ticks, 2);
  loop.Stop();
}

}  // namespace
}  // namespace hpo::server
