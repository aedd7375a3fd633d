// TrialLifecycle, ask and tell (`backend: external`): trials given out and told back, and those
// not heard from.
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
  if (!sweep.MoreToCreate() || !CreateTrial(sweep, /*now=*/true) ||
      sweep.trials().size() == before) {
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

}  // namespace hpo::server
