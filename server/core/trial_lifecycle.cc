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

TrialLifecycle::TrialLifecycle(Options options, SweepTable& table, Store& store,
                               backend::Backend& backend, TrialFiles& files, EventPublisher& events,
                               const Clock& clock)
    : options_(std::move(options)),
      table_(table),
      store_(store),
      backend_(backend),
      files_(files),
      events_(events),
      clock_(clock),
      suggester_(options_.suggest_thread) {
  hearing_since_ = clock_.Now();  // hpod's start
}

bool TrialLifecycle::Writable() const { return store_.Health().ok() && files_.Health().ok(); }

void TrialLifecycle::Tick() {
  NoteAway();
  for (const backend::BackendEvent& e : backend_.Poll()) HandleBackendEvent(e);
  PollJournals();
  PollFiles();
  PollSuggestions();
  EnforceStops();
  CatchHung();
  // Every sweep schedules; the one after the sweep that last ran out of the suggestion slice
  // goes first, so that one large sweep does not hold the others' new trials back.
  suggesting_ = absl::ZeroDuration();
  suggested_ = 0;
  auto& sweeps = table_.sweeps();
  auto first = sweeps.upper_bound(resume_after_);
  resume_after_ = 0;
  for (auto it = first; it != sweeps.end(); ++it) {
    if (!it->second->Final()) Schedule(*it->second);
  }
  for (auto it = sweeps.begin(); it != first; ++it) {
    if (!it->second->Final()) Schedule(*it->second);
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

}  // namespace hpo::server
