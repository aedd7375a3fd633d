#include "absl/strings/string_view.h"
#include "server/controller.h"

#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/token.h"
#include "server/convert.h"
#include "spdlog/spdlog.h"

namespace hpo::server {
namespace {

// The staged-report move runs in this many steps per flush interval (see RunBatch).
constexpr int kReportFlushSlices = 8;

}  // namespace

bool IsFinal(v1::TrialState s) {
  return s == v1::TRIAL_STATE_COMPLETED || s == v1::TRIAL_STATE_STOPPED ||
         s == v1::TRIAL_STATE_FAILED || s == v1::TRIAL_STATE_CANCELED || s == v1::TRIAL_STATE_LOST;
}

bool IsFinal(v1::SweepState s) {
  return s != v1::SWEEP_STATE_RUNNING && s != v1::SWEEP_STATE_PAUSED &&
         s != v1::SWEEP_STATE_UNSPECIFIED;
}

std::string TrialStateName(v1::TrialState s) {
  std::string n = v1::TrialState_Name(s);
  return n.size() > 12 ? n.substr(12) : n;  // strip "TRIAL_STATE_"
}

std::string SweepStateName(v1::SweepState s) {
  std::string n = v1::SweepState_Name(s);
  return n.size() > 12 ? n.substr(12) : n;  // strip "SWEEP_STATE_"
}

bool Controller::SweepRt::Final() const { return IsFinal(rec.state); }

Controller::Controller(Options options, Store& store, backend::Backend& backend, const Clock& clock)
    : options_(std::move(options)), store_(store), backend_(backend), clock_(clock) {
  next_tick_ = clock_.Now();
}

Controller::~Controller() { Shutdown(); }

// ---------------------------------------------------------------------------------------------
// Batches

void Controller::Start() {
  backend_.SetWakeup([this] { Wake(); });
  // Named, so that top -H and perf tell them apart from gRPC's threads.
  completer_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hpod-reply");
    CompleterLoop();
  });
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hpod-control");
    Loop();
  });
}

void Controller::Shutdown(bool keep_trials) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  backend_.SetWakeup(nullptr);
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard lock(done_mu_);
    done_stopping_ = true;
  }
  done_cv_.notify_all();
  if (completer_.joinable()) completer_.join();
  // Trials cannot outlive this daemon yet: end them and record why, so the next start retries
  // them instead of guessing.
  std::vector<Work> last;
  if (keep_trials) {
    spdlog::info("leaving the running trials to the next start of hpod");
    backend_.Detach();
  }
  last.push_back([this, keep_trials]() -> Done {
    if (keep_trials) return nullptr;
    for (auto& [id, sweep] : sweeps_) {
      for (auto& t : sweep->trials) {
        if (IsFinal(t->rec.state)) continue;
        backend_.Reclaim(t->rec.id, t->rec.backend_id);
        t->rec.infra_failure = true;
        EndTrial(*sweep, *t, v1::TRIAL_STATE_LOST, "hpod stopped while the trial ran");
      }
    }
    return nullptr;
  });
  last.push_back([this]() -> Done {
    if (absl::Status s = store_.FlushReportLog(); !s.ok()) spdlog::error("store: {}", s.ToString());
    return nullptr;
  });
  RunBatch(last, false);
}

void Controller::Post(Work work) {
  bool wake;
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(work));
    wake = waiting_;  // a busy loop takes the queue when its batch is done: no syscall needed
  }
  if (wake) cv_.notify_one();
}

void Controller::Wake() {
  bool wake;
  {
    std::lock_guard lock(mu_);
    tick_requested_ = true;
    wake = waiting_;
  }
  if (wake) cv_.notify_one();
}

void Controller::RunOnce() {
  std::vector<Work> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(queue_);
  }
  RunBatch(batch, true);
}

void Controller::Loop() {
  std::vector<Work> batch;
  while (true) {
    bool tick = false;
    {
      std::unique_lock lock(mu_);
      auto deadline = std::chrono::steady_clock::now() +
                      std::chrono::microseconds(std::max<int64_t>(
                          0, absl::ToInt64Microseconds(next_tick_ - clock_.Now())));
      waiting_ = true;
      cv_.wait_until(lock, deadline, [&] { return !queue_.empty() || stopping_ || tick_requested_; });
      waiting_ = false;
      if (stopping_) break;
      batch.swap(queue_);
      tick = tick_requested_;
      tick_requested_ = false;
    }
    if (tick || clock_.Now() >= next_tick_) {
      tick = true;
      next_tick_ = clock_.Now() + options_.tick;
    }
    RunBatch(batch, tick);
    batch.clear();
  }
}

void Controller::RunBatch(std::vector<Work>& batch, bool tick) {
  absl::Status begin = store_.Begin();
  if (!begin.ok()) spdlog::error("store: {}", begin.ToString());
  std::vector<Done> dones;
  dones.reserve(batch.size());
  for (Work& work : batch) {
    if (Done done = work()) dones.push_back(std::move(done));
  }
  if (tick) Tick();
  // Staged reports move to their indexed table within one flush interval, one slice of the
  // trials at a time. Under load (a batch every millisecond or so) each batch moves at most one
  // slice: each step touches one index page per trial in its slice, and no batch carries the
  // whole move (that made a 2-5 ms stall every interval, the largest part of the report
  // latency's tail). When batches are rarer, one batch moves every slice that is due.
  absl::Duration step = options_.report_flush_interval / kReportFlushSlices;
  absl::Time now = clock_.Now();
  for (int i = 0; i < kReportFlushSlices && now >= next_report_flush_; ++i) {
    if (absl::Status s = store_.FlushReportLog(report_flush_slice_, kReportFlushSlices); !s.ok()) {
      spdlog::error("store: {}", s.ToString());
    }
    report_flush_slice_ = (report_flush_slice_ + 1) % kReportFlushSlices;
    next_report_flush_ = std::max(next_report_flush_ + step, now - options_.report_flush_interval);
  }
  bool probed = false;
  if (!storage_error_.empty() && begin.ok() && clock_.Now() >= next_storage_probe_) {
    next_storage_probe_ = clock_.Now() + absl::Seconds(1);
    probed = ProbeStorage();
  }
  absl::Status commit = begin.ok() ? store_.Commit() : begin;
  if (!commit.ok()) {
    if (storage_error_.empty()) {
      spdlog::error("store commit failed; the batch's changes are not durable: {}", commit.ToString());
    }
    unpublished_.clear();
    // Reports of this batch are not stored: their retries must not look like duplicates.
    for (int64_t id : batch_reports_) {
      if (auto [sweep, trial] = FindTrial(id); trial != nullptr) trial->last_report.reset();
    }
    StorageFailed(commit);
  } else if (probed) {
    spdlog::warn("the store and the sweeps directory can be written again: hpod takes new work");
    storage_error_.clear();
  }
  batch_reports_.clear();
  for (auto& [sweep_id, event] : unpublished_) {
    committed_seq_ = std::max(committed_seq_, event.seq());
    SweepRt* sweep = FindSweep(sweep_id);
    if (sweep == nullptr) continue;
    bool ends = event.kind() == v1::EVENT_KIND_SWEEP_STATE && IsFinal(event.sweep().state());
    auto& sinks = sweep->sinks;
    for (auto& sink : sinks) {
      if (!sink->Gone()) sink->Push(event);
    }
    if (ends) {
      for (auto& sink : sinks) sink->Close(absl::OkStatus());
      sinks.clear();
    } else {
      sinks.erase(std::remove_if(sinks.begin(), sinks.end(), [](auto& s) { return s->Gone(); }),
                  sinks.end());
    }
  }
  unpublished_.clear();
  if (dones.empty()) return;
  if (!completer_.joinable()) {  // RunOnce (tests) and shutdown: complete inline
    for (Done& done : dones) done(commit);
    return;
  }
  // Answering (gRPC writes) happens on the completer thread, so the next batch's work and its
  // commit overlap with sending this batch's replies.
  {
    std::lock_guard lock(done_mu_);
    done_queue_.emplace_back(std::move(dones), commit);
  }
  done_cv_.notify_one();
}

void Controller::CompleterLoop() {
  while (true) {
    std::vector<std::pair<std::vector<Done>, absl::Status>> work;
    {
      std::unique_lock lock(done_mu_);
      done_cv_.wait(lock, [&] { return !done_queue_.empty() || done_stopping_; });
      if (done_queue_.empty() && done_stopping_) return;
      work.swap(done_queue_);
    }
    for (auto& [dones, commit] : work) {
      for (Done& done : dones) done(commit);
    }
  }
}

void Controller::Tick() {
  for (const backend::BackendEvent& e : backend_.Poll()) HandleBackendEvent(e);
  EnforceStops();
  for (auto& [id, sweep] : sweeps_) {
    if (!sweep->Final()) Schedule(*sweep);
  }
  FlushProgress();
}

// ---------------------------------------------------------------------------------------------
// Store and events

void Controller::Emit(SweepRt& sweep, v1::EventKind kind, const TrialRt* trial) {
  v1::Event event;
  event.set_kind(kind);
  *event.mutable_time() = ToProto(clock_.Now());
  event.set_sweep_id(sweep.rec.id);
  if (trial != nullptr) *event.mutable_trial() = TrialProto(*trial);
  else *event.mutable_sweep() = SweepProto(sweep, false);
  EventRecord rec;
  rec.sweep_id = sweep.rec.id;
  rec.trial_id = trial != nullptr ? trial->rec.id : 0;
  rec.payload = event.SerializeAsString();
  absl::StatusOr<int64_t> seq = store_.InsertEvent(rec);
  if (!seq.ok()) {
    spdlog::error("sweep {}: cannot store an event: {}", sweep.rec.id, seq.status().ToString());
    return;
  }
  event.set_seq(*seq);
  unpublished_.emplace_back(sweep.rec.id, std::move(event));
}

void Controller::SaveTrial(SweepRt& sweep, TrialRt& trial, v1::EventKind kind) {
  if (absl::Status s = store_.UpdateTrial(trial.rec); !s.ok()) {
    spdlog::error("trial {}: {}", trial.rec.id, s.ToString());
    if (absl::IsUnavailable(s)) StorageFailed(s);
  }
  trial.progress_dirty = false;
  trial.last_saved = clock_.Now();
  Emit(sweep, kind, &trial);
}

void Controller::SaveSweep(SweepRt& sweep) {
  if (absl::Status s = store_.UpdateSweep(sweep.rec); !s.ok()) {
    spdlog::error("sweep {}: {}", sweep.rec.id, s.ToString());
    if (absl::IsUnavailable(s)) StorageFailed(s);
  }
  Emit(sweep, v1::EVENT_KIND_SWEEP_STATE, nullptr);
}

void Controller::FlushProgress() {
  // Each trial's progress is saved at most once per progress_interval, each on its own
  // schedule, so that no single tick writes every trial at once.
  absl::Time now = clock_.Now();
  for (auto it = dirty_.begin(); it != dirty_.end();) {
    auto [sweep, trial] = FindTrial(*it);
    if (trial == nullptr || !trial->progress_dirty) {
      it = dirty_.erase(it);
      continue;
    }
    if (now - trial->last_saved < options_.progress_interval) {
      ++it;
      continue;
    }
    SaveTrial(*sweep, *trial, v1::EVENT_KIND_TRIAL_PROGRESS);
    it = dirty_.erase(it);
  }
}

void Controller::StorageFailed(const absl::Status& s) {
  if (storage_error_.empty()) {
    spdlog::error("hpod cannot write its data ({}); it refuses new work until it can, and "
                  "retries every second", std::string(s.message()));
  }
  storage_error_ = std::string(s.message());
  next_storage_probe_ = clock_.Now() + absl::Seconds(1);
}

bool Controller::ProbeStorage() {
  for (auto& [id, sweep] : sweeps_) {
    if (absl::Status s = store_.UpdateSweep(sweep->rec); !s.ok()) return false;
    for (auto& t : sweep->trials) {
      if (absl::Status s = store_.UpdateTrial(t->rec); !s.ok()) return false;
    }
  }
  std::string probe = options_.data_dir.sweeps_root() + "/.hpod-probe";
  if (absl::Status s = WriteFileAtomic(probe, "probe\n", 0600, /*sync=*/true); !s.ok()) {
    storage_error_ = std::string(s.message());
    return false;
  }
  ::unlink(probe.c_str());
  return true;
}

// ---------------------------------------------------------------------------------------------
// Scheduling

void Controller::Schedule(SweepRt& sweep) {
  if (sweep.rec.ending != v1::SWEEP_STATE_UNSPECIFIED) {
    if (sweep.active == 0) FinishSweep(sweep, sweep.rec.ending, sweep.rec.message);
    return;
  }
  const SweepSpec& spec = sweep.spec;
  if (spec.budget.wall_time && clock_.Now() - sweep.rec.created_at >= *spec.budget.wall_time) {
    BeginEnding(sweep, v1::SWEEP_STATE_TIMED_OUT,
                absl::StrCat("budget.wall_time (", absl::FormatDuration(*spec.budget.wall_time),
                             ") ran out"));
    return;
  }
  if (sweep.rec.state == v1::SWEEP_STATE_PAUSED) return;
  if (!storage_error_.empty()) return;  // no new work while hpod cannot write its data
  // Trials already created go first. Each one that fits starts, so a smaller trial may pass a
  // larger one that waits for resources (backfill) — unless the oldest waiting trial has waited
  // longer than kBackfillLimit: then nothing passes it.
  std::deque<int64_t> waiting;
  waiting.swap(sweep.pending);
  bool blocked = false;
  for (size_t i = 0; i < waiting.size(); ++i) {
    TrialRt& t = *sweep.trials[static_cast<size_t>(waiting[i])];
    if (IsFinal(t.rec.state)) continue;
    if (blocked || !backend_.CanLaunch(sweep.rec.id, spec.TrialResources(t.rec.params), spec.placement)) {
      sweep.pending.push_back(waiting[i]);
      if (sweep.pending.size() == 1 && clock_.Now() - t.rec.created_at > kBackfillLimit) blocked = true;
      continue;
    }
    LaunchPending(sweep, t);
  }
  if (blocked) return;
  while (sweep.active < spec.budget.max_concurrent &&
         backend_.CanLaunch(sweep.rec.id, spec.MinResources(), spec.placement)) {
    if (!CreateTrial(sweep)) break;
  }
  bool more = !sweep.retries.empty() ||
              (!sweep.exhausted && (sweep.limit == 0 || sweep.sampled < sweep.limit));
  if (!more && sweep.active == 0) {
    int64_t done = static_cast<int64_t>(sweep.trials.size());
    FinishSweep(sweep, v1::SWEEP_STATE_COMPLETED, absl::StrCat("all ", done, " trial(s) ended"));
  }
}

bool Controller::CreateTrial(SweepRt& sweep) {
  auto rt = std::make_unique<TrialRt>();
  TrialRecord& rec = rt->rec;
  if (!sweep.retries.empty()) {
    const TrialRt& original = *sweep.trials[static_cast<size_t>(sweep.retries.front())];
    sweep.retries.pop_front();
    rec.params = original.rec.params;
    rec.parent = original.rec.parent;
    rec.lineage = original.rec.lineage;
    rec.attempt = original.rec.attempt + 1;
    rec.retry_of = original.rec.id;
  } else {
    if (sweep.exhausted || (sweep.limit > 0 && sweep.sampled >= sweep.limit)) return false;
    algorithms::SuggestRequest req;
    req.space = &sweep.spec.space;
    req.history = &sweep.history;
    req.objectives = &sweep.objectives;
    req.trial_number = sweep.sampled;
    req.seed = sweep.spec.seed;
    req.direction = sweep.spec.objective.direction;
    algorithms::SuggestOutput output;
    req.output = &output;
    absl::StatusOr<std::optional<algorithms::Params>> params = sweep.sampler->Suggest(req);
    if (!params.ok()) {
      BeginEnding(sweep, v1::SWEEP_STATE_FAILED,
                  absl::StrCat("the sampler failed: ", params.status().message()));
      return false;
    }
    if (!params->has_value()) {
      sweep.exhausted = true;
      return false;
    }
    rec.params = std::move(**params);
    rec.parent = output.parent;
    rec.lineage = output.lineage;
    ++sweep.sampled;
  }
  rec.sweep_id = sweep.rec.id;
  rec.number = static_cast<int64_t>(sweep.trials.size());
  rec.state = v1::TRIAL_STATE_PENDING;
  rec.token = NewToken();
  rec.created_at = clock_.Now();
  rec.trial_dir = options_.data_dir.trial_dir(sweep.rec.id, rec.number);
  absl::StatusOr<int64_t> id = store_.InsertTrial(rec);
  if (!id.ok()) {
    spdlog::error("sweep {}: cannot store a new trial: {}", sweep.rec.id, id.status().ToString());
    return false;
  }
  rec.id = *id;
  TrialRt& trial = *rt;
  trials_by_id_[rec.id] = {&sweep, rt.get()};
  sweep.history.push_back({rec.number, rec.params, false, std::nullopt, rec.parent, rec.lineage,
                           sweep.stopper_is_none ? nullptr : &trial.curve});
  sweep.objectives.push_back(std::numeric_limits<double>::quiet_NaN());
  sweep.trials.push_back(std::move(rt));
  ++sweep.active;
  Emit(sweep, v1::EVENT_KIND_TRIAL_STATE, &trial);
  if (backend_.CanLaunch(sweep.rec.id, sweep.spec.TrialResources(rec.params), sweep.spec.placement)) {
    LaunchPending(sweep, trial);
  } else {
    sweep.pending.push_back(trial.rec.number);
  }
  return true;
}

backend::LaunchSpec Controller::MakeLaunchSpec(const SweepRt& sweep, const TrialRt& trial) const {
  const TrialRecord& rec = trial.rec;
  const SweepSpec& spec = sweep.spec;
  backend::LaunchSpec launch;
  launch.trial_id = rec.id;
  launch.sweep_id = sweep.rec.id;
  std::string checkpoint_in;
  if (rec.parent >= 0 && static_cast<size_t>(rec.parent) < sweep.trials.size()) {
    checkpoint_in = sweep.trials[static_cast<size_t>(rec.parent)]->rec.trial_dir + "/checkpoint";
  }
  launch.argv = spec.RenderCommand(rec.params, rec.id, rec.number, sweep.rec.id, rec.trial_dir, checkpoint_in);
  launch.workdir = spec.workdir;
  launch.trial_dir = rec.trial_dir;
  launch.resources = spec.TrialResources(rec.params);
  launch.placement = spec.placement;
  launch.stop_signal = spec.stop_signal;
  launch.env = spec.env;
  launch.env["HPO_ENDPOINT"] = options_.report_endpoint;
  if (!options_.tls_ca.empty()) launch.env["HPO_TLS_CA"] = options_.tls_ca;
  launch.env["HPO_SWEEP_ID"] = std::to_string(sweep.rec.id);
  launch.env["HPO_TRIAL_ID"] = std::to_string(rec.id);
  launch.env["HPO_TRIAL_NUMBER"] = std::to_string(rec.number);
  launch.env["HPO_TRIAL_TOKEN"] = rec.token;
  launch.env["HPO_TRIAL_DIR"] = rec.trial_dir;
  launch.env["HPO_CHECKPOINT_IN"] = checkpoint_in;
  launch.env["HPO_CHECKPOINT_OUT"] = rec.trial_dir + "/checkpoint";
  launch.env["HPO_OBJECTIVE_METRIC"] = spec.objective.metric;
  launch.env["HPO_FOM_REGEX"] = spec.fom_regex;
  if (!options_.hpo_bin_dir.empty()) {
    const char* path = std::getenv("PATH");
    launch.env["PATH"] = options_.hpo_bin_dir + ":" + (path != nullptr ? path : "/usr/bin:/bin");
  }
  return launch;
}

bool Controller::LaunchPending(SweepRt& sweep, TrialRt& trial) {
  TrialRecord& rec = trial.rec;
  backend::LaunchSpec launch = MakeLaunchSpec(sweep, trial);
  absl::Status s = MakeDirs(rec.trial_dir, 0755);
  if (s.ok()) s = WriteFileAtomic(rec.trial_dir + "/params.json", ParamsToJsonText(rec.params) + "\n", 0644,
                                   /*sync=*/false);  // a copy for the trial; the store holds the truth
  if (!s.ok() && absl::IsUnavailable(s)) {
    // The disk is full or read-only: not the trial's fault. It waits until hpod can write.
    StorageFailed(s);
    sweep.pending.push_back(rec.number);
    return false;
  }
  if (s.ok()) s = backend_.Launch(launch);
  if (!s.ok()) {
    bool infra = absl::IsUnavailable(s) || absl::IsResourceExhausted(s);
    rec.infra_failure = infra;
    EndTrial(sweep, trial, infra ? v1::TRIAL_STATE_LOST : v1::TRIAL_STATE_FAILED,
             absl::StrCat("could not launch: ", s.message()));
    return false;
  }
  rec.state = v1::TRIAL_STATE_LAUNCHING;
  SaveTrial(sweep, trial, v1::EVENT_KIND_TRIAL_STATE);
  return true;
}

void Controller::HandleBackendEvent(const backend::BackendEvent& e) {
  auto [sweep, trial] = FindTrial(e.trial_id);
  if (trial == nullptr || IsFinal(trial->rec.state)) return;
  TrialRecord& rec = trial->rec;
  switch (e.kind) {
    case backend::BackendEvent::Kind::kStarted:
      if (rec.state != v1::TRIAL_STATE_RUNNING) rec.started_at = e.time;  // else re-adopted
      rec.state = v1::TRIAL_STATE_RUNNING;
      rec.backend_id = e.backend_id;
      rec.gpus = e.gpus;
      SaveTrial(*sweep, *trial, v1::EVENT_KIND_TRIAL_STATE);
      break;
    case backend::BackendEvent::Kind::kUpdated:
      rec.backend_id = e.backend_id;
      if (!e.gpus.empty()) rec.gpus = e.gpus;
      SaveTrial(*sweep, *trial, v1::EVENT_KIND_TRIAL_PROGRESS);
      break;
    case backend::BackendEvent::Kind::kExited: {
      rec.exit_code = e.exit_code;
      rec.term_signal = e.term_signal;
      if (trial->stop_state != v1::TRIAL_STATE_UNSPECIFIED) {
        EndTrial(*sweep, *trial, trial->stop_state, trial->stop_reason);
      } else if (e.exit_code == 0) {
        EndTrial(*sweep, *trial, v1::TRIAL_STATE_COMPLETED, "exited 0");
      } else {
        std::string why = !e.message.empty() ? e.message : absl::StrCat("exited with code ", e.exit_code);
        EndTrial(*sweep, *trial, v1::TRIAL_STATE_FAILED, why);
      }
      break;
    }
    case backend::BackendEvent::Kind::kLost:
      if (trial->stop_state != v1::TRIAL_STATE_UNSPECIFIED) {
        EndTrial(*sweep, *trial, trial->stop_state, trial->stop_reason);
      } else {
        rec.infra_failure = true;
        EndTrial(*sweep, *trial, v1::TRIAL_STATE_LOST, e.message);
      }
      break;
  }
}

void Controller::EndTrial(SweepRt& sweep, TrialRt& trial, v1::TrialState state,
                          std::string message) {
  TrialRecord& rec = trial.rec;
  rec.state = state;
  rec.message = std::move(message);
  rec.ended_at = clock_.Now();
  --sweep.active;
  sweep.pending.erase(std::remove(sweep.pending.begin(), sweep.pending.end(), rec.number),
                      sweep.pending.end());
  SaveTrial(sweep, trial, v1::EVENT_KIND_TRIAL_STATE);
  UpdateBest(sweep, trial);
  if (static_cast<size_t>(rec.number) < sweep.history.size()) {
    algorithms::HistoryEntry& h = sweep.history[static_cast<size_t>(rec.number)];
    h.finished = true;
    h.objective = rec.objective;
    sweep.objectives[static_cast<size_t>(rec.number)] = algorithms::ObjectiveColumn(h);
  }
  if (state == v1::TRIAL_STATE_LOST && rec.attempt <= sweep.spec.max_retries &&
      sweep.rec.ending == v1::SWEEP_STATE_UNSPECIFIED && !sweep.Final()) {
    sweep.retries.push_back(rec.number);
  }
  if (state == v1::TRIAL_STATE_FAILED) {
    ++sweep.failed;
    int64_t max_failed = sweep.spec.budget.max_failed;
    if (max_failed > 0 && sweep.failed >= max_failed && sweep.rec.ending == v1::SWEEP_STATE_UNSPECIFIED) {
      BeginEnding(sweep, v1::SWEEP_STATE_FAILED,
                  absl::StrCat(sweep.failed, " trial(s) failed (budget.max_failed is ", max_failed,
                               "); last: trial ", rec.id, " ", rec.message));
    }
  }
}

void Controller::UpdateBest(SweepRt& sweep, TrialRt& trial) {
  const TrialRecord& rec = trial.rec;
  if (!rec.objective ||
      (rec.state != v1::TRIAL_STATE_COMPLETED && rec.state != v1::TRIAL_STATE_STOPPED)) {
    return;
  }
  if (sweep.best < 0 ||
      IsBetter(*rec.objective, *sweep.trials[static_cast<size_t>(sweep.best)]->rec.objective,
               sweep.spec.objective.direction)) {
    sweep.best = rec.number;
  }
}

void Controller::RequestStop(TrialRt& trial, v1::TrialState state, const std::string& reason,
                             std::optional<absl::Duration> after) {
  if (IsFinal(trial.rec.state)) return;
  auto [sweep, unused] = FindTrial(trial.rec.id);
  if (trial.stop_state != v1::TRIAL_STATE_UNSPECIFIED) {
    // Already told to stop; a sweep-level stop (cancel, end) overrides a pending early stop.
    if (after || !trial.enforce_stop_at) return;
    trial.stop_state = state;
    trial.stop_reason = reason;
  } else {
    trial.stop_state = state;
    trial.stop_reason = reason;
  }
  if (trial.rec.state == v1::TRIAL_STATE_PENDING) {
    EndTrial(*sweep, trial, state, reason);
    return;
  }
  if (after) {
    trial.enforce_stop_at = clock_.Now() + *after;
    stops_due_.insert(trial.rec.id);
    return;
  }
  trial.enforce_stop_at.reset();
  absl::Status s = backend_.Stop(trial.rec.id, sweep->spec.stop_grace);
  if (!s.ok() && !absl::IsNotFound(s)) {
    spdlog::warn("trial {}: stop: {}", trial.rec.id, s.ToString());
  }
}

void Controller::EnforceStops() {
  absl::Time now = clock_.Now();
  for (auto it = stops_due_.begin(); it != stops_due_.end();) {
    auto [sweep, trial] = FindTrial(*it);
    if (trial == nullptr || IsFinal(trial->rec.state) || !trial->enforce_stop_at) {
      it = stops_due_.erase(it);
      continue;
    }
    if (now < *trial->enforce_stop_at) {
      ++it;
      continue;
    }
    spdlog::info("trial {} did not stop within {} of being told to; stopping it", trial->rec.id,
                 absl::FormatDuration(sweep->spec.stop_grace));
    trial->enforce_stop_at.reset();
    absl::Status s = backend_.Stop(trial->rec.id, sweep->spec.stop_grace);
    if (!s.ok() && !absl::IsNotFound(s)) spdlog::warn("trial {}: stop: {}", trial->rec.id, s.ToString());
    it = stops_due_.erase(it);
  }
}

void Controller::BeginEnding(SweepRt& sweep, v1::SweepState state, const std::string& message) {
  if (sweep.Final() || sweep.rec.ending != v1::SWEEP_STATE_UNSPECIFIED) return;
  sweep.rec.ending = state;
  sweep.rec.message = message;
  sweep.retries.clear();
  spdlog::info("sweep {}: ending ({}): {}", sweep.rec.id, SweepStateName(state), message);
  v1::TrialState trial_state =
      state == v1::SWEEP_STATE_CANCELED ? v1::TRIAL_STATE_CANCELED : v1::TRIAL_STATE_STOPPED;
  std::string reason = state == v1::SWEEP_STATE_CANCELED ? "the sweep was canceled"
                                                         : absl::StrCat("the sweep ended: ", message);
  for (auto& t : sweep.trials) RequestStop(*t, trial_state, reason);
  if (sweep.active == 0) FinishSweep(sweep, state, message);
  else SaveSweep(sweep);
}

void Controller::FinishSweep(SweepRt& sweep, v1::SweepState state, const std::string& message) {
  if (sweep.Final()) return;
  for (auto& t : sweep.trials) {
    if (t->progress_dirty) SaveTrial(sweep, *t, v1::EVENT_KIND_TRIAL_PROGRESS);
  }
  sweep.rec.state = state;
  sweep.rec.ending = v1::SWEEP_STATE_UNSPECIFIED;
  sweep.rec.message = message;
  sweep.rec.ended_at = clock_.Now();
  spdlog::info("sweep {} {}: {}", sweep.rec.id, SweepStateName(state), message);
  // Every report of an ended sweep is in the indexed table when its end is committed.
  if (absl::Status s = store_.FlushReportLog(); !s.ok()) spdlog::error("store: {}", s.ToString());
  SaveSweep(sweep);
  backend_.SweepEnded(sweep.rec.id);
}

}  // namespace hpo::server
