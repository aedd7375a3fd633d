// TrialLifecycle, what the backend says: a trial started, exited, was interrupted (its next
// segment) or lost, and how each end counts.
#include <algorithm>
#include <deque>

#include "absl/strings/str_cat.h"
#include "common/layout.h"
#include "common/token.h"
#include "hpo/v1/states.h"
#include "server/core/budget.h"
#include "server/core/convert.h"
#include "server/core/objectives.h"
#include "server/core/report_intake.h"
#include "server/core/trial_lifecycle.h"
#include "server/core/usage.h"
#include "server/core/views.h"
#include "server/store/codec.h"
#include "spdlog/spdlog.h"

namespace hpo::server {

void TrialLifecycle::HandleBackendEvent(const backend::BackendEvent& e, bool journal_read) {
  if (e.kind == backend::BackendEvent::Kind::kAllocation) {
    NoteAllocation(e.allocation);
    return;
  }
  auto [sweep, trial] = table_.FindTrial(e.trial_id);
  if (trial == nullptr || v1::IsFinal(trial->rec.state)) return;
  TrialRecord& rec = trial->rec;
  bool ends = e.kind == backend::BackendEvent::Kind::kExited ||
              e.kind == backend::BackendEvent::Kind::kLost;
  if (ends && !journal_read && !rec.trial_dir.empty()) {
    // Reports the trial made while hpod was away count before its end does.
    if (journal_waits_.emplace(rec.id, e).second) files_.ReadJournal(rec.id, rec.trial_dir);
    return;
  }
  switch (e.kind) {
    case backend::BackendEvent::Kind::kStarted:
      if (rec.state != v1::TRIAL_STATE_RUNNING) {  // else re-adopted
        if (!rec.started_at) rec.started_at = e.time;
        rec.segment_started_at = e.time;
      }
      rec.state = v1::TRIAL_STATE_RUNNING;
      rec.backend_id = e.backend_id;
      rec.gpus = e.gpus;
      NoteNodes(*sweep, rec);
      SaveTrial(*sweep, *trial, v1::EVENT_KIND_TRIAL_STATE);
      break;
    case backend::BackendEvent::Kind::kUpdated:
      rec.backend_id = e.backend_id;
      if (!e.gpus.empty()) rec.gpus = e.gpus;
      NoteNodes(*sweep, rec);
      SaveTrial(*sweep, *trial, v1::EVENT_KIND_TRIAL_PROGRESS);
      break;
    case backend::BackendEvent::Kind::kExited: {
      rec.exit_code = e.exit_code;
      rec.term_signal = e.term_signal;
      if (e.ended_first) EndedBeforeCaught(*trial);
      if (trial->stop_requested()) {
        if (!HungContinues(*sweep, *trial, e.time)) {
          EndTrial(*sweep, *trial, trial->rec.stop_state, trial->rec.stop_reason);
        }
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
      } else if (std::optional<std::string> rule = sweep->spec().InfrastructureFailure(
                     e.exit_code, e.term_signal, trial->error_tail)) {
        InfrastructureFailed(*sweep, *trial, *rule, e.time);
      } else {
        std::string why =
            !e.message.empty() ? e.message : absl::StrCat("exited with code ", e.exit_code);
        EndTrial(*sweep, *trial, v1::TRIAL_STATE_FAILED, why);
      }
      std::string().swap(trial->error_tail);
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
        if (!HungContinues(*sweep, *trial, e.time)) {
          EndTrial(*sweep, *trial, trial->rec.stop_state, trial->rec.stop_reason);
        }
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

void TrialLifecycle::PollJournals(bool now) {
  std::vector<TrialFiles::JournalRead> reads = files_.PollJournals();
  if (now) {
    for (const auto& [id, e] : journal_waits_) {
      auto [sweep, trial] = table_.FindTrial(id);
      if (trial != nullptr) reads.push_back(ReadTrialEnd(id, trial->rec.trial_dir));
    }
  }
  for (TrialFiles::JournalRead& read : reads) {
    auto wait = journal_waits_.find(read.trial_id);
    if (wait == journal_waits_.end()) {
      if (hang_reads_.erase(read.trial_id) == 0) continue;
      auto [sweep, trial] = table_.FindTrial(read.trial_id);
      if (trial != nullptr) HangReadDone(*sweep, *trial, read);
      continue;
    }
    backend::BackendEvent e = std::move(wait->second);
    journal_waits_.erase(wait);
    auto [sweep, trial] = table_.FindTrial(read.trial_id);
    if (trial == nullptr || v1::IsFinal(trial->rec.state)) continue;
    if (!read.entries.ok()) {
      spdlog::warn(
          "trial {}: its report journal cannot be read ({}); reports it kept there "
          "are not counted",
          read.trial_id, read.entries.status().ToString());
    } else if (!read.entries->empty() && late_reports_) {
      late_reports_(*sweep, *trial, *read.entries, /*running=*/false);
    }
    trial->last_error_line = std::move(read.last_error_line);
    trial->error_tail = std::move(read.error_tail);
    HandleBackendEvent(e, /*journal_read=*/true);
  }
}

void TrialLifecycle::EndTrial(Sweep& sweep, TrialRuntime& trial, v1::TrialState state,
                              std::string message) {
  TrialRecord& rec = trial.rec;
  rec.state = state;
  rec.message = std::move(message);
  trial.recent_reports.Release();  // no more reports
  trial.pace.gaps.Release();       // nor a watchdog
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
  if (sweep.plan.keeps_curves) {
    sweep.plan.stopper->Ended(CurveOf(trial), state == v1::TRIAL_STATE_COMPLETED);
  }
  SaveTrial(sweep, trial, v1::EVENT_KIND_TRIAL_STATE);
  if (sweep.ChoicesChanged()) Emit(sweep, v1::EVENT_KIND_SWEEP_STATE, nullptr);
  CheckFailFast(sweep, trial);
  if (ended.max_failed_hit && !sweep.Ending()) {
    BeginEnding(
        sweep, v1::SWEEP_STATE_FAILED,
        absl::StrCat(sweep.failed(), " trial(s) failed (budget.max_failed is ",
                     sweep.spec().budget.max_failed, "); last: trial ", rec.id, " ", rec.message));
  }
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

}  // namespace hpo::server
