#include "backend/router.h"

#include "backend/simulated_backend.h"
#include "gtest/gtest.h"

namespace hpo::backend {
namespace {

SimulatedFate Runs(const LaunchSpec&) {
  SimulatedFate f;
  f.run_time = absl::Seconds(10);
  return f;
}

std::unique_ptr<SimulatedBackend> Named(const Clock& clock, const std::string& name,
                                        SimulatedBackend** out) {
  auto b = std::make_unique<SimulatedBackend>(clock, 2, 4, Runs);
  b->set_name(name);
  *out = b.get();
  return b;
}

LaunchSpec Trial(int64_t id, const std::string& backend) {
  LaunchSpec s;
  s.trial_id = id;
  s.placement.backend = backend;
  return s;
}

TEST(Router, EachTrialGoesToTheBackendItsSweepNames) {
  FakeClock clock;
  SimulatedBackend *local = nullptr, *slurm = nullptr;
  Router router("local");
  router.Add(Named(clock, "local", &local));
  router.Add(Named(clock, "slurm", &slurm));
  EXPECT_EQ(*router.Resolve(Placement()), "local") << "the default";
  ASSERT_TRUE(router.Launch(Trial(1, "")).ok());
  ASSERT_TRUE(router.Launch(Trial(2, "slurm")).ok());
  ASSERT_TRUE(router.Launch(Trial(3, "local")).ok());
  ASSERT_EQ(local->launched().size(), 2u);
  ASSERT_EQ(slurm->launched().size(), 1u);
  EXPECT_EQ(slurm->launched()[0].trial_id, 2);
  EXPECT_EQ(router.Running(), 3);
  EXPECT_EQ(router.Poll().size(), 3u);  // both backends' kStarted

  // A stop goes where the trial runs; once it ended, nobody knows it.
  ASSERT_TRUE(router.Stop(2, absl::Seconds(1)).ok());
  EXPECT_EQ(slurm->Running(), 1);
  clock.Advance(absl::Seconds(10));
  std::vector<BackendEvent> ended = router.Poll();
  EXPECT_EQ(ended.size(), 3u);
  EXPECT_TRUE(absl::IsNotFound(router.Stop(2, absl::Seconds(1))));
  EXPECT_EQ(router.Running(), 0);
  EXPECT_NE(router.Describe().find("local (default): "), std::string::npos) << router.Describe();
}

TEST(Router, ABackendThatIsNotThereRefusesWithTheReason) {
  FakeClock clock;
  SimulatedBackend* local = nullptr;
  Router router("local");
  router.Add(Named(clock, "local", &local));
  router.AddUnavailable("slurm", "no slurm.conf at /nowhere");
  Placement p;
  p.backend = "slurm";
  absl::StatusOr<std::string> where = router.Resolve(p);
  ASSERT_TRUE(absl::IsInvalidArgument(where.status()));
  EXPECT_NE(where.status().message().find("no slurm backend: no slurm.conf at /nowhere"),
            std::string::npos)
      << where.status();
  EXPECT_TRUE(absl::IsInvalidArgument(router.CheckFits(Resources(), p)));
  EXPECT_FALSE(router.CanLaunch(1, Resources(), p));
  EXPECT_TRUE(absl::IsInvalidArgument(router.Launch(Trial(1, "slurm"))));
  EXPECT_TRUE(local->launched().empty()) << "never run elsewhere";
  p.backend = "cloud";
  EXPECT_NE(router.Resolve(p).status().message().find("serves only local"), std::string::npos);
  EXPECT_NE(router.Describe().find("no slurm: no slurm.conf"), std::string::npos);
}

}  // namespace
}  // namespace hpo::backend
