#pragma once
// TrialLifecycle on its own, with its seams at hand, for the tests of each of its concerns
// (trial_lifecycle_*_test.cc): a scripted sampler (tests/fakes) proposes the trials, the
// simulated backend runs them in virtual time with the fates `script_` gives (and an external
// backend takes the trials of `backend: external` sweeps, behind a router as in hpod), the
// inline trial-files seam makes their directories, and a real store keeps what happened.

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/external_backend.h"
#include "backend/router.h"
#include "backend/simulated_backend.h"
#include "gtest/gtest.h"
#include "hpo/v1/states.h"
#include "server/core/trial_lifecycle.h"
#include "server/store/sqlite_store.h"
#include "tests/fakes/inline_trial_files.h"
#include "tests/fakes/scripted_sampler.h"

namespace hpo::server {

class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = std::filesystem::temp_directory_path() / "hpo-lifecycle-XXXXXX";
    root_ = ::mkdtemp(tmpl.data());
    SqliteStore::Options o;
    o.durable = false;
    o.clock = &clock_;
    store_ = std::move(*SqliteStore::Open(root_ + "/hpod.db", o));
    auto sim = std::make_unique<backend::SimulatedBackend>(
        clock_, 0, 4, [this](const backend::LaunchSpec& s) { return script_(s); });
    sim_ = sim.get();
    router_.Add(std::move(sim));
    router_.Add(std::make_unique<backend::ExternalBackend>(clock_));
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
        std::make_unique<TrialLifecycle>(o, table_, *store_, router_, files_, *events_, clock_);
  }
  // A sweep of `max_trials`, `max_concurrent` at a time, whose sampler is `sampler`; `more` is
  // added to its file (a `resources:` section, `backend: external`, ...).
  Sweep& AddSweep(std::unique_ptr<algorithms::Sampler> sampler, int max_trials,
                  int max_concurrent = 1, const std::string& more = "") {
    std::string yaml = absl::StrCat(
        "parameters: {x: [1, 2, 3]}\nobjective: {metric: loss, direction: minimize}\n",
        more.find("backend: external") == std::string::npos ? "command: [train, '{x}']\n" : "",
        "budget: {max_trials: ", max_trials, ", max_concurrent: ", max_concurrent, "}\n",
        // The scripted sampler stands in for the file's: its trial limit is the budget's.
        more.find("algorithm:") == std::string::npos ? "algorithm: random\n" : "", more);
    PlanResult planned = PlanSweep(yaml, "t.yaml", root_);
    EXPECT_TRUE(planned.plan.has_value()) << (planned.errors.empty() ? "" : planned.errors[0]);
    auto sweep = std::make_unique<Sweep>();
    sweep->plan = std::move(*planned.plan);
    sweep->plan.sampler = std::move(sampler);
    sweep->rec.spec_yaml = yaml;
    sweep->rec.created_at = clock_.Now();
    Batch([&] { sweep->rec.id = *store_->InsertSweep(sweep->rec); });
    return table_.AddSweep(std::move(sweep));
  }
  // A sampler that proposes x = 1, 2, 3, 1, 2, 3, ... (`n` of them).
  static std::unique_ptr<fakes::ScriptedSampler> Cycling(int n) {
    std::vector<fakes::ScriptedSampler::Step> steps(n);
    for (int i = 0; i < n; ++i) steps[i].emplace<algorithms::Params>(X(1 + i % 3));
    return std::make_unique<fakes::ScriptedSampler>(std::move(steps));
  }
  template <typename Fn>
  void Batch(Fn fn) {
    ASSERT_TRUE(store_->Begin().ok());
    fn();
    absl::Status commit = store_->Commit();
    ASSERT_TRUE(commit.ok()) << commit;
    events_->Committed(commit);
  }
  void Tick() {
    Batch([&] { lifecycle_->Tick(); });
  }
  // Ticks once a second until the sweep ended (or `limit` passed); `each` after every tick.
  void RunUntilEnded(Sweep& sweep, absl::Duration limit = absl::Minutes(1),
                     const std::function<void()>& each = nullptr) {
    for (absl::Time end = clock_.Now() + limit; clock_.Now() < end && !sweep.Final();) {
      Tick();
      if (each) each();
      clock_.Advance(absl::Seconds(1));
    }
  }
  int Count(const Sweep& sweep, v1::TrialState state) const {
    int n = 0;
    for (const auto& t : sweep.trials()) n += t->rec.state == state;
    return n;
  }
  static algorithms::Params X(int64_t x) { return {{"x", x}}; }

  std::string root_;
  FakeClock clock_;
  std::function<backend::SimulatedFate(const backend::LaunchSpec&)> script_ =
      [](const backend::LaunchSpec&) {
        backend::SimulatedFate f;
        f.run_time = absl::Seconds(5);
        return f;
      };
  std::unique_ptr<SqliteStore> store_;
  backend::Router router_{"simulated"};
  backend::SimulatedBackend* sim_ = nullptr;
  fakes::InlineTrialFiles files_;
  std::unique_ptr<EventPublisher> events_;
  SweepTable table_;
  std::unique_ptr<TrialLifecycle> lifecycle_;
};

}  // namespace hpo::server
