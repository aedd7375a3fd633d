#include "server/core/report_intake.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/proofs.h"
#include "common/token.h"
#include "hpo/v1/states.h"
#include "server/core/objectives.h"
#include "spdlog/spdlog.h"

namespace hpo::server {
namespace {

bool ValidMetricName(absl::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

constexpr int kMaxMetricsPerReport = 64;
constexpr int64_t kMaxStep = int64_t{1} << 53;

}  // namespace

std::optional<double> ApplyReport(const ReportRecord& report, const Objective& objective,
                                  TrialRecord& rec) {
  std::optional<int64_t> reached;
  if (rec.report_count > 0) reached = rec.step;
  ++rec.report_count;
  if (RepeatsEarlierStep(rec.segment, report.step, reached)) return std::nullopt;
  rec.step = report.step;
  for (const auto& [k, v] : report.metrics) rec.last_metrics[k] = v;
  auto it = report.metrics.find(objective.metric);
  if (it == report.metrics.end()) return std::nullopt;
  double value = it->second;
  if (!objective.use_best || !rec.objective ||
      IsBetter(value, *rec.objective, objective.direction)) {
    rec.objective = value;
  }
  return value;
}

algorithms::Curve CurveOf(const TrialRuntime& trial) {
  return {trial.rec.number,
          {trial.curve.data(), trial.curve.size()},
          false,
          {trial.vectors.data(), trial.vectors.size()}};
}

bool AppendScores(const Sweep& sweep, TrialRuntime& trial, int64_t step, absl::Time at) {
  if (!trial.curve.empty() && step <= trial.curve.back().first) return false;
  std::map<std::string, double> metrics = trial.rec.last_metrics;
  AddMeasuredMetrics(trial.rec, sweep.TrialGpus(trial.rec), at, metrics);
  Scores scores = ScoresOf(sweep.spec(), metrics);
  if (!scores.complete) return false;
  trial.curve.emplace_back(step, scores.values.front());
  trial.vectors.insert(trial.vectors.end(), scores.values.begin(), scores.values.end());
  trial.vectors.push_back(scores.violation);
  return true;
}

absl::Status ReportIntake::Validate(const v1::ReportRequest& req, int64_t trial_id) {
  if (req.metrics().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("report for trial ", trial_id, " has no metrics"));
  }
  if (req.metrics_size() > kMaxMetricsPerReport) {
    return absl::InvalidArgumentError(absl::StrCat("report for trial ", trial_id, " has ",
                                                   req.metrics_size(), " metrics; at most ",
                                                   kMaxMetricsPerReport));
  }
  for (const auto& [name, value] : req.metrics()) {
    if (!ValidMetricName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("report for trial ", trial_id, ": bad metric name '", name.substr(0, 64),
                       "' (letters, digits, _ . / -; starting with a letter or _; at most 128)"));
    }
    if (absl::StartsWith(name, kMeasuredPrefix)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "report for trial ", trial_id, ": metric '", name.substr(0, 64), "': names under ",
          kMeasuredPrefix, " are the metrics hpod measures itself (", kRuntimeMetric, ", ",
          kGpuHoursMetric, ")"));
    }
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat("report for trial ", trial_id, ": metric '",
                                                     name, "' is ", value,
                                                     "; only finite values are stored"));
    }
  }
  return absl::OkStatus();
}

std::string ReportIntake::ProofOf(const v1::ReportRequest& req, absl::string_view token) {
  std::map<std::string, double> metrics(req.metrics().begin(), req.metrics().end());
  return ReportProof(
      token, req.trial_id(), req.has_step() ? std::optional<int64_t>(req.step()) : std::nullopt,
      req.report_id(), req.has_time() ? std::optional<double>(req.time()) : std::nullopt, metrics);
}

bool ReportIntake::IsRetry(const TrialRuntime& trial, const v1::ReportRequest& req) {
  if (!trial.last_report) return false;
  if (req.report_id() != 0) return trial.last_report->report_id == req.report_id();
  if (!req.has_step() || trial.last_report->step != req.step()) return false;
  std::map<std::string, double> metrics(req.metrics().begin(), req.metrics().end());
  return trial.last_report->metrics == metrics;
}

std::optional<int64_t> ReportIntake::StoredEarlier(const TrialRuntime& trial,
                                                   const v1::ReportRequest& req) {
  if (req.report_id() == 0 || !trial.last_report) return std::nullopt;
  const ReportRecord& last = *trial.last_report;
  bool older = req.has_step() ? req.step() <= last.step
                              : req.has_time() && req.time() < UnixSeconds(last.time);
  if (!older) return std::nullopt;
  if (late_.trial_id != trial.rec.id) {
    absl::StatusOr<std::vector<ReportRecord>> stored = store_.LoadReports(trial.rec.id);
    if (!stored.ok()) return std::nullopt;
    late_.trial_id = trial.rec.id;
    late_.steps.clear();
    for (const ReportRecord& r : *stored) {
      if (r.report_id != 0) late_.steps[r.report_id] = r.step;
    }
  }
  auto it = late_.steps.find(req.report_id());
  if (it == late_.steps.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<v1::ReportResponse> ReportIntake::Report(const v1::ReportRequest& req,
                                                        absl::string_view token,
                                                        std::string* refusal_proof) {
  auto [sweep, trial] = table_.FindTrial(req.trial_id());
  // An unknown trial and a wrong token (or proof) look the same to the caller: nothing to probe.
  bool proven = !req.proof().empty();
  if (trial == nullptr || !(proven ? ProofsEqual(req.proof(), ProofOf(req, trial->rec.token))
                                   : TokensEqual(token, trial->rec.token))) {
    return absl::UnauthenticatedError(
        absl::StrCat("report for trial ", req.trial_id(), ": the token is not this trial's"));
  }
  absl::StatusOr<v1::ReportResponse> resp = Accept(*sweep, *trial, req);
  if (!proven) return resp;
  // The trial takes hpod's word only with hpod's proof.
  if (resp.ok()) {
    resp->set_proof(ReportReplyProof(trial->rec.token, req.proof(), resp->action(), resp->step()));
  } else if (refusal_proof != nullptr) {
    *refusal_proof =
        ReportRefusalProof(trial->rec.token, req.proof(), static_cast<int>(resp.status().code()));
  }
  return resp;
}

absl::StatusOr<v1::ReportResponse> ReportIntake::Accept(Sweep& sweep, TrialRuntime& trial,
                                                        const v1::ReportRequest& req) {
  TrialRecord& rec = trial.rec;
  if (v1::IsFinal(rec.state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("report for trial ", rec.id, ": the trial already ended (",
                     v1::StateName(rec.state), "); nothing stored"));
  }
  if (absl::Status health = store_.Health(); !health.ok()) {
    return absl::UnavailableError(
        absl::StrCat("hpod cannot store reports now (", health.message(), "); retry later"));
  }
  if (absl::Status s = Validate(req, rec.id); !s.ok()) return s;
  v1::ReportResponse resp;
  if (std::optional<int64_t> stored = trial.StoredStep(req.report_id())) {
    resp.set_step(*stored);  // stored already: answered the same
  } else if (IsRetry(trial, req)) {
    resp.set_step(trial.last_report->step);
  } else if (std::optional<int64_t> earlier = StoredEarlier(trial, req)) {
    resp.set_step(*earlier);
  } else {
    if (absl::Status s = Take(sweep, trial, req, /*may_stop=*/true); !s.ok()) return s;
    resp.set_step(trial.last_report->step);
    if (late_.trial_id == rec.id) late_.steps[req.report_id()] = trial.last_report->step;
  }
  resp.set_action(trial.stop_requested() ? v1::ReportResponse::ACTION_STOP
                                         : v1::ReportResponse::ACTION_CONTINUE);
  resp.set_reason(trial.rec.stop_reason);
  return resp;
}

absl::Status ReportIntake::Take(Sweep& sweep, TrialRuntime& trial, const v1::ReportRequest& req,
                                bool may_stop) {
  TrialRecord& rec = trial.rec;
  int64_t step = req.has_step() ? req.step() : std::max<int64_t>(rec.step, 0) + 1;
  if (step < 0 || step > kMaxStep) {
    return absl::InvalidArgumentError(
        absl::StrCat("report for trial ", rec.id, ": step ", step, " is out of range [0, 2^53]"));
  }
  ReportRecord report;
  report.trial_id = rec.id;
  report.step = step;
  report.metrics.insert(req.metrics().begin(), req.metrics().end());
  report.time = clock_.Now();
  if (req.has_time() && std::isfinite(req.time()) && rec.started_at) {
    // Made earlier, kept in the trial's journal while hpod was away: when it was made.
    absl::Time made = absl::FromUnixNanos(static_cast<int64_t>(req.time() * 1e9));
    report.time = std::clamp(made, *rec.started_at, report.time);
  }
  report.report_id = req.report_id();
  if (absl::Status s = store_.InsertReport(report); !s.ok()) return s;
  std::optional<double> value = ApplyReport(report, sweep.spec().objective, rec);
  lifecycle_.MarkProgress(trial);
  if (sweep.spec().Pareto()) {
    if (sweep.plan.keeps_curves && AppendScores(sweep, trial, report.step, report.time)) {
      Judge(sweep, trial, step, trial.curve.back().second, may_stop);
    }
  } else if (value) {
    Judge(sweep, trial, step, *value, may_stop);
  }
  if (int64_t most = sweep.spec().budget.max_trial_steps;
      most > 0 && step >= most && may_stop && !trial.stop_requested()) {
    lifecycle_.RequestStop(sweep, trial, v1::TRIAL_STATE_STOPPED,
                           absl::StrCat("reached budget.max_trial_steps (", most, ")"),
                           sweep.spec().stop_grace);
  }
  if (const PilotRun& pilot = sweep.spec().pilot;
      pilot.Short(rec.number) && step >= pilot.steps && may_stop && !trial.stop_requested()) {
    lifecycle_.RequestStop(
        sweep, trial, v1::TRIAL_STATE_STOPPED,
        absl::StrCat("a short trial of the pilot: stopped at step ", pilot.steps),
        sweep.spec().stop_grace);
  }
  trial.NoteReport(report.report_id, report.step);
  trial.pace.Note(report.time);
  trial.last_report = std::move(report);
  return absl::OkStatus();
}

void ReportIntake::Late(Sweep& sweep, TrialRuntime& trial, const std::vector<JournalEntry>& entries,
                        bool running) {
  TrialRecord& rec = trial.rec;
  if (v1::IsFinal(rec.state)) return;
  absl::StatusOr<std::vector<ReportRecord>> stored = store_.LoadReports(rec.id);
  if (!stored.ok()) {
    spdlog::warn("trial {}: cannot read its stored reports ({}); its journal is not read", rec.id,
                 stored.status().ToString());
    return;
  }
  std::set<int64_t> have;
  for (const ReportRecord& r : *stored) have.insert(r.report_id);
  if (late_.trial_id == rec.id) late_.trial_id = 0;  // read again when asked next
  int taken = 0;
  for (const JournalEntry& e : entries) {
    if (!have.insert(e.id).second) continue;
    v1::ReportRequest req;
    req.set_trial_id(rec.id);
    if (e.step) req.set_step(*e.step);
    for (const auto& [k, v] : e.metrics) (*req.mutable_metrics())[k] = v;
    req.set_report_id(e.id);
    req.set_time(absl::ToDoubleSeconds(e.time - absl::UnixEpoch()));
    absl::Status s = Validate(req, rec.id);
    if (s.ok()) s = Take(sweep, trial, req, /*may_stop=*/running && !trial.stop_requested());
    if (!s.ok()) {
      spdlog::warn("trial {}: a report from its journal is skipped: {}", rec.id, s.ToString());
      continue;
    }
    ++taken;
  }
  if (taken > 0) {
    spdlog::info("trial {}: {} report(s) hpod had not heard taken from its journal{}", rec.id,
                 taken, running ? " (it runs on)" : "");
  }
}

void ReportIntake::Judge(Sweep& sweep, TrialRuntime& trial, int64_t step, double value,
                         bool may_stop) {
  const Objective& objective = sweep.spec().objective;
  std::optional<algorithms::StopDecision> verdict;
  if (sweep.plan.keeps_curves) {
    // Stoppers and TPE read the curve (ranked by Pareto, AppendScores made the point).
    if (!sweep.spec().Pareto()) trial.curve.emplace_back(step, value);
    // The stopper records every point, also of a trial already told to stop (its values count
    // for the others); the verdict may go unused.
    verdict = sweep.plan.stopper->Observe(CurveOf(trial), objective.direction);
  }
  if (objective.goal && !IsBetter(*objective.goal, value, objective.direction)) {
    lifecycle_.BeginEnding(sweep, v1::SWEEP_STATE_GOAL_REACHED,
                           absl::StrCat("trial ", trial.rec.id,
                                        " reached the goal: ", objective.metric, " = ", value));
    // The trial that reached the goal ends well, as a completed one.
    if (trial.rec.stop_state == v1::TRIAL_STATE_STOPPED)
      trial.rec.stop_reason = "reached the sweep's goal";
  } else if (may_stop && !trial.stop_requested() && verdict &&
             verdict->decision == algorithms::Decision::kStop) {
    lifecycle_.RequestStop(sweep, trial, v1::TRIAL_STATE_STOPPED, verdict->reason,
                           sweep.spec().stop_grace);
  }
}

}  // namespace hpo::server
