#include "server/core/trial_lifecycle.h"

#include <algorithm>
#include <cstdlib>
#include <deque>

#include "absl/strings/str_cat.h"
#include "common/layout.h"
#include "common/token.h"
#include "hpo/v1/states.h"
#include "server/core/budget.h"
#include "server/core/convert.h"
#include "server/core/objectives.h"
#include "server/core/usage.h"
#include "server/core/views.h"
#include "server/store/codec.h"
#include "spdlog/spdlog.h"

namespace hpo::server {

namespace {

v1::Interruption ToProto(backend::Interruption i) {
  switch (i) {
    case backend::Interruption::kTimeLimit:
      return v1::INTERRUPTION_TIME_LIMIT;
    case backend::Interruption::kPreempted:
      return v1::INTERRUPTION_PREEMPTED;
    case backend::Interruption::kNodeFailure:
      return v1::INTERRUPTION_NODE_FAILURE;
    case backend::Interruption::kCanceledOutside:
      return v1::INTERRUPTION_CANCELED_OUTSIDE;
    case backend::Interruption::kVanished:
      return v1::INTERRUPTION_VANISHED;
    case backend::Interruption::kNone:
      break;
  }
  return v1::INTERRUPTION_UNSPECIFIED;
}

}  // namespace

TrialLifecycle::TrialLifecycle(Options options, SweepTable& table, Store& store,
                               backend::Backend& backend, TrialFiles& files, EventPublisher& events,
                               const Clock& clock)
    : options_(std::move(options)),
      table_(table),
      store_(store),
      backend_(backend),
      files_(files),
      events_(events),
      clock_(clock) {}

bool TrialLifecycle::Writable() const { return store_.Health().ok() && files_.Health().ok(); }

void TrialLifecycle::Tick() {
  for (const backend::BackendEvent& e : backend_.Poll()) HandleBackendEvent(e);
  PollFiles();
  EnforceStops();
  for (auto& [id, sweep] : table_.sweeps()) {
    if (!sweep->Final()) Schedule(*sweep);
  }
  FlushProgress();
}

// ---------------------------------------------------------------------------------------------
// Store and events

void TrialLifecycle::Emit(Sweep& sweep, v1::EventKind kind, const TrialRuntime* trial) {
  events_.Emit(sweep.rec.id, trial != nullptr ? trial->rec.id : 0,
               EventView(sweep, kind, trial, clock_.Now()));
}

void TrialLifecycle::SaveTrial(Sweep& sweep, TrialRuntime& trial, v1::EventKind kind) {
  if (absl::Status s = store_.UpdateTrial(trial.rec); !s.ok()) {
    spdlog::error("trial {}: {}", trial.rec.id, s.ToString());
  }
  trial.progress_dirty = false;
  trial.last_saved = clock_.Now();
  if (kind == v1::EVENT_KIND_TRIAL_STATE) {
    spdlog::debug("sweep {} trial {} (#{}): {} {}", sweep.rec.id, trial.rec.id, trial.rec.number,
                  v1::StateName(trial.rec.state), trial.rec.message);
  }
  Emit(sweep, kind, &trial);
}

void TrialLifecycle::SaveSweep(Sweep& sweep) {
  if (absl::Status s = store_.UpdateSweep(sweep.rec); !s.ok()) {
    spdlog::error("sweep {}: {}", sweep.rec.id, s.ToString());
  }
  Emit(sweep, v1::EVENT_KIND_SWEEP_STATE, nullptr);
}

void TrialLifecycle::Announce(Sweep& sweep) { Emit(sweep, v1::EVENT_KIND_SWEEP_STATE, nullptr); }

void TrialLifecycle::MarkProgress(TrialRuntime& trial) {
  if (trial.progress_dirty) return;
  trial.progress_dirty = true;
  dirty_.insert(trial.rec.id);
}

void TrialLifecycle::FlushProgress() {
  // Each trial's progress is saved at most once per progress_interval, each on its own
  // schedule, so that no single tick writes every trial at once.
  absl::Time now = clock_.Now();
  for (auto it = dirty_.begin(); it != dirty_.end();) {
    auto [sweep, trial] = table_.FindTrial(*it);
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

// ---------------------------------------------------------------------------------------------
// Scheduling

void TrialLifecycle::Schedule(Sweep& sweep) {
  if (sweep.Ending()) {
    if (sweep.active() == 0) FinishSweep(sweep, sweep.rec.ending, sweep.rec.message);
    return;
  }
  const SweepSpec& spec = sweep.spec();
  if (WallTimeRanOut(spec.budget, sweep.rec.created_at, clock_.Now())) {
    BeginEnding(sweep, v1::SWEEP_STATE_TIMED_OUT,
                absl::StrCat("budget.wall_time (", absl::FormatDuration(*spec.budget.wall_time),
                             ") ran out"));
    return;
  }
  if (sweep.rec.state == v1::SWEEP_STATE_PAUSED) return;
  if (!Writable()) return;  // no new work while hpod cannot write its data
  CheckBudgets(sweep);
  if (External(sweep)) {  // its trials are made when asked for, and end when told
    CheckSilence(sweep);
    if (!sweep.MoreToCreate() && sweep.active() == 0) {
      FinishSweep(sweep, v1::SWEEP_STATE_COMPLETED,
                  absl::StrCat("all ", sweep.trials().size(), " trial(s) ended"));
    }
    return;
  }
  // Trials already created go first. Each one that fits starts, so a smaller trial may pass a
  // larger one that waits for resources (backfill) — unless the oldest waiting trial has waited
  // longer than kBackfillLimit: then nothing passes it. A trial whose directory is not made yet
  // waits for it without holding others back.
  std::deque<int64_t> waiting = sweep.TakeWaiting();
  bool blocked = false;
  for (int64_t number : waiting) {
    TrialRuntime& t = sweep.trial(number);
    if (v1::IsFinal(t.rec.state)) continue;
    if (t.files != TrialRuntime::Files::kReady) {
      PrepareFiles(sweep, t);
      if (!v1::IsFinal(t.rec.state)) sweep.Wait(number);
      continue;
    }
    if (blocked ||
        !backend_.CanLaunch(sweep.rec.id, TrialResources(sweep, t.rec), spec.placement)) {
      sweep.Wait(number);
      if (sweep.pending().size() == 1 && clock_.Now() - t.rec.created_at > kBackfillLimit) {
        blocked = true;
      }
      continue;
    }
    LaunchPending(sweep, t);
  }
  if (blocked) return;
  // New trials while there is room, one directory at a time: a trial whose directory is still
  // being made would otherwise leave the room it will take looking free. Their directories were
  // asked for ahead, so they are usually made already.
  RequestDirsAhead(sweep);
  PollFiles();
  backend::Resources smallest = spec.MinResources();
  smallest.needs = Needs(sweep);
  while (sweep.active() < spec.budget.max_concurrent && sweep.preparing() == 0 &&
         backend_.CanLaunch(sweep.rec.id, smallest, spec.placement)) {
    if (!CreateTrial(sweep)) break;
  }
  if (!sweep.MoreToCreate() && sweep.active() == 0) {
    int64_t done = static_cast<int64_t>(sweep.trials().size());
    FinishSweep(sweep, v1::SWEEP_STATE_COMPLETED,
                sweep.budget_spent()
                    ? absl::StrCat(*sweep.budget_spent(), " was reached; ", done, " trial(s) ended")
                    : absl::StrCat("all ", done, " trial(s) ended"));
  }
}

bool TrialLifecycle::External(const Sweep& sweep) {
  return sweep.spec().placement.backend == "external";
}

void TrialLifecycle::CheckSilence(Sweep& sweep) {
  absl::Time now = clock_.Now();
  for (auto& t : sweep.trials()) {
    TrialRecord& rec = t->rec;
    if (rec.state != v1::TRIAL_STATE_RUNNING) continue;
    absl::Time heard = rec.started_at.value_or(rec.created_at);
    if (t->last_report) heard = std::max(heard, t->last_report->time);
    if (now - heard < sweep.spec().external_timeout) continue;
    backend_.Reclaim(rec.id, rec.backend_id);
    rec.infra_failure = true;
    rec.interruption = v1::INTERRUPTION_VANISHED;
    EndTrial(sweep, *t, v1::TRIAL_STATE_LOST,
             absl::StrCat("not heard from (no report, no tell) for ",
                          absl::FormatDuration(sweep.spec().external_timeout)));
  }
}

absl::StatusOr<TrialRuntime*> TrialLifecycle::Ask(Sweep& sweep) {
  if (!External(sweep)) {
    return absl::FailedPreconditionError(
        absl::StrCat("sweep ", sweep.rec.id, " runs its trials on ", sweep.spec().placement.backend,
                     "; ask and tell are for a sweep with backend: external"));
  }
  if (sweep.Final() || sweep.Ending() || sweep.rec.state != v1::SWEEP_STATE_RUNNING) {
    return absl::FailedPreconditionError(
        absl::StrCat("sweep ", sweep.rec.id, " is ",
                     v1::StateName(sweep.Ending() ? sweep.rec.ending : sweep.rec.state),
                     sweep.Ending() ? " (ending)" : "", ": it gives out no trial"));
  }
  if (!Writable()) return absl::UnavailableError("hpod cannot write its data now; ask again later");
  CheckBudgets(sweep);
  if (sweep.active() >= sweep.spec().budget.max_concurrent) {
    return absl::ResourceExhaustedError(
        absl::StrCat("sweep ", sweep.rec.id, " has ", sweep.active(),
                     " trial(s) out, its budget.max_concurrent; ", "tell one first"));
  }
  size_t before = sweep.trials().size();
  if (!sweep.MoreToCreate() || !CreateTrial(sweep) || sweep.trials().size() == before) {
    return absl::OutOfRangeError(
        absl::StrCat("sweep ", sweep.rec.id, " has no trial left to give out"));
  }
  TrialRuntime& trial = *sweep.trials().back();
  for (const backend::BackendEvent& e : backend_.Poll()) HandleBackendEvent(e);  // it starts now
  return &trial;
}

absl::Status TrialLifecycle::Tell(Sweep& sweep, TrialRuntime& trial, bool completed,
                                  const std::string& message) {
  if (!External(sweep)) {
    return absl::FailedPreconditionError(
        absl::StrCat("trial ", trial.rec.id, " runs on ", sweep.spec().placement.backend,
                     "; hpod learns how it ended by itself (tell is for backend: external)"));
  }
  if (trial.rec.state != v1::TRIAL_STATE_RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat("trial ", trial.rec.id, " is ",
                                                      v1::StateName(trial.rec.state),
                                                      ", not running: nothing to tell"));
  }
  backend::BackendEvent e =
      backend::BackendEvent::Of(backend::BackendEvent::Kind::kExited, trial.rec.id, clock_.Now());
  e.exit_code = completed ? 0 : 1;
  e.message = !message.empty() ? message : completed ? "" : "told failed";
  backend_.Reclaim(trial.rec.id, trial.rec.backend_id);
  HandleBackendEvent(e);
  return absl::OkStatus();
}

void TrialLifecycle::CheckBudgets(Sweep& sweep) {
  std::optional<std::string> spent = sweep.CheckHourBudgets(clock_.Now());
  if (!spent) return;
  Usage usage = MeasureUsage(sweep, clock_.Now());
  spdlog::info(
      "sweep {}: {} reached ({:.3f} GPU-hours, {:.3f} node-hours): no trial starts any more",
      sweep.rec.id, *spent, usage.GpuSeconds() / 3600, usage.NodeSeconds() / 3600);
  // Trials that never ran do not start; those between segments go on.
  for (auto& t : sweep.trials()) {
    if (t->rec.state == v1::TRIAL_STATE_PENDING && !t->rec.started_at) {
      EndTrial(sweep, *t, v1::TRIAL_STATE_CANCELED,
               absl::StrCat("the sweep's ", *spent, " was reached before it started"));
    }
  }
}

void TrialLifecycle::NoteAllocation(const backend::AllocationUsage& allocation) {
  Sweep* sweep = table_.FindSweep(allocation.sweep_id);
  if (sweep == nullptr) {
    spdlog::warn("allocation {} of sweep {}, which hpod does not know", allocation.id,
                 allocation.sweep_id);
    return;
  }
  if (!sweep->NoteAllocation(allocation)) return;
  if (absl::Status s = store_.WriteAllocation(allocation); !s.ok()) {
    spdlog::error("sweep {}: {}", sweep->rec.id, s.ToString());
  }
  Emit(*sweep, v1::EVENT_KIND_SWEEP_STATE, nullptr);  // its GPU-hours changed pace
}

bool TrialLifecycle::CreateTrial(Sweep& sweep) {
  auto rt = std::make_unique<TrialRuntime>();
  TrialRecord& rec = rt->rec;
  std::optional<algorithms::Params> queued;
  if (std::optional<int64_t> retry = sweep.TakeRetry()) {
    const TrialRecord& original = sweep.trial(*retry).rec;
    rec.params = original.params;
    rec.parent = original.parent;
    rec.lineage = original.lineage;
    rec.attempt = original.attempt + 1;
    rec.retry_of = original.id;
    rec.origin = original.origin;
  } else if ((queued = sweep.TakeQueued())) {  // given configurations go first
    rec.params = std::move(*queued);
    rec.origin = kEnqueued;
    if (absl::Status s = store_.UpdateSweep(sweep.rec); !s.ok()) {
      spdlog::error("sweep {}: {}", sweep.rec.id, s.ToString());
    }
  } else {
    if (!sweep.MoreToCreate()) return false;
    algorithms::SuggestRequest req;
    req.space = &sweep.spec().space;
    req.history = &sweep.history();
    req.objectives = &sweep.objectives();
    req.trial_number = sweep.sampled();
    req.seed = sweep.spec().seed;
    req.direction = sweep.spec().objective.direction;
    if (!sweep.plan.directions.empty()) req.directions = &sweep.plan.directions;
    algorithms::SuggestOutput output;
    req.output = &output;
    absl::StatusOr<std::optional<algorithms::Params>> params = sweep.plan.sampler->Suggest(req);
    if (!params.ok()) {
      BeginEnding(sweep, v1::SWEEP_STATE_FAILED,
                  absl::StrCat("the sampler failed: ", params.status().message()));
      return false;
    }
    if (!params->has_value()) {
      sweep.SamplerExhausted();
      return false;
    }
    rec.params = std::move(**params);
    rec.parent = output.parent;
    rec.lineage = output.lineage;
  }
  rec.sweep_id = sweep.rec.id;
  rec.number = static_cast<int64_t>(sweep.trials().size());
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
  TrialRuntime& trial = table_.AddTrial(sweep, std::move(rt));  // counted, and active
  Emit(sweep, v1::EVENT_KIND_TRIAL_STATE, &trial);
  PrepareFiles(sweep, trial);
  if (v1::IsFinal(trial.rec.state)) return true;
  if (trial.files == TrialRuntime::Files::kReady &&
      backend_.CanLaunch(sweep.rec.id, TrialResources(sweep, rec), sweep.spec().placement)) {
    LaunchPending(sweep, trial);
  } else {
    sweep.Wait(trial.rec.number);
  }
  return true;
}

void TrialLifecycle::RequestDir(Sweep& sweep, int64_t number) {
  std::string dir = options_.data_dir.trial_dir(sweep.rec.id, number);
  dir_requests_[dir] = {sweep.rec.id, number};
  files_.Prepare(std::move(dir));
}

void TrialLifecycle::RequestDirsAhead(Sweep& sweep) {
  int64_t next = static_cast<int64_t>(sweep.trials().size());
  int64_t until = next + std::min<int64_t>(kDirsAhead, sweep.spec().budget.max_concurrent);
  if (sweep.plan.limit > 0) {  // not past the sweep's last trial (retries take numbers too)
    until = std::min(
        until, std::max(sweep.plan.limit, next + static_cast<int64_t>(sweep.retries().size())));
  }
  auto [from, to] = sweep.RequestDirsUntil(until);
  for (int64_t number = from; number < to; ++number) RequestDir(sweep, number);
}

void TrialLifecycle::PollFiles() {
  for (const TrialFiles::Prepared& p : files_.Poll()) ApplyPrepared(p);
}

void TrialLifecycle::PrepareFiles(Sweep& sweep, TrialRuntime& trial) {
  if (trial.files != TrialRuntime::Files::kNone) return;
  if (External(sweep)) {  // it runs elsewhere: hpod makes no directory for it
    trial.files = TrialRuntime::Files::kReady;
    trial.rec.trial_dir.clear();
    return;
  }
  int64_t number = trial.rec.number;
  if (std::optional<absl::Status> made = sweep.TakeDirMadeAhead(number)) {
    trial.files = TrialRuntime::Files::kReady;
    if (!made->ok()) {
      EndTrial(sweep, trial, v1::TRIAL_STATE_FAILED,
               absl::StrCat("cannot make its directory: ", made->message()));
    }
    return;
  }
  trial.files = TrialRuntime::Files::kPreparing;
  sweep.PreparingStarted();
  if (number >= sweep.dirs_requested() || !dir_requests_.count(trial.rec.trial_dir)) {
    RequestDir(sweep, number);
  }
  PollFiles();  // a fast seam has it made already
}

void TrialLifecycle::ApplyPrepared(const TrialFiles::Prepared& p) {
  auto request = dir_requests_.find(p.dir);
  if (request == dir_requests_.end()) return;
  auto [sweep_id, number] = request->second;
  dir_requests_.erase(request);
  Sweep* sweep = table_.FindSweep(sweep_id);
  if (sweep == nullptr) return;
  if (number >= static_cast<int64_t>(sweep->trials().size())) {  // made ahead of its trial
    sweep->DirMadeAhead(number, p.status);
    return;
  }
  TrialRuntime& trial = sweep->trial(number);
  if (trial.files != TrialRuntime::Files::kPreparing) return;
  sweep->PreparingDone();
  trial.files = TrialRuntime::Files::kReady;
  if (v1::IsFinal(trial.rec.state) || p.status.ok()) return;
  EndTrial(*sweep, trial, v1::TRIAL_STATE_FAILED,
           absl::StrCat("cannot make its directory: ", p.status.message()));
}

backend::LaunchSpec TrialLifecycle::MakeLaunchSpec(const Sweep& sweep,
                                                   const TrialRuntime& trial) const {
  const TrialRecord& rec = trial.rec;
  const SweepSpec& spec = sweep.spec();
  const layout::TrialDir dir(rec.trial_dir);
  backend::LaunchSpec launch;
  launch.trial_id = rec.id;
  launch.sweep_id = sweep.rec.id;
  // A resumed segment continues from its own checkpoint; a PBT trial's first, from its parent's.
  std::string checkpoint_in;
  if (rec.segment > 1) {
    checkpoint_in = dir.checkpoint();
  } else if (rec.parent >= 0 && static_cast<size_t>(rec.parent) < sweep.trials().size()) {
    checkpoint_in = layout::TrialDir(sweep.trial(rec.parent).rec.trial_dir).checkpoint();
  }
  launch.argv = spec.RenderCommand(rec.params, rec.id, rec.number, sweep.rec.id, rec.trial_dir,
                                   checkpoint_in);
  launch.workdir = spec.workdir;
  launch.trial_dir = rec.trial_dir;
  launch.resources = TrialResources(sweep, rec);
  launch.placement = spec.placement;
  launch.stop_signal = spec.stop_signal;
  launch.segment = rec.segment;
  if (spec.checkpoint.resumable) {
    launch.checkpoint_signal = spec.checkpoint.signal;
    launch.checkpoint_grace = spec.checkpoint.grace;
  }
  launch.env = spec.env;
  launch.env["HPO_ENDPOINT"] = options_.report_endpoint;
  if (!options_.tls_ca.empty()) launch.env["HPO_TLS_CA"] = options_.tls_ca;
  launch.env["HPO_SWEEP_ID"] = std::to_string(sweep.rec.id);
  launch.env["HPO_TRIAL_ID"] = std::to_string(rec.id);
  launch.env["HPO_TRIAL_NUMBER"] = std::to_string(rec.number);
  launch.env["HPO_TRIAL_TOKEN"] = rec.token;
  launch.env["HPO_TRIAL_DIR"] = rec.trial_dir;
  launch.env["HPO_CHECKPOINT_IN"] = checkpoint_in;
  launch.env["HPO_CHECKPOINT_OUT"] = dir.checkpoint();
  launch.env["HPO_SEGMENT"] = std::to_string(rec.segment);
  // hpo-shim (or a Slurm job's script) writes it into the trial directory as params.json before
  // the command starts.
  launch.env["HPO_PARAMS_JSON"] = ParamsToJsonText(rec.params);
  launch.env["HPO_OBJECTIVE_METRIC"] = spec.objective.metric;
  launch.env["HPO_FOM_REGEX"] = spec.fom_regex;
  if (!options_.hpo_bin_dir.empty()) {
    const char* path = std::getenv("PATH");
    launch.env["PATH"] = options_.hpo_bin_dir + ":" + (path != nullptr ? path : "/usr/bin:/bin");
  }
  return launch;
}

absl::Duration TrialLifecycle::Needs(const Sweep& sweep) {
  const SweepSpec& spec = sweep.spec();
  // A resumable trial continues elsewhere; it needs time to work, not only to checkpoint.
  if (spec.checkpoint.resumable) return 2 * spec.checkpoint.grace;
  if (spec.resources.time_limit > absl::ZeroDuration()) return spec.resources.time_limit;
  return sweep.longest_completed();
}

backend::Resources TrialLifecycle::TrialResources(const Sweep& sweep, const TrialRecord& rec) {
  backend::Resources r = sweep.spec().TrialResources(rec.params);
  r.needs = Needs(sweep);
  return r;
}

bool TrialLifecycle::LaunchPending(Sweep& sweep, TrialRuntime& trial) {
  TrialRecord& rec = trial.rec;
  // The backend takes the trial's room now and starts it once this batch (with the trial
  // LAUNCHING) is durable: a restart finds it again, or launches it, never twice.
  absl::Status s = backend_.Launch(MakeLaunchSpec(sweep, trial));
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

void TrialLifecycle::HandleBackendEvent(const backend::BackendEvent& e) {
  if (e.kind == backend::BackendEvent::Kind::kAllocation) {
    NoteAllocation(e.allocation);
    return;
  }
  auto [sweep, trial] = table_.FindTrial(e.trial_id);
  if (trial == nullptr || v1::IsFinal(trial->rec.state)) return;
  TrialRecord& rec = trial->rec;
  switch (e.kind) {
    case backend::BackendEvent::Kind::kStarted:
      if (rec.state != v1::TRIAL_STATE_RUNNING) {  // else re-adopted
        if (!rec.started_at) rec.started_at = e.time;
        rec.segment_started_at = e.time;
      }
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
      if (trial->stop_requested()) {
        EndTrial(*sweep, *trial, trial->rec.stop_state, trial->rec.stop_reason);
      } else if (rec.checkpoint_requested != v1::INTERRUPTION_UNSPECIFIED &&
                 MayResume(*sweep, *trial)) {
        // Told to checkpoint (recorded before the signal): however it exited, even while hpod
        // was down, the trial goes on from its checkpoint.
        NextSegment(
            *sweep, *trial, rec.checkpoint_requested,
            absl::StrCat("exited with code ", e.exit_code, " after it was told to checkpoint"),
            e.time);
      } else if (e.exit_code == 0) {
        EndTrial(*sweep, *trial, v1::TRIAL_STATE_COMPLETED, "exited 0");
      } else {
        std::string why =
            !e.message.empty() ? e.message : absl::StrCat("exited with code ", e.exit_code);
        EndTrial(*sweep, *trial, v1::TRIAL_STATE_FAILED, why);
      }
      break;
    }
    case backend::BackendEvent::Kind::kLaunchFailed:
      rec.infra_failure = e.infra;
      EndTrial(*sweep, *trial, e.infra ? v1::TRIAL_STATE_LOST : v1::TRIAL_STATE_FAILED,
               absl::StrCat("could not launch: ", e.message));
      break;
    case backend::BackendEvent::Kind::kAllocation:
      break;  // above
    case backend::BackendEvent::Kind::kCheckpoint:
      // Durable before the backend sends the signal (it does at the next Act, after the commit).
      rec.checkpoint_requested = ToProto(e.interruption);
      spdlog::info("trial {}: {}; it is told to checkpoint", rec.id, e.message);
      SaveTrial(*sweep, *trial, v1::EVENT_KIND_TRIAL_PROGRESS);
      break;
    case backend::BackendEvent::Kind::kLost:
      if (trial->stop_requested()) {
        EndTrial(*sweep, *trial, trial->rec.stop_state, trial->rec.stop_reason);
      } else if ((e.interruption != backend::Interruption::kNone ||
                  rec.checkpoint_requested != v1::INTERRUPTION_UNSPECIFIED) &&
                 MayResume(*sweep, *trial)) {
        NextSegment(*sweep, *trial,
                    e.interruption != backend::Interruption::kNone ? ToProto(e.interruption)
                                                                   : rec.checkpoint_requested,
                    e.message, e.time);
      } else {
        rec.infra_failure = true;
        rec.interruption = ToProto(e.interruption);
        EndTrial(*sweep, *trial, v1::TRIAL_STATE_LOST, e.message);
      }
      break;
  }
}

void TrialLifecycle::EndTrial(Sweep& sweep, TrialRuntime& trial, v1::TrialState state,
                              std::string message) {
  TrialRecord& rec = trial.rec;
  rec.state = state;
  rec.message = std::move(message);
  rec.ended_at = clock_.Now();
  if (std::optional<absl::Time> start = SegmentStart(rec)) {
    rec.gpu_seconds += sweep.SegmentGpuSeconds(rec, *start, *rec.ended_at);
  }
  // What hpod measures, where an objective or a constraint reads it, among the last metrics.
  const SweepSpec& spec = sweep.spec();
  if (rec.started_at && (spec.Uses(kRuntimeMetric) || spec.Uses(kGpuHoursMetric))) {
    AddMeasuredMetrics(rec, sweep.TrialGpus(rec), *rec.ended_at, rec.last_metrics);
  }
  Sweep::Ended ended = sweep.TrialEnded(trial);
  SaveTrial(sweep, trial, v1::EVENT_KIND_TRIAL_STATE);
  if (ended.max_failed_hit && !sweep.Ending()) {
    BeginEnding(
        sweep, v1::SWEEP_STATE_FAILED,
        absl::StrCat(sweep.failed(), " trial(s) failed (budget.max_failed is ",
                     sweep.spec().budget.max_failed, "); last: trial ", rec.id, " ", rec.message));
  }
}

std::optional<absl::Time> TrialLifecycle::SegmentStart(const TrialRecord& rec) {
  if (rec.segment_started_at) return rec.segment_started_at;
  if (rec.segment == 1 && rec.started_at) return rec.started_at;  // stored before segments
  return std::nullopt;
}

bool TrialLifecycle::MayResume(const Sweep& sweep, const TrialRuntime& trial) const {
  const Checkpointing& c = sweep.spec().checkpoint;
  return c.resumable && trial.rec.segment < c.max_segments && !sweep.Ending() && !sweep.Final();
}

void TrialLifecycle::NextSegment(Sweep& sweep, TrialRuntime& trial, v1::Interruption why,
                                 const std::string& message, absl::Time at) {
  TrialRecord& rec = trial.rec;
  SegmentRecord seg;
  seg.number = rec.segment;
  seg.started_at = SegmentStart(rec).value_or(at);
  seg.ended_at = at;
  seg.backend_id = rec.backend_id;
  seg.gpus = rec.gpus;
  seg.gpu_seconds = sweep.SegmentGpuSeconds(rec, seg.started_at, at);
  seg.interruption = why;
  seg.message = message;
  spdlog::info("trial {}: segment {} ended ({}); it continues from its checkpoint", rec.id,
               seg.number, message);
  rec.gpu_seconds += seg.gpu_seconds;
  rec.segments.push_back(std::move(seg));
  ++rec.segment;
  rec.segment_started_at.reset();
  rec.state = v1::TRIAL_STATE_PENDING;
  rec.backend_id.clear();
  rec.gpus.clear();
  rec.exit_code = 0;
  rec.term_signal = 0;
  rec.checkpoint_requested = v1::INTERRUPTION_UNSPECIFIED;
  rec.message = absl::StrCat("segment ", rec.segment - 1, " interrupted (",
                             v1::InterruptionName(why), "); it continues from its checkpoint");
  // It goes first: it holds its place in the sweep already.
  sweep.Wait(rec.number, /*first=*/true);
  SaveTrial(sweep, trial, v1::EVENT_KIND_TRIAL_STATE);
}

void TrialLifecycle::RequestStop(Sweep& sweep, TrialRuntime& trial, v1::TrialState state,
                                 const std::string& reason, std::optional<absl::Duration> after) {
  if (v1::IsFinal(trial.rec.state)) return;
  // Already told to stop: a sweep-level stop (cancel, end) overrides a pending early stop.
  if (trial.stop_requested() && (after || !trial.enforce_stop_at)) return;
  trial.rec.stop_state = state;
  trial.rec.stop_reason = reason;
  if (trial.rec.state == v1::TRIAL_STATE_PENDING) {
    EndTrial(sweep, trial, state, reason);
    return;
  }
  // The decision is in this batch; the backend acts on it once the batch committed (Act), so a
  // trial being stopped when hpod dies still ends in `state`.
  SaveTrial(sweep, trial, v1::EVENT_KIND_TRIAL_PROGRESS);
  if (after) {
    trial.enforce_stop_at = clock_.Now() + *after;
    stops_due_.insert(trial.rec.id);
    return;
  }
  trial.enforce_stop_at.reset();
  absl::Status s = backend_.Stop(trial.rec.id, sweep.spec().stop_grace);
  if (!s.ok() && !absl::IsNotFound(s)) {
    spdlog::warn("trial {}: stop: {}", trial.rec.id, s.ToString());
  }
}

void TrialLifecycle::ResumeStop(Sweep& sweep, TrialRuntime& trial) {
  if (!trial.stop_requested() || v1::IsFinal(trial.rec.state)) return;
  trial.enforce_stop_at = clock_.Now() + sweep.spec().stop_grace;
  stops_due_.insert(trial.rec.id);
}

void TrialLifecycle::EnforceStops() {
  absl::Time now = clock_.Now();
  for (auto it = stops_due_.begin(); it != stops_due_.end();) {
    auto [sweep, trial] = table_.FindTrial(*it);
    if (trial == nullptr || v1::IsFinal(trial->rec.state) || !trial->enforce_stop_at) {
      it = stops_due_.erase(it);
      continue;
    }
    if (now < *trial->enforce_stop_at) {
      ++it;
      continue;
    }
    spdlog::info("trial {} did not stop within {} of being told to; stopping it", trial->rec.id,
                 absl::FormatDuration(sweep->spec().stop_grace));
    trial->enforce_stop_at.reset();
    absl::Status s = backend_.Stop(trial->rec.id, sweep->spec().stop_grace);
    if (!s.ok() && !absl::IsNotFound(s)) {
      spdlog::warn("trial {}: stop: {}", trial->rec.id, s.ToString());
    }
    it = stops_due_.erase(it);
  }
}

void TrialLifecycle::BeginEnding(Sweep& sweep, v1::SweepState state, const std::string& message,
                                 bool override) {
  if (!sweep.BeginEnding(state, message, override)) return;
  spdlog::info("sweep {}: ending ({}): {}", sweep.rec.id, v1::StateName(state), message);
  v1::TrialState trial_state =
      state == v1::SWEEP_STATE_CANCELED ? v1::TRIAL_STATE_CANCELED : v1::TRIAL_STATE_STOPPED;
  std::string reason = state == v1::SWEEP_STATE_CANCELED
                           ? "the sweep was canceled"
                           : absl::StrCat("the sweep ended: ", message);
  for (auto& t : sweep.trials()) RequestStop(sweep, *t, trial_state, reason);
  if (sweep.active() == 0) {
    FinishSweep(sweep, state, message);
  } else {
    SaveSweep(sweep);
  }
}

void TrialLifecycle::FinishSweep(Sweep& sweep, v1::SweepState state, const std::string& message) {
  if (sweep.Final()) return;
  for (auto& t : sweep.trials()) {
    if (t->progress_dirty) SaveTrial(sweep, *t, v1::EVENT_KIND_TRIAL_PROGRESS);
  }
  sweep.Finish(state, message, clock_.Now());
  spdlog::info("sweep {} {}: {}", sweep.rec.id, v1::StateName(state), message);
  SaveSweep(sweep);
  backend_.SweepEnded(sweep.rec.id);
}

void TrialLifecycle::EndAllLost() {
  for (auto& [id, sweep] : table_.sweeps()) {
    // The backend releases what it holds as hpod exits: the allocations' cost ends now.
    for (const auto& [alloc_id, a] : sweep->allocations()) {
      if (a.ended_at) continue;
      AllocationRecord ended = a;
      ended.ended_at = clock_.Now();
      NoteAllocation(ended);
    }
    for (auto& t : sweep->trials()) {
      if (v1::IsFinal(t->rec.state)) continue;
      backend_.Reclaim(t->rec.id, t->rec.backend_id);
      if (t->rec.state == v1::TRIAL_STATE_RUNNING && !t->stop_requested() &&
          MayResume(*sweep, *t)) {
        NextSegment(*sweep, *t, v1::INTERRUPTION_DAEMON, "hpod stopped while the trial ran",
                    clock_.Now());
        continue;
      }
      t->rec.infra_failure = true;
      t->rec.interruption = v1::INTERRUPTION_DAEMON;
      EndTrial(*sweep, *t, v1::TRIAL_STATE_LOST, "hpod stopped while the trial ran");
    }
  }
}

}  // namespace hpo::server
