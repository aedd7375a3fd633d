#include "backend/simulated_backend.h"

#include "gtest/gtest.h"

namespace hpo::backend {
namespace {

TEST(SimulatedBackend, RunsInVirtualTime) {
  FakeClock clock;
  SimulatedBackend b(clock, 2, 4, [](const LaunchSpec& s) {
    SimulatedFate f;
    f.run_time = absl::Seconds(10 * s.trial_id);
    f.exit_code = s.trial_id == 2 ? 1 : 0;
    f.lost = s.trial_id == 3;
    return f;
  });
  for (int64_t id : {1, 2, 3}) {
    LaunchSpec s;
    s.trial_id = id;
    ASSERT_TRUE(b.Launch(s).ok());
  }
  EXPECT_EQ(b.Poll().size(), 3u);  // three kStarted
  clock.Advance(absl::Seconds(10));
  auto e = b.Poll();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].trial_id, 1);
  EXPECT_EQ(e[0].kind, BackendEvent::Kind::kExited);
  clock.Advance(absl::Seconds(20));
  e = b.Poll();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].exit_code, 1);
  EXPECT_EQ(e[1].kind, BackendEvent::Kind::kLost);
}

TEST(SimulatedBackend, StopEndsWithinGrace) {
  FakeClock clock;
  SimulatedBackend b(clock, 0, 1, [](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Hours(1);
    f.stop_after = absl::Seconds(2);
    return f;
  });
  LaunchSpec s;
  s.trial_id = 7;
  ASSERT_TRUE(b.Launch(s).ok());
  EXPECT_FALSE(b.CanLaunch(1, {}, {}));
  b.Poll();
  ASSERT_TRUE(b.Stop(7, absl::Seconds(5)).ok());
  clock.Advance(absl::Seconds(2));
  auto e = b.Poll();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_TRUE(e[0].stop_requested);
  EXPECT_TRUE(b.CanLaunch(1, {}, {}));
}

}  // namespace
}  // namespace hpo::backend
