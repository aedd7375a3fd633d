// TrialLifecycle, health (SweepSpec::health): the hang watchdog, which catches a running trial
// that has made no report for its timeout (it gets the health signal, is stopped the health grace
// later, and its segment is interrupted as hung) — counting only time in which hpod could hear
// it, and only after its journal says the same — and fail-fast, which pauses a sweep whose first
// trials all failed at once the same way; and the failures rules, which tell the
// infrastructure's failures from the configuration's.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/task_output.h"
#include "server/core/trial_lifecycle.h"
#include "server/core/usage.h"
#include "spdlog/spdlog.h"

namespace hpo::server {

void TrialLifecycle::NoteAway() {
  absl::Time now = clock_.Now();
  if (last_tick_ != absl::InfinitePast() && now - last_tick_ > kAwayAfter) {
    hearing_since_ = now;
    spdlog::warn(
        "hpod did not run for {} (it was stopped, swapped out, or its host or a file system "
        "froze): the trials' silence counts from now, not from before",
        absl::FormatDuration(absl::Trunc(now - last_tick_, absl::Seconds(1))));
  }
  last_tick_ = now;
}

std::optional<TrialLifecycle::Silence> TrialLifecycle::SilentPastTimeout(const Sweep& sweep,
                                                                         TrialRuntime& trial,
                                                                         absl::Time now) {
  const TrialRecord& rec = trial.rec;
  if (rec.state != v1::TRIAL_STATE_RUNNING || trial.stop_requested()) return std::nullopt;
  if (trial.watched_since == absl::InfinitePast()) trial.watched_since = now;
  std::optional<absl::Duration> timeout = sweep.spec().health.TimeoutFor(trial.pace.Median());
  if (!timeout) return std::nullopt;
  // While hpod cannot hear what runs the trial (an allocation's agent out of touch), silence
  // says nothing of the trial: a partition is not a hang.
  std::optional<absl::Time> in_touch = backend_.InTouchSince(rec.backend_id, now);
  if (!in_touch) return std::nullopt;
  // Silent since its last report, the start of this segment, this hpod's start, hpod's return
  // from being away, or the return of its agent, whichever came last.
  absl::Time since = std::max({trial.pace.last, rec.segment_started_at.value_or(now),
                               trial.watched_since, hearing_since_, *in_touch});
  if (now - since < *timeout) return std::nullopt;
  return Silence{now - since, *timeout};
}

void TrialLifecycle::CatchHung() {
  absl::Time now = clock_.Now();
  if (now < next_hang_check_) return;
  next_hang_check_ = now + absl::Seconds(1);
  for (auto& [id, sweep] : table_.sweeps()) {
    if (sweep->Final()) continue;
    ExpireQuarantines(*sweep, now);
    if (sweep->spec().health.mode == Health::Mode::kNone) continue;
    for (auto& trial : sweep->trials()) {
      std::optional<Silence> silent = SilentPastTimeout(*sweep, *trial, now);
      if (!silent) continue;
      // What the trial's side says first: a trial that kept reporting into its journal while
      // hpod did not hear it (a report path cut, hpod's own stall) is not hung. The journal is
      // read on the files' thread; PollJournals decides.
      if (!trial->rec.trial_dir.empty()) {
        if (hang_reads_.insert(trial->rec.id).second) {
          files_.ReadJournal(trial->rec.id, trial->rec.trial_dir);
        }
        continue;
      }
      CaughtHung(*sweep, *trial, silent->silent, silent->timeout);
    }
  }
}

void TrialLifecycle::HangReadDone(Sweep& sweep, TrialRuntime& trial,
                                  TrialFiles::JournalRead& read) {
  if (read.entries.ok() && !read.entries->empty() && late_reports_) {
    late_reports_(sweep, trial, *read.entries, /*running=*/true);
  }
  if (sweep.Final() || sweep.spec().health.mode == Health::Mode::kNone) return;
  std::optional<Silence> silent = SilentPastTimeout(sweep, trial, clock_.Now());
  if (silent) CaughtHung(sweep, trial, silent->silent, silent->timeout);
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
  CheckInfrastructureBudget(sweep, rec, why);
}

namespace {

bool CaughtAsHung(const TrialRecord& rec) {
  return rec.stop_state == v1::TRIAL_STATE_LOST && rec.interruption == v1::INTERRUPTION_HUNG;
}

// Takes the watchdog's stop back: the trial runs (or ends) as if it had not been caught.
void Uncatch(TrialRuntime& trial) {
  TrialRecord& rec = trial.rec;
  rec.stop_state = v1::TRIAL_STATE_UNSPECIFIED;
  rec.stop_reason.clear();
  rec.interruption = v1::INTERRUPTION_UNSPECIFIED;
  rec.infra_failure = false;
  trial.enforce_stop_at.reset();
  trial.watched_since = absl::InfinitePast();
}

}  // namespace

bool TrialLifecycle::HungContinues(Sweep& sweep, TrialRuntime& trial, absl::Time at) {
  if (!CaughtAsHung(trial.rec) || !MayResume(sweep, trial)) return false;
  std::string why = trial.rec.stop_reason;
  Uncatch(trial);
  NextSegment(sweep, trial, v1::INTERRUPTION_HUNG, why, at);
  return true;
}

void TrialLifecycle::EndedBeforeCaught(TrialRuntime& trial) {
  if (!CaughtAsHung(trial.rec)) return;
  spdlog::info(
      "trial {}: it had ended before the watchdog's signal or stop reached it (its end was on its "
      "way to hpod): not hung after all, its end is its own",
      trial.rec.id);
  Uncatch(trial);
}

void TrialLifecycle::InfrastructureFailed(Sweep& sweep, TrialRuntime& trial,
                                          const std::string& rule, absl::Time at) {
  TrialRecord& rec = trial.rec;
  std::string why = absl::StrCat(
      "the infrastructure failed it (", rule, ")",
      rec.backend_id.empty() ? std::string() : absl::StrCat(" on ", rec.backend_id),
      trial.last_error_line.empty() ? std::string() : absl::StrCat(": ", trial.last_error_line));
  spdlog::warn("trial {}: {}", rec.id, why);
  // In a trial of several tasks, the node of the task that failed first, when srun said.
  CountNodeFailure(sweep, rec, why,
                   sweep.spec().MultiTask() ? SplitTaskOutput(trial.error_tail).culprit_node : "");
  if (MayResume(sweep, trial)) {
    NextSegment(sweep, trial, v1::INTERRUPTION_NODE_FAILURE, why, at);
  } else {
    rec.infra_failure = true;
    rec.interruption = v1::INTERRUPTION_NODE_FAILURE;
    EndTrial(sweep, trial, v1::TRIAL_STATE_LOST, why);
  }
  CheckInfrastructureBudget(sweep, rec, why);
}

void TrialLifecycle::NoteNodes(Sweep& sweep, const TrialRecord& trial) {
  bool added = false;
  for (const std::string& node : backend_.NodesOf(trial.backend_id)) {
    added |= sweep.rec.nodes.try_emplace(node).second;
  }
  if (added) SaveSweep(sweep);
}

void TrialLifecycle::CountNodeFailure(Sweep& sweep, const TrialRecord& trial,
                                      const std::string& why, const std::string& culprit_node) {
  const FailureRules& rules = sweep.spec().failures;
  std::vector<std::string> nodes = backend_.NodesOf(trial.backend_id);
  if (nodes.empty()) return;  // nothing to tell apart (a local process)
  if (std::find(nodes.begin(), nodes.end(), culprit_node) != nodes.end()) nodes = {culprit_node};
  bool changed = false;
  for (const std::string& node : nodes) {
    NodeHealth& n = sweep.rec.nodes[node];
    ++n.failures;
    n.last_failure = why;
    if (rules.quarantine_after <= 0 || n.failures < rules.quarantine_after || n.quarantined) {
      continue;
    }
    // Of the nodes the sweep ran on, at most the share (at least none) may be out at once.
    const int known = static_cast<int>(sweep.rec.nodes.size());
    const int cap = static_cast<int>(std::floor(rules.quarantine_max_share * known + 1e-9));
    const int out = static_cast<int>(sweep.QuarantinedNodes().size());
    if (out + 1 > cap) {
      spdlog::warn(
          "sweep {}: node {} had {} infrastructure failure(s), but it is not quarantined: {} of "
          "the sweep's {} node(s) are already, and failures.quarantine_max_share allows {} (a "
          "fault on that many nodes is seldom the nodes'; look at hpo nodes {})",
          sweep.rec.id, node, n.failures, out, known, cap, sweep.rec.id);
      continue;
    }
    n.quarantined = changed = true;
    n.quarantined_at = clock_.Now();
    spdlog::warn(
        "sweep {}: node {} quarantined after {} infrastructure failure(s) there; nothing more of "
        "the sweep runs on it {}(hpo nodes {} --allow {} lets it back in)",
        sweep.rec.id, node, n.failures,
        rules.quarantine_for > absl::ZeroDuration()
            ? absl::StrCat("for ", absl::FormatDuration(rules.quarantine_for), " ")
            : std::string(),
        sweep.rec.id, node);
  }
  if (changed) backend_.ExcludeNodes(sweep.rec.id, sweep.QuarantinedNodes());
  SaveSweep(sweep);
}

void TrialLifecycle::ExpireQuarantines(Sweep& sweep, absl::Time now) {
  const absl::Duration lasts = sweep.spec().failures.quarantine_for;
  if (lasts <= absl::ZeroDuration()) return;
  bool changed = false;
  for (auto& [node, n] : sweep.rec.nodes) {
    if (!n.quarantined || n.quarantined_at == absl::InfinitePast() ||
        now - n.quarantined_at < lasts) {
      continue;
    }
    n.quarantined = false;
    n.quarantined_at = absl::InfinitePast();
    n.failures = 0;
    changed = true;
    spdlog::warn(
        "sweep {}: the quarantine of node {} ended after {} (failures.quarantine_for); the sweep "
        "may run there again (its last failure there: {})",
        sweep.rec.id, node, absl::FormatDuration(lasts), n.last_failure);
  }
  if (!changed) return;
  backend_.ExcludeNodes(sweep.rec.id, sweep.QuarantinedNodes());
  SaveSweep(sweep);
}

int TrialLifecycle::InfrastructureLosses(const Sweep& sweep) {
  auto infrastructure = [](v1::Interruption i) {
    return i == v1::INTERRUPTION_NODE_FAILURE || i == v1::INTERRUPTION_HUNG;
  };
  int n = 0;
  for (const auto& t : sweep.trials()) {
    for (const auto& seg : t->rec.segments) n += infrastructure(seg.interruption);
    n += t->rec.infra_failure && infrastructure(t->rec.interruption);
  }
  return n;
}

void TrialLifecycle::CheckInfrastructureBudget(Sweep& sweep, const TrialRecord& trial,
                                               const std::string& why) {
  const int budget = sweep.spec().failures.max_infrastructure;
  if (budget <= 0 || sweep.rec.state != v1::SWEEP_STATE_RUNNING || sweep.Ending()) return;
  const int lost = InfrastructureLosses(sweep);
  if (lost == 0 || lost % budget != 0) return;
  std::string message =
      absl::StrCat("paused: ", lost,
                   " of its trials were lost to the infrastructure (failures.max_infrastructure "
                   "is ",
                   budget, "); the last, trial ", trial.id, ": ", why, "; see hpo nodes ",
                   sweep.rec.id, ", then resume it (hpo resume ", sweep.rec.id, ")");
  spdlog::warn("sweep {}: {}", sweep.rec.id, message);
  sweep.Pause(message);
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
