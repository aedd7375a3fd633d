// TrialLifecycle, scheduling: what fits starts (backfill), new trials are made up to the
// budget and the concurrency, the hour budgets and allocations are kept, and the launch spec.
#include <time.h>

#include <algorithm>
#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/crypto.h"
#include "common/layout.h"
#include "common/token.h"
#include "hpo/v1/states.h"
#include "server/core/budget.h"
#include "server/core/convert.h"
#include "server/core/objectives.h"
#include "server/core/trial_lifecycle.h"
#include "server/core/usage.h"
#include "server/core/views.h"
#include "server/store/codec.h"
#include "spdlog/spdlog.h"

namespace hpo::server {

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
    if (suggested_ > 0 && suggesting_ >= options_.suggest_slice) {  // the rest in the next batch
      if (resume_after_ == 0) resume_after_ = sweep.rec.id;
      if (more_) more_();
      return;
    }
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

bool TrialLifecycle::CreateTrial(Sweep& sweep, bool now) {
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
    std::optional<Suggestion> suggestion = NextSuggestion(sweep, now);
    if (!suggestion) return false;  // one is on its way
    absl::StatusOr<std::optional<algorithms::Params>>& params = suggestion->params;
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
    rec.parent = suggestion->output.parent;
    rec.lineage = suggestion->output.lineage;
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
  if (sweep.ChoicesChanged()) Emit(sweep, v1::EVENT_KIND_SWEEP_STATE, nullptr);
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

std::optional<Suggestion> TrialLifecycle::NextSuggestion(Sweep& sweep, bool now) {
  SweepSuggestions& s = sweep.suggestions;
  if (now && s.waiting() == 0) {
    Suggestion made;
    algorithms::SuggestRequest req = sweep.NextRequest();
    req.output = &made.output;
    made.params = sweep.plan.sampler->Suggest(req);
    return made;
  }
  if (s.waiting() == 0 && !s.asking()) {
    const SweepSpec& spec = sweep.spec();
    // On the suggester's thread: as many as the sweep has places free and trials left.
    int64_t count = std::max<int64_t>(1, spec.budget.max_concurrent - sweep.active());
    if (sweep.plan.limit > 0) count = std::min(count, sweep.plan.limit - sweep.Counted());
    count = std::clamp<int64_t>(count, 1, kProposalsPerRequest);
    timespec cpu0{}, cpu1{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
    suggester_.Ask(sweep.rec.id, s, sweep.plan.sampler, sweep.plan.keeps_curves,
                   sweep.NextRequest(), static_cast<int>(count));
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
    suggesting_ += absl::DurationFromTimespec(cpu1) - absl::DurationFromTimespec(cpu0);
    ++suggested_;
  }
  return s.Take();
}

void TrialLifecycle::PollSuggestions() {
  suggester_.Poll([this](int64_t sweep_id) -> SweepSuggestions* {
    Sweep* sweep = table_.FindSweep(sweep_id);
    return sweep != nullptr ? &sweep->suggestions : nullptr;
  });
}

bool TrialLifecycle::Suggesting() const {
  for (const auto& [id, sweep] : table_.sweeps()) {
    if (sweep->suggestions.asking()) return true;
  }
  return false;
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
  // Where hpod says it listens now: a reporter that misses HPO_ENDPOINT looks there, so that
  // trials follow a hpod that came back elsewhere (another port, another node).
  if (!options_.data_dir.root().empty()) {
    launch.env["HPO_ENDPOINT_FILE"] = options_.data_dir.endpoint_path();
  }
  if (!options_.tls_ca_pem.empty()) launch.env[kTlsCaDataEnv] = Base64Encode(options_.tls_ca_pem);
  // Slurm's own name for it makes the files of a trial's batch job (its output) private too.
  launch.env[layout::kUmaskEnv] = launch.env["SLURM_UMASK"] =
      absl::StrFormat("%04o", options_.umask);
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

}  // namespace hpo::server
