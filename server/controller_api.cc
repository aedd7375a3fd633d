// The controller's operations (what the gRPC services call) and its proto views. The batch
// loop, scheduling and recovery are in controller.cc.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/token.h"
#include "server/controller.h"
#include "server/convert.h"
#include "spdlog/spdlog.h"

namespace hpo::server {
namespace {

bool ValidMetricName(absl::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-')) {
      return false;
    }
  }
  return true;
}

constexpr int kMaxMetricsPerReport = 64;
constexpr int64_t kMaxStep = int64_t{1} << 53;

}  // namespace

// ---------------------------------------------------------------------------------------------
// Operations

v1::ValidateSweepResponse Controller::Validate(const v1::ValidateSweepRequest& req) const {
  v1::ValidateSweepResponse resp;
  ParseResult parsed = ParseSweepSpec(req.spec_yaml(), req.source(), req.base_dir());
  if (parsed.spec) {
    absl::Status fits = backend_.CheckFits(parsed.spec->MaxResources(), parsed.spec->placement);
    if (!fits.ok()) {
      parsed.errors.push_back(absl::StrCat(parsed.spec->source, ": resources/slurm (", backend_.Name(),
                                           " backend): ", fits.message()));
    }
  }
  for (const std::string& e : parsed.errors) resp.add_errors(e);
  resp.set_valid(parsed.errors.empty());
  if (resp.valid()) {
    auto sampler = algorithms::MakeSampler(parsed.spec->algorithm, parsed.spec->space);
    resp.set_trial_count(parsed.spec->TrialLimit(**sampler));
    resp.set_summary(parsed.spec->Summary(**sampler));
  }
  return resp;
}

absl::StatusOr<v1::Sweep> Controller::Submit(const v1::SubmitSweepRequest& req, const std::string& owner) {
  if (!storage_error_.empty()) {
    return absl::UnavailableError(absl::StrCat("hpod refuses new sweeps while it cannot write its data: ",
                                               storage_error_));
  }
  v1::ValidateSweepRequest vreq;
  vreq.set_spec_yaml(req.spec_yaml());
  vreq.set_source(req.source());
  vreq.set_base_dir(req.base_dir());
  v1::ValidateSweepResponse v = Validate(vreq);
  if (!v.valid()) {
    std::string msg = "the sweep is invalid:";
    for (const auto& e : v.errors()) absl::StrAppend(&msg, "\n  ", e);
    return absl::InvalidArgumentError(msg);
  }
  SweepRecord rec;
  rec.spec_yaml = req.spec_yaml();
  rec.source = req.source().empty() ? "<spec>" : req.source();
  rec.base_dir = AbsolutePath(req.base_dir().empty() ? "." : req.base_dir());
  rec.state = v1::SWEEP_STATE_RUNNING;
  rec.created_at = clock_.Now();
  rec.owner = owner;
  ASSIGN_OR_RETURN(std::unique_ptr<SweepRt> sweep, BuildSweep(rec));
  sweep->rec.name = !req.name().empty() ? req.name() : sweep->spec.name;
  ASSIGN_OR_RETURN(sweep->rec.id, store_.InsertSweep(sweep->rec));
  if (sweep->rec.name.empty()) {
    sweep->rec.name = absl::StrCat("sweep-", sweep->rec.id);
    RETURN_IF_ERROR(store_.UpdateSweep(sweep->rec));
  }
  SweepRt& s = *sweep;
  sweeps_[s.rec.id] = std::move(sweep);
  spdlog::info("sweep {} '{}' submitted from {}", s.rec.id, s.rec.name, s.rec.source);
  Emit(s, v1::EVENT_KIND_SWEEP_STATE, nullptr);
  Schedule(s);
  return SweepProto(s, false);
}

absl::StatusOr<v1::Sweep> Controller::GetSweep(int64_t sweep_id) const {
  SweepRt* sweep = FindSweep(sweep_id);
  if (sweep == nullptr) return absl::NotFoundError(absl::StrCat("no sweep ", sweep_id));
  return SweepProto(*sweep, true);
}

std::vector<v1::Sweep> Controller::ListSweeps(bool active_only, const Caller* caller) const {
  std::vector<v1::Sweep> out;
  for (const auto& [id, sweep] : sweeps_) {
    if (active_only && sweep->Final()) continue;
    if (caller != nullptr && !CheckOwner(*caller, sweep->rec.owner, id).ok()) continue;
    out.push_back(SweepProto(*sweep, false));
  }
  return out;
}

absl::Status Controller::CheckSweepAccess(int64_t sweep_id, const Caller& caller) const {
  SweepRt* sweep = FindSweep(sweep_id);
  if (sweep == nullptr) return absl::NotFoundError(absl::StrCat("no sweep ", sweep_id));
  return CheckOwner(caller, sweep->rec.owner, sweep_id);
}

absl::Status Controller::CheckTrialAccess(int64_t trial_id, const Caller& caller) const {
  auto [sweep, trial] = FindTrial(trial_id);
  if (trial == nullptr) return absl::NotFoundError(absl::StrCat("no trial ", trial_id));
  return CheckOwner(caller, sweep->rec.owner, sweep->rec.id);
}

absl::StatusOr<v1::Sweep> Controller::Cancel(int64_t sweep_id) {
  SweepRt* sweep = FindSweep(sweep_id);
  if (sweep == nullptr) return absl::NotFoundError(absl::StrCat("no sweep ", sweep_id));
  if (sweep->Final()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sweep ", sweep_id, " already ended (", SweepStateName(sweep->rec.state), ")"));
  }
  sweep->rec.ending = v1::SWEEP_STATE_UNSPECIFIED;  // a cancel overrides any other ending
  BeginEnding(*sweep, v1::SWEEP_STATE_CANCELED, "canceled by the user");
  return SweepProto(*sweep, false);
}

absl::StatusOr<v1::Sweep> Controller::Pause(int64_t sweep_id) {
  SweepRt* sweep = FindSweep(sweep_id);
  if (sweep == nullptr) return absl::NotFoundError(absl::StrCat("no sweep ", sweep_id));
  if (sweep->rec.state != v1::SWEEP_STATE_RUNNING || sweep->rec.ending != v1::SWEEP_STATE_UNSPECIFIED) {
    return absl::FailedPreconditionError(absl::StrCat("sweep ", sweep_id, " is ",
                                                      SweepStateName(sweep->rec.state),
                                                      "; only a RUNNING sweep can be paused"));
  }
  sweep->rec.state = v1::SWEEP_STATE_PAUSED;
  sweep->rec.message = "paused by the user";
  SaveSweep(*sweep);
  return SweepProto(*sweep, false);
}

absl::StatusOr<v1::Sweep> Controller::Resume(int64_t sweep_id) {
  SweepRt* sweep = FindSweep(sweep_id);
  if (sweep == nullptr) return absl::NotFoundError(absl::StrCat("no sweep ", sweep_id));
  if (sweep->rec.state != v1::SWEEP_STATE_PAUSED) {
    return absl::FailedPreconditionError(absl::StrCat("sweep ", sweep_id, " is ",
                                                      SweepStateName(sweep->rec.state),
                                                      "; only a PAUSED sweep can be resumed"));
  }
  sweep->rec.state = v1::SWEEP_STATE_RUNNING;
  sweep->rec.message = "resumed by the user";
  SaveSweep(*sweep);
  Schedule(*sweep);
  return SweepProto(*sweep, false);
}

absl::StatusOr<std::vector<v1::Trial>> Controller::ListTrials(const v1::ListTrialsRequest& req) const {
  SweepRt* sweep = FindSweep(req.sweep_id());
  if (sweep == nullptr) return absl::NotFoundError(absl::StrCat("no sweep ", req.sweep_id()));
  std::vector<const TrialRt*> picked;
  for (const auto& t : sweep->trials) {
    if (req.states_size() > 0 &&
        std::find(req.states().begin(), req.states().end(), t->rec.state) == req.states().end()) {
      continue;
    }
    picked.push_back(t.get());
  }
  auto dir = sweep->spec.objective.direction;
  if (req.order() == v1::TRIAL_ORDER_OBJECTIVE) {
    std::stable_sort(picked.begin(), picked.end(), [dir](const TrialRt* a, const TrialRt* b) {
      if (a->rec.objective.has_value() != b->rec.objective.has_value()) return a->rec.objective.has_value();
      return a->rec.objective && IsBetter(*a->rec.objective, *b->rec.objective, dir);
    });
  } else if (req.order() == v1::TRIAL_ORDER_RECENT) {
    std::stable_sort(picked.begin(), picked.end(), [](const TrialRt* a, const TrialRt* b) {
      absl::Time ta = a->rec.started_at.value_or(a->rec.created_at);
      absl::Time tb = b->rec.started_at.value_or(b->rec.created_at);
      return ta > tb;
    });
  }
  std::vector<v1::Trial> out;
  for (const TrialRt* t : picked) {
    if (req.limit() > 0 && static_cast<int>(out.size()) >= req.limit()) break;
    out.push_back(TrialProto(*t));
  }
  return out;
}

absl::StatusOr<v1::GetTrialResponse> Controller::GetTrial(const v1::GetTrialRequest& req) {
  auto [sweep, trial] = FindTrial(req.trial_id());
  if (trial == nullptr) return absl::NotFoundError(absl::StrCat("no trial ", req.trial_id()));
  v1::GetTrialResponse resp;
  *resp.mutable_trial() = TrialProto(*trial);
  if (req.include_reports()) {
    ASSIGN_OR_RETURN(std::vector<ReportRecord> reports, store_.LoadReports(trial->rec.id));
    for (const ReportRecord& r : reports) {
      v1::Report* out = resp.add_reports();
      out->set_trial_id(r.trial_id);
      out->set_step(r.step);
      for (const auto& [k, v] : r.metrics) (*out->mutable_metrics())[k] = v;
      *out->mutable_time() = ToProto(r.time);
    }
  }
  return resp;
}

absl::StatusOr<std::string> Controller::TrialDir(int64_t trial_id) const {
  auto [sweep, trial] = FindTrial(trial_id);
  if (trial == nullptr) return absl::NotFoundError(absl::StrCat("no trial ", trial_id));
  return trial->rec.trial_dir;
}

absl::StatusOr<std::string> Controller::TrialToken(int64_t trial_id) const {
  auto [sweep, trial] = FindTrial(trial_id);
  if (trial == nullptr) return absl::NotFoundError(absl::StrCat("no trial ", trial_id));
  return trial->rec.token;
}

absl::StatusOr<v1::ReportResponse> Controller::Report(const v1::ReportRequest& req,
                                                      absl::string_view token) {
  auto [sweep, trial] = FindTrial(req.trial_id());
  // An unknown trial and a wrong token look the same to the caller: nothing to probe.
  if (trial == nullptr || !TokensEqual(token, trial->rec.token)) {
    return absl::UnauthenticatedError(absl::StrCat("report for trial ", req.trial_id(),
                                                   ": the token is not this trial's"));
  }
  TrialRecord& rec = trial->rec;
  if (IsFinal(rec.state)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "report for trial ", rec.id, ": the trial already ended (", TrialStateName(rec.state),
        "); nothing stored"));
  }
  if (!storage_error_.empty()) {
    return absl::UnavailableError(absl::StrCat("hpod cannot store reports now (", storage_error_,
                                               "); retry later"));
  }
  if (req.metrics().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("report for trial ", rec.id, " has no metrics"));
  }
  if (req.metrics_size() > kMaxMetricsPerReport) {
    return absl::InvalidArgumentError(absl::StrCat("report for trial ", rec.id, " has ",
                                                   req.metrics_size(), " metrics; at most ",
                                                   kMaxMetricsPerReport));
  }
  for (const auto& [name, value] : req.metrics()) {
    if (!ValidMetricName(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "report for trial ", rec.id, ": bad metric name '", name.substr(0, 64),
          "' (letters, digits, _ . / -; starting with a letter or _; at most 128)"));
    }
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat("report for trial ", rec.id, ": metric '",
                                                     name, "' is ", value,
                                                     "; only finite values are stored"));
    }
  }
  int64_t step = req.has_step() ? req.step() : std::max<int64_t>(rec.step, 0) + 1;
  if (step < 0 || step > kMaxStep) {
    return absl::InvalidArgumentError(absl::StrCat("report for trial ", rec.id, ": step ", step,
                                                   " is out of range [0, 2^53]"));
  }
  ReportRecord report;
  report.trial_id = rec.id;
  report.step = step;
  report.metrics.insert(req.metrics().begin(), req.metrics().end());
  report.time = clock_.Now();
  report.report_id = req.report_id();
  if (trial->last_report && (req.report_id() != 0
                                 ? trial->last_report->report_id == req.report_id()
                                 : trial->last_report->step == step && trial->last_report->metrics == report.metrics)) {
    v1::ReportResponse again;  // a retry of the last report: stored already, answered the same
    again.set_step(trial->last_report->step);
    again.set_action(trial->stop_state != v1::TRIAL_STATE_UNSPECIFIED ? v1::ReportResponse::ACTION_STOP
                                                                      : v1::ReportResponse::ACTION_CONTINUE);
    again.set_reason(trial->stop_reason);
    return again;
  }
  if (absl::Status s = store_.InsertReport(report); !s.ok()) {
    if (absl::IsUnavailable(s)) StorageFailed(s);
    return s;
  }
  trial->last_report = report;
  batch_reports_.push_back(rec.id);

  rec.step = step;
  ++rec.report_count;
  for (const auto& [k, v] : report.metrics) rec.last_metrics[k] = v;
  if (!trial->progress_dirty) {
    trial->progress_dirty = true;
    dirty_.insert(rec.id);
  }
  const Objective& objective = sweep->spec.objective;
  v1::ReportResponse resp;
  resp.set_step(step);
  resp.set_action(v1::ReportResponse::ACTION_CONTINUE);
  auto it = report.metrics.find(objective.metric);
  if (it != report.metrics.end()) {
    double value = it->second;
    if (!sweep->stopper_is_none) trial->curve.emplace_back(step, value);  // stoppers and TPE read it
    // An incremental stopper records every point, also of a trial already told to stop (its
    // values count for the others, as in the pure form); the verdict may go unused.
    std::optional<algorithms::StopDecision> verdict;
    if (!sweep->stopper_is_none && sweep->stopper->Incremental()) {
      verdict = sweep->stopper->Observe({rec.number, {trial->curve.data(), trial->curve.size()}, false},
                                        objective.direction);
    }
    if (!objective.use_best || !rec.objective || IsBetter(value, *rec.objective, objective.direction)) {
      rec.objective = value;
    }
    if (objective.goal && !IsBetter(*objective.goal, value, objective.direction)) {
      BeginEnding(*sweep, v1::SWEEP_STATE_GOAL_REACHED,
                  absl::StrCat("trial ", rec.id, " reached the goal: ", objective.metric, " = ",
                               value));
      // The trial that reached the goal ends well, as a completed one.
      if (trial->stop_state == v1::TRIAL_STATE_STOPPED) trial->stop_reason = "reached the sweep's goal";
    } else if (trial->stop_state == v1::TRIAL_STATE_UNSPECIFIED && verdict) {
      if (verdict->decision == algorithms::Decision::kStop) {
        RequestStop(*trial, v1::TRIAL_STATE_STOPPED, verdict->reason, sweep->spec.stop_grace);
      }
    } else if (trial->stop_state == v1::TRIAL_STATE_UNSPECIFIED) {
      std::vector<algorithms::Curve> curves;
      std::vector<const algorithms::Curve*> others;
      if (!sweep->stopper_is_none) {
        curves.reserve(sweep->trials.size());
        for (const auto& t : sweep->trials) {
          if (t.get() != trial) {
            curves.push_back({t->rec.number, {t->curve.data(), t->curve.size()}, IsFinal(t->rec.state)});
          }
        }
        for (const auto& c : curves) others.push_back(&c);
      }
      algorithms::Curve mine{rec.number, {trial->curve.data(), trial->curve.size()}, false};
      algorithms::StopDecision d = sweep->stopper->Decide(mine, others, objective.direction);
      if (d.decision == algorithms::Decision::kStop) {
        RequestStop(*trial, v1::TRIAL_STATE_STOPPED, d.reason, sweep->spec.stop_grace);
      }
    }
  }
  if (trial->stop_state != v1::TRIAL_STATE_UNSPECIFIED) {
    resp.set_action(v1::ReportResponse::ACTION_STOP);
    resp.set_reason(trial->stop_reason);
  }
  return resp;
}

absl::Status Controller::Watch(int64_t sweep_id, int64_t since_seq, std::shared_ptr<EventSink> sink) {
  SweepRt* sweep = FindSweep(sweep_id);
  if (sweep == nullptr) return absl::NotFoundError(absl::StrCat("no sweep ", sweep_id));
  int64_t after = since_seq;
  while (true) {
    ASSIGN_OR_RETURN(std::vector<EventRecord> page, store_.LoadEvents(sweep_id, after, 1000));
    for (const EventRecord& rec : page) {
      if (rec.seq > committed_seq_) break;  // this batch's own: published after commit
      v1::Event e;
      if (!e.ParseFromString(rec.payload)) {
        return absl::InternalError(absl::StrCat("event ", rec.seq, " of sweep ", sweep_id, " is corrupt"));
      }
      e.set_seq(rec.seq);
      sink->Push(e);
      after = rec.seq;
    }
    if (page.size() < 1000 || after >= committed_seq_) break;
  }
  if (sweep->Final()) {
    sink->Close(absl::OkStatus());
  } else {
    sweep->sinks.push_back(std::move(sink));
  }
  return absl::OkStatus();
}

bool Controller::AllSweepsEnded() const {
  for (const auto& [id, sweep] : sweeps_) {
    if (!sweep->Final()) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Views

Controller::SweepRt* Controller::FindSweep(int64_t id) const {
  auto it = sweeps_.find(id);
  return it == sweeps_.end() ? nullptr : it->second.get();
}

std::pair<Controller::SweepRt*, Controller::TrialRt*> Controller::FindTrial(int64_t id) const {
  auto it = trials_by_id_.find(id);
  if (it == trials_by_id_.end()) return {nullptr, nullptr};
  return it->second;
}

v1::Sweep Controller::SweepProto(const SweepRt& sweep, bool with_spec) const {
  v1::Sweep out;
  const SweepRecord& rec = sweep.rec;
  out.set_id(rec.id);
  out.set_name(rec.name);
  out.set_state(rec.state);
  out.set_message(rec.message);
  *out.mutable_created_at() = ToProto(rec.created_at);
  if (rec.ended_at) *out.mutable_ended_at() = ToProto(*rec.ended_at);
  out.set_objective_metric(sweep.spec.objective.metric);
  out.set_direction(sweep.spec.objective.direction == algorithms::Direction::kMinimize
                        ? v1::DIRECTION_MINIMIZE
                        : v1::DIRECTION_MAXIMIZE);
  out.set_max_trials(sweep.limit);
  out.set_max_concurrent(sweep.spec.budget.max_concurrent);
  for (const auto& t : sweep.trials) (*out.mutable_trial_counts())[TrialStateName(t->rec.state)]++;
  if (sweep.best >= 0) {
    const TrialRecord& best = sweep.trials[static_cast<size_t>(sweep.best)]->rec;
    out.set_best_trial_id(best.id);
    out.set_best_objective(*best.objective);
  }
  if (with_spec) out.set_spec_yaml(rec.spec_yaml);
  out.set_source(rec.source);
  out.set_algorithm(sweep.spec.algorithm.name);
  out.set_backend(backend_.Name());
  out.set_owner(sweep.rec.owner);
  return out;
}

v1::Trial Controller::TrialProto(const TrialRt& trial) const { return ToProto(trial.rec); }

}  // namespace hpo::server
