#include "server/core/report_intake.h"

#include <cctype>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/token.h"
#include "hpo/v1/states.h"
#include "server/core/objectives.h"

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

bool ReportIntake::IsRetry(const TrialRuntime& trial, const v1::ReportRequest& req,
                           const ReportRecord& report) {
  if (!trial.last_report) return false;
  if (req.report_id() != 0) return trial.last_report->report_id == req.report_id();
  return trial.last_report->step == report.step && trial.last_report->metrics == report.metrics;
}

absl::StatusOr<v1::ReportResponse> ReportIntake::Report(const v1::ReportRequest& req,
                                                        absl::string_view token) {
  auto [sweep, trial] = table_.FindTrial(req.trial_id());
  // An unknown trial and a wrong token look the same to the caller: nothing to probe.
  if (trial == nullptr || !TokensEqual(token, trial->rec.token)) {
    return absl::UnauthenticatedError(
        absl::StrCat("report for trial ", req.trial_id(), ": the token is not this trial's"));
  }
  TrialRecord& rec = trial->rec;
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
  report.report_id = req.report_id();
  v1::ReportResponse resp;
  if (IsRetry(*trial, req, report)) {
    resp.set_step(trial->last_report->step);  // stored already: answered the same
  } else {
    if (absl::Status s = store_.InsertReport(report); !s.ok()) return s;
    std::optional<double> value = ApplyReport(report, sweep->spec().objective, rec);
    lifecycle_.MarkProgress(*trial);
    if (sweep->spec().Pareto()) {
      if (sweep->plan.keeps_curves && AppendScores(*sweep, *trial, report.step, report.time)) {
        Judge(*sweep, *trial, step, trial->curve.back().second);
      }
    } else if (value) {
      Judge(*sweep, *trial, step, *value);
    }
    trial->last_report = std::move(report);
    resp.set_step(step);
  }
  resp.set_action(trial->stop_requested() ? v1::ReportResponse::ACTION_STOP
                                          : v1::ReportResponse::ACTION_CONTINUE);
  resp.set_reason(trial->rec.stop_reason);
  return resp;
}

void ReportIntake::Judge(Sweep& sweep, TrialRuntime& trial, int64_t step, double value) {
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
  } else if (!trial.stop_requested() && verdict &&
             verdict->decision == algorithms::Decision::kStop) {
    lifecycle_.RequestStop(sweep, trial, v1::TRIAL_STATE_STOPPED, verdict->reason,
                           sweep.spec().stop_grace);
  }
}

}  // namespace hpo::server
