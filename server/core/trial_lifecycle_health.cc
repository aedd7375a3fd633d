// TrialLifecycle, health (SweepSpec::health): the hang watchdog, which catches a running trial
// that has made no report for its timeout (it gets the health signal, is stopped the health grace
// later, and its segment is interrupted as hung), and fail-fast, which pauses a sweep whose first
// trials all failed at once the same way; and the failures rules, which tell the
// infrastructure's failures from the configuration's.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/core/trial_lifecycle.h"
#include "server/core/usage.h"
#include "spdlog/spdlog.h"

namespace hpo::server {

void TrialLifecycle::CatchHung() {
  absl::Time now = clock_.Now();
  if (now < next_hang_check_) return;
  next_hang_check_ = now + absl::Seconds(1);
  for (auto& [id, sweep] : table_.sweeps()) {
    const Health& health = sweep->spec().health;
    if (sweep->Final() || health.mode == Health::Mode::kNone) continue;
    for (auto& trial : sweep->trials()) {
      const TrialRecord& rec = trial->rec;
      if (rec.state != v1::TRIAL_STATE_RUNNING || trial->stop_requested()) continue;
      if (trial->watched_since == absl::InfinitePast()) trial->watched_since = now;
      std::optional<absl::Duration> timeout = health.TimeoutFor(trial->pace.Median());
      if (!timeout) continue;
      // Silent since its last report, the start of this segment, or this hpod's start,
      // whichever came last.
      absl::Time since =
          std::max({trial->pace.last, rec.segment_started_at.value_or(now), trial->watched_since});
      if (now - since >= *timeout) CaughtHung(*sweep, *trial, now - since, *timeout);
    }
  }
}

void TrialLifecycle::CaughtHung(Sweep& sweep, TrialRuntime& trial, absl::Duration silent,
                                absl::Duration timeout) {
  const Health& health = sweep.spec().health;
  TrialRecord& rec = trial.rec;
  std::string why = absl::StrCat("hung: no report for ",
                                 absl::FormatDuration(absl::Trunc(silent, absl::Seconds(1))),
                                 " (its timeout is ", absl::FormatDuration(timeout), ")");
  // Its end is the infrastructure's kind: retried, or continued, and not counted as failed.
  rec.interruption = v1::INTERRUPTION_HUNG;
  rec.infra_failure = true;
  std::optional<absl::Duration> after;
  if (health.signal != 0) {
    absl::Status s = backend_.SendSignal(rec.id, health.signal);
    if (s.ok()) {
      after = health.grace;
    } else if (!absl::IsUnimplemented(s)) {
      spdlog::warn("trial {}: cannot signal it: {}", rec.id, s.ToString());
    }
  }
  spdlog::warn("trial {}: {}; {}", rec.id, why,
               after ? absl::StrCat("signal ", health.signal, " now, stopped ",
                                    absl::FormatDuration(*after), " later")
                     : std::string("stopped now"));
  RequestStop(sweep, trial, v1::TRIAL_STATE_LOST, why, after);
}

bool TrialLifecycle::HungContinues(Sweep& sweep, TrialRuntime& trial, absl::Time at) {
  TrialRecord& rec = trial.rec;
  if (rec.stop_state != v1::TRIAL_STATE_LOST || rec.interruption != v1::INTERRUPTION_HUNG ||
      !MayResume(sweep, trial)) {
    return false;
  }
  std::string why = rec.stop_reason;
  rec.stop_state = v1::TRIAL_STATE_UNSPECIFIED;
  rec.stop_reason.clear();
  rec.interruption = v1::INTERRUPTION_UNSPECIFIED;
  rec.infra_failure = false;
  trial.enforce_stop_at.reset();
  trial.watched_since = absl::InfinitePast();
  NextSegment(sweep, trial, v1::INTERRUPTION_HUNG, why, at);
  return true;
}

void TrialLifecycle::InfrastructureFailed(Sweep& sweep, TrialRuntime& trial,
                                          const std::string& rule, absl::Time at) {
  TrialRecord& rec = trial.rec;
  std::string why = absl::StrCat(
      "the infrastructure failed it (", rule, ")",
      rec.backend_id.empty() ? std::string() : absl::StrCat(" on ", rec.backend_id),
      trial.last_error_line.empty() ? std::string() : absl::StrCat(": ", trial.last_error_line));
  spdlog::warn("trial {}: {}", rec.id, why);
  CountNodeFailure(sweep, rec, why);
  if (MayResume(sweep, trial)) {
    NextSegment(sweep, trial, v1::INTERRUPTION_NODE_FAILURE, why, at);
    return;
  }
  rec.infra_failure = true;
  rec.interruption = v1::INTERRUPTION_NODE_FAILURE;
  EndTrial(sweep, trial, v1::TRIAL_STATE_LOST, why);
}

void TrialLifecycle::CountNodeFailure(Sweep& sweep, const TrialRecord& trial,
                                      const std::string& why) {
  const int after = sweep.spec().failures.quarantine_after;
  const std::vector<std::string> nodes = backend_.NodesOf(trial.backend_id);
  if (nodes.empty()) return;  // nothing to tell apart (a local process)
  bool changed = false;
  for (const std::string& node : nodes) {
    NodeHealth& n = sweep.rec.nodes[node];
    ++n.failures;
    n.last_failure = why;
    if (after > 0 && n.failures >= after && !n.quarantined) {
      n.quarantined = changed = true;
      spdlog::warn(
          "sweep {}: node {} quarantined after {} infrastructure failure(s) there; nothing more "
          "of the sweep runs on it (hpo nodes {} --allow {} lets it back in)",
          sweep.rec.id, node, n.failures, sweep.rec.id, node);
    }
  }
  if (changed) backend_.ExcludeNodes(sweep.rec.id, sweep.QuarantinedNodes());
  SaveSweep(sweep);
}

void TrialLifecycle::CheckFailFast(Sweep& sweep, const TrialRuntime& trial) {
  const Health& health = sweep.spec().health;
  Sweep::FailFast& ff = sweep.fail_fast;
  const TrialRecord& rec = trial.rec;
  if (ff.over || health.fail_fast <= 0) return;
  // What says nothing of the sweep's configuration (the infrastructure's ends, a cancel) neither
  // counts nor ends the rule.
  if (rec.state == v1::TRIAL_STATE_LOST || rec.state == v1::TRIAL_STATE_CANCELED) return;
  std::optional<absl::Time> start = SegmentStart(rec);
  bool fast = rec.state == v1::TRIAL_STATE_FAILED && !rec.infra_failure && start && rec.ended_at &&
              *rec.ended_at - *start <= health.fail_fast_within;
  bool same =
      ff.count == 0 || (rec.exit_code == ff.exit_code && rec.term_signal == ff.term_signal &&
                        trial.last_error_line == ff.line);
  if (!fast || !same) {
    ff.over = true;
    return;
  }
  if (ff.count++ == 0) {
    ff.exit_code = rec.exit_code;
    ff.term_signal = rec.term_signal;
    ff.line = trial.last_error_line;
  }
  if (ff.count < health.fail_fast) return;
  ff.over = true;
  if (sweep.rec.state != v1::SWEEP_STATE_RUNNING || sweep.Ending()) return;
  std::string how = ff.term_signal != 0 ? absl::StrCat("signal ", ff.term_signal)
                                        : absl::StrCat("exit code ", ff.exit_code);
  std::string message =
      absl::StrCat("paused: its first ", ff.count, " trials all failed within ",
                   absl::FormatDuration(health.fail_fast_within), " the same way (", how, ")",
                   ff.line.empty() ? std::string() : absl::StrCat(": ", ff.line),
                   "; fix the cause and resume it (hpo resume ", sweep.rec.id, ")");
  spdlog::warn("sweep {}: {}", sweep.rec.id, message);
  sweep.Pause(message);
  SaveSweep(sweep);
}

}  // namespace hpo::server
