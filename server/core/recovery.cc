#include "server/core/recovery.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "hpo/v1/states.h"
#include "server/core/budget.h"
#include "server/core/report_intake.h"
#include "spdlog/spdlog.h"

namespace hpo::server {

absl::StatusOr<Sweep*> Recovery::LoadSweep(SweepRecord rec) {
  auto sweep = std::make_unique<Sweep>();
  // With the defaults it was submitted under, and read as it was stored: what a later release
  // refuses of an accepted file does not end it.
  auto defaults = std::find_if(defaults_.begin(), defaults_.end(), [&](const SpecDefaults& d) {
    return d.version == rec.defaults_version;
  });
  PlanResult planned;
  if (defaults == defaults_.end()) {
    planned.errors.push_back(absl::StrCat("it was submitted under sweep-file defaults version ",
                                          rec.defaults_version, ", which this hpod (", kVersion,
                                          ") does not know"));
  } else {
    planned = PlanSweep(rec.spec_yaml, rec.source, rec.base_dir, nullptr,
                        ParseOptions{&*defaults, /*lenient=*/true});
  }
  if (planned.plan && !planned.warnings.empty() && !v1::IsFinal(rec.state)) {
    spdlog::warn(
        "sweep {}: this hpod ({}) would refuse its file, submitted to hpod {}; it runs "
        "as stored: {}",
        rec.id, kVersion, rec.hpod_version.empty() ? "(unknown)" : rec.hpod_version,
        absl::StrJoin(planned.warnings, "; "));
  }
  if (planned.plan) {
    sweep->plan = std::move(*planned.plan);
    // Where it was submitted to run (a sweep from before hpod had several backends: the
    // default), and the budget as `hpo extend` left it.
    if (rec.backend.empty()) rec.backend = backend_.Resolve(backend::Placement()).value_or("");
    sweep->plan.spec.placement.backend = rec.backend;
    ApplyBudgetChange(sweep->plan, rec.budget_change);
  } else if (!v1::IsFinal(rec.state)) {
    rec.state = v1::SWEEP_STATE_FAILED;
    rec.message = absl::StrCat("the sweep's spec no longer validates: ", planned.errors.front());
    rec.ended_at = clock_.Now();
    RETURN_IF_ERROR(store_.UpdateSweep(rec));
  }
  sweep->rec = std::move(rec);
  // Its quarantined nodes stay out, also of the allocations taken back below.
  if (!v1::IsFinal(sweep->rec.state) && !sweep->QuarantinedNodes().empty()) {
    backend_.ExcludeNodes(sweep->rec.id, sweep->QuarantinedNodes());
  }
  ASSIGN_OR_RETURN(std::vector<TrialRecord> trials, store_.LoadTrials(sweep->rec.id));
  ASSIGN_OR_RETURN(std::vector<AllocationRecord> allocations,
                   store_.LoadAllocations(sweep->rec.id));
  for (const AllocationRecord& a : allocations) {
    // One not seen to end may still be held: the backend takes it back, or says when it ended.
    if (!a.ended_at) backend_.AdoptAllocation(a);
    sweep->NoteAllocation(a);
  }
  Sweep& s = table_.AddSweep(std::move(sweep));
  for (TrialRecord& t : trials) {  // counted by origin and state, finished ones ranked
    auto rt = std::make_unique<TrialRuntime>();
    rt->rec = std::move(t);
    table_.AddTrial(s, std::move(rt));
  }
  return &s;
}

absl::Status Recovery::Replay(Sweep& sweep, TrialRuntime& trial) {
  bool final = v1::IsFinal(trial.rec.state);
  ASSIGN_OR_RETURN(std::vector<ReportRecord> reports, store_.LoadReports(trial.rec.id));
  const Objective& objective = sweep.spec().objective;
  if (!final) {  // the row is rebuilt from the reports, which are the truth
    trial.rec.report_count = 0;
    trial.rec.objective.reset();
  }
  std::optional<int64_t> reached;          // of a final trial, whose row is kept as stored
  std::map<std::string, double> replayed;  // ... and its metrics as of each report
  for (const ReportRecord& r : reports) {
    std::optional<double> value;
    if (final) {
      if (RepeatsEarlierStep(trial.rec.segment, r.step, reached)) continue;
      reached = std::max(reached.value_or(r.step), r.step);
      auto it = r.metrics.find(objective.metric);
      if (it != r.metrics.end()) value = it->second;
    } else {
      value = ApplyReport(r, objective, trial.rec);
    }
    if (!sweep.plan.keeps_curves) continue;
    if (sweep.spec().Pareto()) {
      // The scores as they were at the report: the last metrics then (a finished trial's are
      // rebuilt here too) and what hpod had measured by its time.
      std::map<std::string, double> stored;
      if (final) {
        for (const auto& [k, v] : r.metrics) replayed[k] = v;
        stored = std::exchange(trial.rec.last_metrics, replayed);
      }
      bool added = AppendScores(sweep, trial, r.step, r.time);
      if (final) trial.rec.last_metrics = std::move(stored);
      if (!added) continue;
    } else {
      if (!value) continue;
      trial.curve.emplace_back(r.step, *value);
    }
    // The stopper gets its records back: every stored point, as it was told of them.
    (void)sweep.plan.stopper->Observe(CurveOf(trial), objective.direction);
  }
  if (!final && !reports.empty()) {
    trial.last_report = reports.back();
    size_t from = reports.size() > TrialRuntime::kRecentReports
                      ? reports.size() - TrialRuntime::kRecentReports
                      : 0;
    for (size_t i = from; i < reports.size(); ++i) {
      trial.NoteReport(reports[i].report_id, reports[i].step);
    }
  }
  return absl::OkStatus();
}

void Recovery::TellEnded(Sweep& sweep) {
  std::vector<const TrialRuntime*> ended;
  for (const auto& t : sweep.trials()) {
    if (v1::IsFinal(t->rec.state)) ended.push_back(t.get());
  }
  auto at = [](const TrialRuntime* t) { return t->rec.ended_at.value_or(absl::InfinitePast()); };
  std::stable_sort(ended.begin(), ended.end(),
                   [&](const TrialRuntime* a, const TrialRuntime* b) { return at(a) < at(b); });
  for (const TrialRuntime* t : ended) {
    sweep.plan.stopper->Ended(CurveOf(*t), t->rec.state == v1::TRIAL_STATE_COMPLETED);
  }
}

void Recovery::Adopt(Sweep& sweep, TrialRuntime& trial) {
  // The trial may still run (it outlives the daemon), or have ended while hpod was away: the
  // backend looks for it. Its directory exists, or it would not have been launched.
  trial.files = TrialRuntime::Files::kReady;
  absl::Status adopted =
      backend_.Adopt(lifecycle_.MakeLaunchSpec(sweep, trial), trial.rec.backend_id, trial.rec.gpus);
  if (adopted.ok()) {
    ++readopted_;
    lifecycle_.ResumeStop(sweep, trial);  // a stop decided before the restart still holds
    return;
  }
  // Nothing of it runs and nothing says it ran: it was only waiting to start, or its launch was
  // decided but never carried out (hpod died in between). It waits to start again.
  bool never_started =
      trial.rec.state == v1::TRIAL_STATE_PENDING ||
      (trial.rec.state == v1::TRIAL_STATE_LAUNCHING && trial.rec.backend_id.empty());
  if (never_started && absl::IsNotFound(adopted)) {
    trial.rec.state = v1::TRIAL_STATE_PENDING;
    trial.files = TrialRuntime::Files::kNone;
    sweep.Wait(trial.rec.number);
    return;
  }
  backend_.Reclaim(trial.rec.id, trial.rec.backend_id);
  std::string why = absl::StrCat("hpod restarted while the trial ran, and ", adopted.message());
  if (trial.rec.state == v1::TRIAL_STATE_RUNNING && !trial.stop_requested() &&
      lifecycle_.MayResume(sweep, trial)) {
    // Told to checkpoint before hpod went: that is what ended the segment.
    v1::Interruption cause = trial.rec.checkpoint_requested != v1::INTERRUPTION_UNSPECIFIED
                                 ? trial.rec.checkpoint_requested
                                 : v1::INTERRUPTION_DAEMON;
    lifecycle_.NextSegment(sweep, trial, cause, why, clock_.Now());
    ++resumed_;
    return;
  }
  trial.rec.infra_failure = true;
  trial.rec.interruption = v1::INTERRUPTION_DAEMON;
  lifecycle_.EndTrial(sweep, trial, v1::TRIAL_STATE_LOST, why);
  ++lost_;
}

absl::Status Recovery::Run() {
  ASSIGN_OR_RETURN(std::vector<SweepRecord> records, store_.LoadSweeps());
  RETURN_IF_ERROR(store_.Begin());
  absl::Status s = [&]() -> absl::Status {
    for (SweepRecord& rec : records) {
      if (rec.state == v1::SWEEP_STATE_UNSPECIFIED) {
        // Stored by a submit that never answered (hpod stopped while the backend vetted it):
        // as if it had not been made. What the backend took for it is a leftover it ends.
        spdlog::warn(
            "sweep {} '{}' was being submitted when hpod stopped; its submit never answered, so "
            "it is removed",
            rec.id, rec.name);
        RETURN_IF_ERROR(store_.DeleteSweep(rec.id));
        continue;
      }
      ASSIGN_OR_RETURN(Sweep * loaded, LoadSweep(std::move(rec)));
      Sweep& sweep = *loaded;
      if (!sweep.plan.sampler) {  // ended FAILED: nothing of it runs again
        for (auto& t : sweep.trials()) {
          if (v1::IsFinal(t->rec.state)) continue;
          backend_.Reclaim(t->rec.id, t->rec.backend_id);
          t->rec.infra_failure = true;
          lifecycle_.EndTrial(sweep, *t, v1::TRIAL_STATE_LOST, sweep.rec.message);
        }
        continue;
      }
      // LOST trials whose retry was not created yet are retried now (the retry queue lives in
      // memory only).
      std::set<int64_t> retried;
      for (auto& t : sweep.trials()) {
        if (t->rec.retry_of != 0) retried.insert(t->rec.retry_of);
      }
      bool may_retry = !sweep.Final() && !sweep.Ending();
      for (auto& t : sweep.trials()) {
        if (may_retry && t->rec.state == v1::TRIAL_STATE_LOST && !retried.count(t->rec.id) &&
            t->rec.attempt <= sweep.spec().max_retries) {
          sweep.QueueRetry(t->rec.number);
        }
      }
      std::vector<TrialRuntime*> running;
      for (auto& t : sweep.trials()) {
        bool final = v1::IsFinal(t->rec.state);
        // Early stopping compares curves: every trial's comes back from its reports (not
        // needed once the sweep ended).
        if (final && (!sweep.plan.keeps_curves || sweep.Final())) continue;
        RETURN_IF_ERROR(Replay(sweep, *t));
        if (!final) running.push_back(t.get());
      }
      if (sweep.plan.keeps_curves && !sweep.Final()) TellEnded(sweep);
      sweep.ChoicesChanged();  // as rebuilt: what watchers were told before the restart
      for (TrialRuntime* t : running) Adopt(sweep, *t);
      // A sweep that was ending when the daemon stopped still ends: its re-adopted trials are
      // stopped again (the earlier request lived in memory only).
      if (sweep.Ending() && !sweep.Final()) {
        lifecycle_.BeginEnding(sweep, sweep.rec.ending, std::string(sweep.rec.message),
                               /*override=*/true);
      }
    }
    return absl::OkStatus();
  }();
  if (!s.ok()) {
    store_.Rollback();
    return s;
  }
  absl::Status commit = store_.Commit();
  events_.Committed(commit);
  RETURN_IF_ERROR(commit);
  spdlog::info(
      "recovered {} sweep(s): {} trial(s) re-adopted, {} continued from their checkpoints, {} "
      "LOST and retried per policy",
      table_.sweeps().size(), readopted_, resumed_, lost_);
  return absl::OkStatus();
}

}  // namespace hpo::server
