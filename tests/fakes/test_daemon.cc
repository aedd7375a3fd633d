#include "tests/fakes/test_daemon.h"

#include <stdlib.h>

#include <filesystem>

#include "common/data_dir.h"
#include "hpo/v1/states.h"

namespace hpo::fakes {

TestDaemon::TestDaemon(Options options) : options_(std::move(options)), clock_(options_.start) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (options_.dir_prefix + "-XXXXXX"));
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  root_ = tmpl;
  OpenStore();
  MakeBackend();
  if (!MakeController().ok()) std::abort();
}

TestDaemon::~TestDaemon() {
  controller_.reset();
  backend_.reset();
  simulated_.reset();
  store_.reset();
  sqlite_.reset();
  std::error_code ec;
  std::filesystem::remove_all(root_, ec);
}

void TestDaemon::OpenStore() {
  server::SqliteStore::Options o;
  o.durable = options_.durable;
  o.clock = &clock_;
  o.vfs = options_.vfs;
  auto store = server::SqliteStore::Open(root_ + "/hpod.db", o);
  if (!store.ok()) std::abort();
  sqlite_ = std::move(*store);
  store_ = std::make_unique<FaultyStore>(*sqlite_);
}

void TestDaemon::MakeBackend() {
  simulated_ = std::make_unique<backend::SimulatedBackend>(
      clock_, options_.gpus, options_.slots, [this](const backend::LaunchSpec& s) {
        return script_ ? script_(s) : backend::SimulatedFate{};
      });
  backend_ = std::make_unique<FaultyBackend>(*simulated_);
}

absl::Status TestDaemon::MakeController() {
  server::Controller::Options o;
  o.data_dir = DataDir(root_);
  o.report_endpoint = "unix:/nowhere";
  o.tick = options_.tick;
  o.progress_interval = options_.progress_interval;
  o.suggest_slice = options_.suggest_slice;
  o.suggest_thread = options_.suggest_thread;
  o.spec_defaults = options_.spec_defaults;
  controller_ = std::make_unique<server::Controller>(o, *store_, *backend_, files_, clock_);
  return controller_->Recover();
}

absl::Status TestDaemon::Restart(bool crash, bool lose_trials) {
  if (crash) {
    // Nothing of the old daemon runs again: no shutdown, no last flush of its store.
    (void)controller_.release();
    (void)store_.release();
    (void)sqlite_.release();
  } else {
    controller_.reset();
    store_.reset();
    sqlite_.reset();
  }
  OpenStore();
  if (lose_trials) {
    backend_.reset();
    simulated_.reset();
    MakeBackend();
  }
  return MakeController();
}

void TestDaemon::RunUntilEnded(absl::Duration limit, absl::Duration step) {
  for (absl::Duration t; t < limit && !controller_->AllSweepsEnded(); t += step) {
    controller_->RunOnce();
    clock_.Advance(step);
  }
  controller_->RunOnce();
}

absl::StatusOr<int64_t> TestDaemon::Submit(const std::string& yaml, const std::string& source) {
  v1::SubmitSweepRequest req;
  req.set_spec_yaml(yaml);
  req.set_source(source);
  req.set_base_dir(root_);
  absl::StatusOr<v1::Sweep> sweep =
      controller_->Submit(hpo::server::Controller::AllowedForTest(), req);
  if (!sweep.ok()) return sweep.status();
  return sweep->id();
}

std::vector<v1::Trial> TestDaemon::Trials(int64_t sweep_id) {
  v1::ListTrialsRequest req;
  req.set_sweep_id(sweep_id);
  return controller_->ListTrials(server::Controller::AllowedForTest(), req)
      .value_or(std::vector<v1::Trial>{});
}

std::map<std::string, int> TestDaemon::Counts(int64_t sweep_id) {
  std::map<std::string, int> out;
  for (const v1::Trial& t : Trials(sweep_id)) out[v1::StateName(t.state())]++;
  return out;
}

std::string TestDaemon::TokenOf(int64_t trial_id) const {
  return controller_->TrialTokenForTest(trial_id).value_or("");
}

int64_t TestDaemon::ReportRows() {
  int64_t n = 0;
  auto sweeps = sqlite_->LoadSweeps();
  if (!sweeps.ok()) return -1;
  for (auto& s : *sweeps) {
    auto trials = sqlite_->LoadTrials(s.id);
    if (!trials.ok()) return -1;
    for (auto& t : *trials) {
      auto reports = sqlite_->LoadReports(t.id);
      if (reports.ok()) n += static_cast<int64_t>(reports->size());
    }
  }
  return n;
}

}  // namespace hpo::fakes
