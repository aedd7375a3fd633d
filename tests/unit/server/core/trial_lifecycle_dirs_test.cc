// TrialLifecycle's trial directories (trial_lifecycle_dirs.cc): made ahead of the trials that
// need them, and a trial whose directory cannot be made fails without stopping the sweep.
#include "common/files.h"
#include "gmock/gmock.h"
#include "tests/unit/server/core/lifecycle_fixture.h"

namespace hpo::server {
namespace {

using ::testing::HasSubstr;

TEST_F(LifecycleTest, DirectoriesAreMadeAheadOfTheTrialsThatNeedThem) {
  script_ = [](const backend::LaunchSpec&) {
    backend::SimulatedFate f;
    f.run_time = absl::Hours(1);
    return f;
  };
  // Two at a time: the directories of as many trials to come are made ahead.
  Sweep& sweep = AddSweep(Cycling(8), 8, /*max_concurrent=*/2);
  Tick();
  Tick();
  ASSERT_EQ(sweep.trials().size(), 2u);
  std::filesystem::path sweep_dir =
      std::filesystem::path(sweep.trials()[0]->rec.trial_dir).parent_path();
  int made = 0;
  for (const auto& entry : std::filesystem::directory_iterator(sweep_dir)) {
    made += entry.is_directory();
  }
  EXPECT_EQ(made, 4) << "the directories of the next two trials are there already";
  // The next trial takes the one made for it.
  Batch([&] {
    lifecycle_->RequestStop(sweep, *sweep.trials()[0], v1::TRIAL_STATE_STOPPED, "make room");
  });
  for (int i = 0; i < 3 && sweep.trials().size() < 3; ++i) Tick();
  ASSERT_EQ(sweep.trials().size(), 3u);
  EXPECT_TRUE(std::filesystem::is_directory(sweep.trials()[2]->rec.trial_dir));
  EXPECT_EQ(std::filesystem::path(sweep.trials()[2]->rec.trial_dir).parent_path(), sweep_dir);
}

TEST_F(LifecycleTest, ATrialWhoseDirectoryCannotBeMadeFailsAndTheSweepGoesOn) {
  // The sweeps directory lies under a regular file: mkdir says ENOTDIR, which is the setup's
  // fault, not a full disk.
  std::string file = root_ + "/not-a-dir";
  ASSERT_TRUE(WriteFileAtomic(file, "x").ok());
  DataDir data_dir(root_);
  data_dir.set_sweeps_root(file + "/sweeps");
  MakeLifecycle(data_dir);
  Sweep& sweep = AddSweep(Cycling(2), 2);
  RunUntilEnded(sweep);
  ASSERT_EQ(sweep.trials().size(), 2u);
  for (const auto& t : sweep.trials()) {
    EXPECT_EQ(t->rec.state, v1::TRIAL_STATE_FAILED);
    EXPECT_THAT(t->rec.message, HasSubstr("cannot make its directory"));
  }
  EXPECT_EQ(sim_->launched().size(), 0u);
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_COMPLETED);
}

}  // namespace
}  // namespace hpo::server
