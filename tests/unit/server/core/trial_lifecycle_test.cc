// TrialLifecycle on its own, with its seams at hand: a scripted sampler (tests/fakes) proposes
// the trials, the simulated backend runs them in virtual time, the inline trial-files seam makes
// their directories.
#include "server/core/trial_lifecycle.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "backend/simulated_backend.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hpo/v1/states.h"
#include "server/store/sqlite_store.h"
#include "tests/fakes/inline_trial_files.h"
#include "tests/fakes/scripted_sampler.h"

namespace hpo::server {
namespace {

using fakes::ScriptedSampler;
using ::testing::HasSubstr;

class TrialLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = std::filesystem::temp_directory_path() / "hpo-lifecycle-XXXXXX";
    root_ = ::mkdtemp(tmpl.data());
    SqliteStore::Options o;
    o.durable = false;
    o.clock = &clock_;
    store_ = std::move(*SqliteStore::Open(root_ + "/hpod.db", o));
    backend_ =
        std::make_unique<backend::SimulatedBackend>(clock_, 0, 4, [](const backend::LaunchSpec&) {
          backend::SimulatedFate f;
          f.run_time = absl::Seconds(5);
          return f;
        });
    events_ = std::make_unique<EventPublisher>(*store_);
    MakeLifecycle(DataDir(root_));
  }
  void TearDown() override {
    lifecycle_.reset();
    store_.reset();
    std::filesystem::remove_all(root_);
  }
  void MakeLifecycle(DataDir data_dir) {
    TrialLifecycle::Options o;
    o.data_dir = std::move(data_dir);
    lifecycle_ =
        std::make_unique<TrialLifecycle>(o, table_, *store_, *backend_, files_, *events_, clock_);
  }
  // A sweep of `max_trials` whose sampler is `sampler`.
  Sweep& AddSweep(std::unique_ptr<algorithms::Sampler> sampler, int max_trials) {
    std::string yaml = absl::StrCat(
        "parameters: {x: [1, 2, 3]}\nobjective: {metric: loss, direction: minimize}\n"
        "command: [train, '{x}']\nbudget: {max_trials: ",
        max_trials, ", max_concurrent: 1}\n");
    PlanResult planned = PlanSweep(yaml, "t.yaml", root_);
    EXPECT_TRUE(planned.plan.has_value());
    auto sweep = std::make_unique<Sweep>();
    sweep->plan = std::move(*planned.plan);
    sweep->plan.sampler = std::move(sampler);
    sweep->rec.spec_yaml = yaml;
    sweep->rec.created_at = clock_.Now();
    Batch([&] { sweep->rec.id = *store_->InsertSweep(sweep->rec); });
    return table_.AddSweep(std::move(sweep));
  }
  template <typename Fn>
  void Batch(Fn fn) {
    ASSERT_TRUE(store_->Begin().ok());
    fn();
    absl::Status commit = store_->Commit();
    ASSERT_TRUE(commit.ok()) << commit;
    events_->Committed(commit);
  }
  // Ticks once a second until the sweep ended (or a minute passed).
  void RunUntilEnded(Sweep& sweep) {
    for (int i = 0; i < 60 && !sweep.Final(); ++i) {
      Batch([&] { lifecycle_->Tick(); });
      clock_.Advance(absl::Seconds(1));
    }
  }
  algorithms::Params X(int64_t x) { return {{"x", x}}; }

  std::string root_;
  FakeClock clock_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<backend::SimulatedBackend> backend_;
  fakes::InlineTrialFiles files_;
  std::unique_ptr<EventPublisher> events_;
  SweepTable table_;
  std::unique_ptr<TrialLifecycle> lifecycle_;
};

TEST_F(TrialLifecycleTest, ASamplerFailureEndsTheSweepFailedAfterItsRunningTrials) {
  auto sampler = std::make_unique<ScriptedSampler>(std::vector<ScriptedSampler::Step>{
      X(1), absl::InvalidArgumentError("the space is too small for this")});
  Sweep& sweep = AddSweep(std::move(sampler), 5);
  RunUntilEnded(sweep);
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_FAILED);
  EXPECT_THAT(sweep.rec.message, HasSubstr("the sampler failed: the space is too small for this"));
  ASSERT_EQ(sweep.trials().size(), 1u);
  EXPECT_EQ(sweep.trials()[0]->rec.state, v1::TRIAL_STATE_COMPLETED) << "it ran to its end first";
}

TEST_F(TrialLifecycleTest, AnExhaustedSamplerCompletesTheSweep) {
  auto sampler = std::make_unique<ScriptedSampler>(std::vector<ScriptedSampler::Step>{X(1), X(3)});
  ScriptedSampler& script = *sampler;
  Sweep& sweep = AddSweep(std::move(sampler), 10);
  RunUntilEnded(sweep);
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_COMPLETED);
  ASSERT_EQ(sweep.trials().size(), 2u);
  EXPECT_EQ(std::get<int64_t>(sweep.trials()[1]->rec.params.at("x")), 3);
  EXPECT_EQ(script.calls(), 3) << "asked once more, then never again";
  EXPECT_TRUE(std::filesystem::is_directory(sweep.trials()[1]->rec.trial_dir));
  EXPECT_EQ(backend_->launched()[1].env.at("HPO_PARAMS_JSON"), R"({"x":3})")
      << "hpo-shim writes it into the trial directory as params.json";
}

TEST_F(TrialLifecycleTest, ATrialWhoseDirectoryCannotBeMadeFailsAndTheSweepGoesOn) {
  // The sweeps directory lies under a regular file: mkdir says ENOTDIR, which is the setup's
  // fault, not a full disk.
  std::string file = root_ + "/not-a-dir";
  ASSERT_TRUE(WriteFileAtomic(file, "x").ok());
  DataDir data_dir(root_);
  data_dir.set_sweeps_root(file + "/sweeps");
  MakeLifecycle(data_dir);
  Sweep& sweep = AddSweep(
      std::make_unique<ScriptedSampler>(std::vector<ScriptedSampler::Step>{X(1), X(2)}), 2);
  RunUntilEnded(sweep);
  ASSERT_EQ(sweep.trials().size(), 2u);
  for (const auto& t : sweep.trials()) {
    EXPECT_EQ(t->rec.state, v1::TRIAL_STATE_FAILED);
    EXPECT_THAT(t->rec.message, HasSubstr("cannot make its directory"));
  }
  EXPECT_EQ(backend_->launched().size(), 0u);
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_COMPLETED);
}

}  // namespace
}  // namespace hpo::server
