// The backend contract (backend_contract.h) over the simulated, local, external and routed
// backends. The Slurm backend's harnesses are in tests/unit/slurm_backend/slurm_contract_test.cc.
#include "tests/unit/backend/backend_contract.h"

#include <stdlib.h>
#include <unistd.h>

#include <map>

#include "backend/backend_wrapper.h"
#include "backend/external_backend.h"
#include "backend/local_backend.h"
#include "backend/process.h"
#include "backend/router.h"
#include "backend/simulated_backend.h"
#include "common/clock.h"
#include "common/files.h"
#include "tests/unit/backend/process_trials.h"

namespace hpo::backend::contract {
namespace {

// Two CPU slots and no GPU: two trials of Spec's size at once, and none that asks for a GPU.
BackendHarness::Traits TwoSlotsNoGpu() {
  BackendHarness::Traits t;
  t.room = 2;
  Resources gpu;
  gpu.gpus = 1;
  t.never_fits = {{gpu, Placement()}};
  return t;
}

// Trials in virtual time: each trial's fate follows what it does; a pass is a second.
class SimulatedHarness : public BackendHarness {
 public:
  SimulatedHarness()
      : backend_(clock_, 0, 2, [this](const LaunchSpec& s) { return Fate(does_[s.trial_id]); }) {}
  Backend& backend() override { return backend_; }
  LaunchSpec Spec(int64_t trial_id, Does does) override {
    does_[trial_id] = does;
    LaunchSpec s;
    s.trial_id = trial_id;
    s.sweep_id = 1;
    return s;
  }
  void Pass() override { clock_.Advance(absl::Seconds(1)); }
  // Simulated trials live in the backend, as processes outlive hpod: the same one serves the
  // new daemon.
  void Restart() override { backend_.Detach(); }
  bool StillRuns(int64_t trial_id) override { return backend_.Runs(trial_id); }
  Traits traits() const override { return TwoSlotsNoGpu(); }

 private:
  static SimulatedFate Fate(Does does) {
    SimulatedFate f;
    f.stop_after = absl::Seconds(1);
    switch (does) {
      case Does::kExits3:
        f.run_time = absl::Seconds(3);
        f.exit_code = 3;
        break;
      case Does::kRunsUntilStopped:
        f.run_time = absl::Hours(24);
        break;
      case Does::kIsTaken:
        f.run_time = absl::Seconds(3);
        f.lost = true;
        break;
    }
    return f;
  }
  FakeClock clock_;
  std::map<int64_t, Does> does_;
  SimulatedBackend backend_;
};

// Real processes under the real hpo-shim, in real time; a restart is a new LocalBackend over
// the processes the old one left.
class LocalHarness : public BackendHarness {
 public:
  LocalHarness() { Restart(); }
  ~LocalHarness() override { backend_.reset(); }
  Backend& backend() override { return *backend_; }
  LaunchSpec Spec(int64_t trial_id, Does does) override {
    // Taken: its whole process group, shim included, is killed, and nothing records how.
    return trials_.Spec(
        trial_id, does == Does::kIsTaken ? "sleep 1; kill -9 0" : ProcessTrials::Command(does));
  }
  void Pass() override { ::usleep(20'000); }
  void Restart() override {
    if (backend_) backend_->Detach();
    backend_ =
        std::make_unique<LocalBackend>(LocalBackend::Options{0, 2, HPO_SHIM}, SystemClock::Get());
  }
  bool StillRuns(int64_t trial_id) override { return trials_.Runs(trial_id); }
  Traits traits() const override { return TwoSlotsNoGpu(); }

 private:
  ProcessTrials trials_;  // first: it outlives the backend
  std::unique_ptr<LocalBackend> backend_;
};

// Trials something else runs: the backend only keeps the account.
class ExternalHarness : public BackendHarness {
 public:
  ExternalHarness() { Restart(); }
  Backend& backend() override { return *backend_; }
  LaunchSpec Spec(int64_t trial_id, Does) override {
    LaunchSpec s;
    s.trial_id = trial_id;
    s.sweep_id = 1;
    s.placement.backend = "external";
    return s;
  }
  void Pass() override { clock_.Advance(absl::Seconds(1)); }
  void Restart() override {
    if (backend_) backend_->Detach();
    backend_ = std::make_unique<ExternalBackend>(clock_);
  }
  // What runs elsewhere is this backend's account of it.
  bool StillRuns(int64_t) override { return backend_->Running() > 0; }
  Traits traits() const override {
    Traits t;
    t.ends_by_itself = false;
    t.can_be_taken = false;
    t.adopts_anything = true;
    return t;
  }

 private:
  FakeClock clock_;
  std::unique_ptr<ExternalBackend> backend_;
};

// Another harness's backend behind a Router that also holds a backend of another name, with
// another as its default: every trial names the one it runs on.
class RoutedHarness : public BackendHarness {
 public:
  explicit RoutedHarness(std::unique_ptr<BackendHarness> inner) : inner_(std::move(inner)) {
    Rebuild();
  }
  Backend& backend() override { return *router_; }
  LaunchSpec Spec(int64_t trial_id, Does does) override {
    LaunchSpec s = inner_->Spec(trial_id, does);
    s.placement.backend = inner_->backend().Name();
    return s;
  }
  void Pass() override {
    inner_->Pass();
    other_clock_.Advance(absl::Seconds(1));
  }
  void Restart() override {
    router_->Detach();
    inner_->Restart();
    Rebuild();
  }
  bool StillRuns(int64_t trial_id) override { return inner_->StillRuns(trial_id); }
  Traits traits() const override {
    Traits t = inner_->traits();
    if (t.never_fits) t.never_fits->second.backend = inner_->backend().Name();
    return t;
  }

 private:
  void Rebuild() {
    router_ = std::make_unique<Router>("other");
    auto other = std::make_unique<SimulatedBackend>(other_clock_, 0, 1, [](const LaunchSpec&) {
      ADD_FAILURE() << "a trial went to a backend it does not name";
      return SimulatedFate();
    });
    other->set_name("other");
    router_->Add(std::move(other));
    router_->Add(std::make_unique<BackendWrapper>(inner_->backend()));
  }
  std::unique_ptr<BackendHarness> inner_;
  FakeClock other_clock_;
  std::unique_ptr<Router> router_;
};

template <typename H>
HarnessMaker Maker(std::string name) {
  return {std::move(name), [] { return std::make_unique<H>(); }};
}

template <typename H>
HarnessMaker Routed(std::string name) {
  return {std::move(name), [] { return std::make_unique<RoutedHarness>(std::make_unique<H>()); }};
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendContract,
                         ::testing::Values(Maker<SimulatedHarness>("simulated"),
                                           Maker<LocalHarness>("local"),
                                           Maker<ExternalHarness>("external"),
                                           Routed<SimulatedHarness>("router_simulated"),
                                           Routed<LocalHarness>("router_local")),
                         MakerName);

}  // namespace
}  // namespace hpo::backend::contract
