// TrialLifecycle, stops: a trial told to stop and made to, a sweep winding down and ending,
// and every trial at shutdown.
#include <algorithm>
#include <deque>

#include "absl/strings/str_cat.h"
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
  sweep.suggestions.Cancel();  // no new trial: no proposal
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
  sweep.suggestions.Cancel();
  spdlog::info("sweep {} {}: {}", sweep.rec.id, v1::StateName(state), message);
  SaveSweep(sweep);
  backend_.SweepEnded(sweep.rec.id);
}

void TrialLifecycle::EndAllLost() {
  PollJournals(/*now=*/true);  // ends known already are what they are, not LOST
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
