#pragma once
// TestDaemon: a whole hpod in one object, in virtual time, for unit tests, fuzz targets and
// benchmarks: a temp data directory (removed at the end), a real SqliteStore in it behind a
// FaultyStore, the simulated backend behind a FaultyBackend, InlineTrialFiles, a FakeClock and
// the controller. Nothing is faulty until a test asks (store().Fail, backend().Fail).
//
// Drive it with controller().RunOnce() (one batch with a tick) and clock().Advance(), or
// RunUntilEnded. Thread-compatible: one thread drives it.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/simulated_backend.h"
#include "common/clock.h"
#include "server/core/controller.h"
#include "server/store/sqlite_store.h"
#include "tests/fakes/faulty_backend.h"
#include "tests/fakes/faulty_store.h"
#include "tests/fakes/inline_trial_files.h"

namespace hpo::fakes {

class TestDaemon {
 public:
  struct Options {
    int gpus = 4;          // the simulated backend's
    int slots = 8;         // ... and its CPU slots
    bool durable = false;  // fsync per commit
    absl::Time start = absl::FromUnixSeconds(1'700'000'000);
    absl::Duration tick = absl::Milliseconds(50);
    absl::Duration progress_interval = absl::Milliseconds(500);
    absl::Duration suggest_slice = absl::Milliseconds(20);  // the controller's (Options)
    bool suggest_thread = false;                            // ... likewise
    std::string vfs;  // the store's SQLite VFS ("": the default)
    std::string dir_prefix = "hpo-test";
    // The versions of the sweep-file defaults the daemon knows (empty: hpod's own); a test
    // changes them before a Restart as a newer release would.
    std::vector<server::SpecDefaults> spec_defaults;
  };
  TestDaemon() : TestDaemon(Options()) {}
  explicit TestDaemon(Options options);
  ~TestDaemon();
  TestDaemon(const TestDaemon&) = delete;
  TestDaemon& operator=(const TestDaemon&) = delete;

  // How each launched trial fares (default: it runs 10 s and exits 0).
  void set_script(backend::SimulatedBackend::Script script) { script_ = std::move(script); }

  FakeClock& clock() { return clock_; }
  // What the next Restart knows of the sweep-file defaults (Options::spec_defaults).
  void set_spec_defaults(std::vector<server::SpecDefaults> versions) {
    options_.spec_defaults = std::move(versions);
  }
  backend::SimulatedBackend& simulated() { return *simulated_; }
  FaultyBackend& backend() { return *backend_; }
  FaultyStore& store() { return *store_; }
  server::SqliteStore& sqlite() { return *sqlite_; }
  InlineTrialFiles& files() { return files_; }
  server::Controller& controller() { return *controller_; }
  const std::string& root() const { return root_; }

  // A new daemon on the same data directory. `crash`: the old one vanishes as with kill -9
  // (nothing of it runs again, it flushes nothing); otherwise it shuts down. `lose_trials`: the
  // trials do not outlive it (a fresh simulated backend); otherwise they go on, and the new
  // daemon may re-adopt them. Returns what Recover returned.
  [[nodiscard]] absl::Status Restart(bool crash, bool lose_trials = false);
  // Advances virtual time by `step`, one batch each, until every sweep ended or `limit` passed.
  void RunUntilEnded(absl::Duration limit = absl::Hours(10),
                     absl::Duration step = absl::Seconds(1));
  // Submits `yaml` as from the file `source` in the data directory.
  [[nodiscard]] absl::StatusOr<int64_t> Submit(const std::string& yaml,
                                               const std::string& source = "t.yaml");
  // A sweep's trials, by number, and how many are in each state ("RUNNING": 2, ...).
  std::vector<v1::Trial> Trials(int64_t sweep_id);
  std::map<std::string, int> Counts(int64_t sweep_id);
  // A trial's reporting token.
  std::string TokenOf(int64_t trial_id) const;
  // Report rows in the store, over every sweep.
  int64_t ReportRows();

 private:
  void OpenStore();
  void MakeBackend();
  [[nodiscard]] absl::Status MakeController();

  Options options_;
  std::string root_;
  FakeClock clock_;
  backend::SimulatedBackend::Script script_;
  std::unique_ptr<server::SqliteStore> sqlite_;
  std::unique_ptr<FaultyStore> store_;
  std::unique_ptr<backend::SimulatedBackend> simulated_;
  std::unique_ptr<FaultyBackend> backend_;
  InlineTrialFiles files_;
  std::unique_ptr<server::Controller> controller_;
};

}  // namespace hpo::fakes
