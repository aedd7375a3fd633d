#include "server/controller.h"

#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "hpo/v1/states.h"
#include "server/convert.h"
#include "server/recovery.h"
#include "server/usage.h"
#include "server/views.h"
#include "spdlog/spdlog.h"

namespace hpo::server {

Controller::Controller(Options options, Store& store, backend::Backend& backend, TrialFiles& files,
                       const Clock& clock)
    : store_(store),
      backend_(backend),
      files_(files),
      clock_(clock),
      events_(store),
      lifecycle_(options, table_, store, backend, files, events_, clock),
      intake_(table_, store, lifecycle_, clock),
      loop_(
          store, clock, options.tick,
          {[this] { lifecycle_.Tick(); }, [this](const absl::Status& commit) { Committed(commit); },
           [this](double seconds) { metrics_.ObserveBatch(seconds); }}) {}

Controller::~Controller() { Shutdown(); }

std::string Controller::MetricsText(const Caller& caller) const {
  if (caller.owner() || caller.kind == Caller::Kind::kMetrics) {
    return metrics_.Text(table_, backend_, clock_.Now(), nullptr);
  }
  return metrics_.Text(table_, backend_, clock_.Now(), [&caller](const SweepRuntime& sweep) {
    SweepRef ref{sweep.rec.id, sweep.rec.owner};
    return server::Authorize(caller, Action::kView, &ref).ok();
  });
}

absl::Status Controller::Recover() {
  absl::Status s = Recovery(table_, store_, backend_, lifecycle_, events_, clock_).Run();
  if (s.ok()) backend_.Act();  // stops of sweeps that were ending, now durable again
  return s;
}

void Controller::Start() {
  backend_.SetWakeup([this] { loop_.Wake(); });
  files_.SetWakeup([this] { loop_.Wake(); });
  loop_.Start();
}

void Controller::Shutdown(bool keep_trials) {
  if (stopped_) return;
  stopped_ = true;
  backend_.SetWakeup(nullptr);
  files_.SetWakeup(nullptr);
  loop_.Stop();
  if (keep_trials) {
    spdlog::info("leaving the running trials to the next start of hpod");
    backend_.Detach();
    return;
  }
  // The last batch: trials cannot outlive this daemon without being re-adopted, so they end
  // and say why, and the next start retries them instead of guessing.
  loop_.RunLast({[this]() -> Done {
    lifecycle_.EndAllLost();
    return nullptr;
  }});
}

void Controller::Committed(const absl::Status& commit) {
  events_.Committed(commit);
  // The batch's launches and stops are durable now: the backend carries them out.
  if (commit.ok()) backend_.Act();
  absl::Status health = store_.Health();
  if (health.ok()) health = files_.Health();
  if (writable_ && !health.ok()) {
    spdlog::error(
        "hpod cannot write its data ({}); it refuses new work until it can, and retries every "
        "second",
        std::string(health.message()));
  } else if (!writable_ && health.ok()) {
    spdlog::warn("the store and the sweeps directory can be written again: hpod takes new work");
  }
  writable_ = health.ok();
}

absl::StatusOr<SweepRuntime*> Controller::FindSweep(int64_t sweep_id) const {
  SweepRuntime* sweep = table_.FindSweep(sweep_id);
  if (sweep == nullptr) return absl::NotFoundError(absl::StrCat("no sweep ", sweep_id));
  return sweep;
}

v1::Sweep Controller::View(const SweepRuntime& sweep, bool with_spec) const {
  return SweepView(sweep, with_spec, clock_.Now());
}

v1::ValidateSweepResponse Controller::Validate(const v1::ValidateSweepRequest& req) {
  v1::ValidateSweepResponse resp;
  PlanResult planned = PlanSweep(req.spec_yaml(), req.source(), req.base_dir(), &backend_);
  for (const std::string& e : planned.errors) resp.add_errors(e);
  resp.set_valid(planned.plan.has_value());
  if (planned.plan) {
    resp.set_trial_count(planned.plan->limit);
    resp.set_summary(planned.plan->spec.Summary(*planned.plan->sampler));
  }
  return resp;
}

absl::StatusOr<v1::Sweep> Controller::Submit(const v1::SubmitSweepRequest& req,
                                             const std::string& owner) {
  if (absl::Status health = store_.Health(); !health.ok()) {
    return absl::UnavailableError(
        absl::StrCat("hpod refuses new sweeps while it cannot write its data: ", health.message()));
  }
  PlanResult planned = PlanSweep(req.spec_yaml(), req.source(), req.base_dir(), &backend_);
  if (!planned.plan) {
    std::string msg = "the sweep is invalid:";
    for (const auto& e : planned.errors) absl::StrAppend(&msg, "\n  ", e);
    return absl::InvalidArgumentError(msg);
  }
  if (req.warm_start_sweep() > 0) planned.plan->spec.warm_start_sweep = req.warm_start_sweep();
  std::vector<TrialRecord> inherited;
  if (int64_t from = planned.plan->spec.warm_start_sweep; from > 0) {
    ASSIGN_OR_RETURN(inherited, WarmStartTrials(planned.plan->spec, from));
  }
  auto sweep = std::make_unique<SweepRuntime>();
  sweep->plan = std::move(*planned.plan);
  SweepRecord& rec = sweep->rec;
  rec.spec_yaml = req.spec_yaml();
  rec.source = req.source().empty() ? "<spec>" : req.source();
  rec.base_dir = AbsolutePath(req.base_dir().empty() ? "." : req.base_dir());
  rec.state = v1::SWEEP_STATE_RUNNING;
  rec.created_at = clock_.Now();
  rec.owner = owner;
  rec.backend = sweep->spec().placement.backend;  // resolved by PlanSweep
  rec.queue = sweep->spec().enqueue;
  rec.name = !req.name().empty() ? req.name() : sweep->spec().name;
  ASSIGN_OR_RETURN(rec.id, store_.InsertSweep(rec));
  if (rec.name.empty()) {
    rec.name = absl::StrCat("sweep-", rec.id);
    RETURN_IF_ERROR(store_.UpdateSweep(rec));
  }
  SweepRuntime& s = table_.AddSweep(std::move(sweep));
  spdlog::info("sweep {} '{}' submitted from {}", s.rec.id, s.rec.name, s.rec.source);
  lifecycle_.Announce(s);
  for (TrialRecord& t : inherited) {  // the sampler's history, never run
    t.sweep_id = s.rec.id;
    t.number = static_cast<int64_t>(s.trials.size());
    ASSIGN_OR_RETURN(t.id, store_.InsertTrial(t));
    auto rt = std::make_unique<TrialRuntime>();
    rt->rec = std::move(t);
    table_.AddTrial(s, std::move(rt));
  }
  if (!inherited.empty()) {
    spdlog::info("sweep {}: {} trial(s) from sweep {} feed its sampler", s.rec.id, inherited.size(),
                 s.spec().warm_start_sweep);
  }
  lifecycle_.Schedule(s);
  return View(s);
}

absl::StatusOr<std::vector<TrialRecord>> Controller::WarmStartTrials(const SweepSpec& spec,
                                                                     int64_t from) const {
  const std::string where = absl::StrCat("warm_start from sweep ", from);
  SweepRuntime* old = table_.FindSweep(from);
  if (old == nullptr) {  // only the daemon's owner submits (server/auth.h): every sweep is hers
    return absl::InvalidArgumentError(absl::StrCat(where, ": there is no sweep ", from));
  }
  if (!old->plan.sampler) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": its spec no longer validates"));
  }
  const SweepSpec& was = old->spec();
  if (was.objective.metric != spec.objective.metric ||
      was.objective.direction != spec.objective.direction) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": it optimizes ", was.objective.metric, ", this sweep ", spec.objective.metric,
        was.objective.direction != spec.objective.direction ? " in the other direction" : "",
        "; their objectives cannot be compared"));
  }
  // The parameters both have carry over; one only this sweep has takes its default.
  std::vector<std::string> common, theirs;
  for (const auto& p : was.space.params) {
    theirs.push_back(p.name);
    if (spec.space.Find(p.name) != nullptr) common.push_back(p.name);
  }
  if (common.empty()) {
    std::vector<std::string> ours;
    for (const auto& p : spec.space.params) ours.push_back(p.name);
    return absl::InvalidArgumentError(absl::StrCat(where, ": no parameter in common (it has ",
                                                   absl::StrJoin(theirs, ", "), "; this sweep ",
                                                   absl::StrJoin(ours, ", "), ")"));
  }
  for (const auto& p : spec.space.params) {
    if (was.space.Find(p.name) == nullptr && p.type != algorithms::ParamType::kFixed &&
        !p.default_value) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": parameter '", p.name,
                                                     "' is new; give it a default: (the value the ",
                                                     "inherited trials take)"));
    }
  }
  std::vector<TrialRecord> out;
  for (const auto& t : old->trials) {
    const TrialRecord& r = t->rec;
    if (r.state != v1::TRIAL_STATE_COMPLETED || !r.objective) continue;
    algorithms::Params params;
    for (const auto& p : spec.space.params) {
      auto it = r.params.find(p.name);
      params[p.name] = it != r.params.end()                      ? it->second
                       : p.type == algorithms::ParamType::kFixed ? p.value
                                                                 : *p.default_value;
    }
    if (!spec.space.Contains(params)) continue;  // outside the new space
    TrialRecord rec;
    rec.state = v1::TRIAL_STATE_COMPLETED;
    rec.origin = kWarmStart;
    rec.params = std::move(params);
    rec.objective = r.objective;
    rec.last_metrics = r.last_metrics;
    rec.step = r.step;
    rec.created_at = clock_.Now();
    rec.ended_at = r.ended_at;
    rec.message = absl::StrCat("from sweep ", from, ", trial ", r.id, " (not run here)");
    out.push_back(std::move(rec));
  }
  return out;
}

absl::StatusOr<v1::Sweep> Controller::GetSweep(int64_t sweep_id) const {
  ASSIGN_OR_RETURN(SweepRuntime * sweep, FindSweep(sweep_id));
  return View(*sweep, /*with_spec=*/true);
}

std::vector<v1::Sweep> Controller::ListSweeps(bool active_only, const Caller* caller) const {
  std::vector<v1::Sweep> out;
  for (const auto& [id, sweep] : table_.sweeps()) {
    if (active_only && sweep->Final()) continue;
    SweepRef ref{id, sweep->rec.owner};
    if (caller != nullptr && !server::Authorize(*caller, Action::kView, &ref).ok()) continue;
    out.push_back(View(*sweep));
  }
  return out;
}

absl::Status Controller::Authorize(const Caller& caller, const Need& need) const {
  const SweepRuntime* sweep = nullptr;
  if (need.trial_id != 0) {
    sweep = table_.FindTrial(need.trial_id).first;
    if (sweep == nullptr) return absl::NotFoundError(absl::StrCat("no trial ", need.trial_id));
  } else if (need.sweep_id != 0 || need.action == Action::kView ||
             need.action == Action::kOperate) {
    ASSIGN_OR_RETURN(sweep, FindSweep(need.sweep_id));
  }
  if (sweep == nullptr) return server::Authorize(caller, need.action);
  SweepRef ref{sweep->rec.id, sweep->rec.owner};
  return server::Authorize(caller, need.action, &ref);
}

absl::StatusOr<v1::Sweep> Controller::Cancel(int64_t sweep_id) {
  ASSIGN_OR_RETURN(SweepRuntime * sweep, FindSweep(sweep_id));
  if (sweep->Final()) {
    return absl::FailedPreconditionError(
        absl::StrCat("sweep ", sweep_id, " already ended (", v1::StateName(sweep->rec.state), ")"));
  }
  sweep->rec.ending = v1::SWEEP_STATE_UNSPECIFIED;  // a cancel overrides any other ending
  lifecycle_.BeginEnding(*sweep, v1::SWEEP_STATE_CANCELED, "canceled by the user");
  return View(*sweep);
}

absl::StatusOr<v1::Sweep> Controller::Pause(int64_t sweep_id) {
  ASSIGN_OR_RETURN(SweepRuntime * sweep, FindSweep(sweep_id));
  if (sweep->rec.state != v1::SWEEP_STATE_RUNNING || sweep->Ending()) {
    return absl::FailedPreconditionError(absl::StrCat("sweep ", sweep_id, " is ",
                                                      v1::StateName(sweep->rec.state),
                                                      "; only a RUNNING sweep can be paused"));
  }
  sweep->rec.state = v1::SWEEP_STATE_PAUSED;
  sweep->rec.message = "paused by the user";
  lifecycle_.SaveSweep(*sweep);
  return View(*sweep);
}

absl::StatusOr<v1::Sweep> Controller::Resume(int64_t sweep_id) {
  ASSIGN_OR_RETURN(SweepRuntime * sweep, FindSweep(sweep_id));
  if (sweep->rec.state != v1::SWEEP_STATE_PAUSED) {
    return absl::FailedPreconditionError(absl::StrCat("sweep ", sweep_id, " is ",
                                                      v1::StateName(sweep->rec.state),
                                                      "; only a PAUSED sweep can be resumed"));
  }
  sweep->rec.state = v1::SWEEP_STATE_RUNNING;
  sweep->rec.message = "resumed by the user";
  lifecycle_.SaveSweep(*sweep);
  lifecycle_.Schedule(*sweep);
  return View(*sweep);
}

absl::StatusOr<v1::Sweep> Controller::Extend(const v1::ExtendSweepRequest& req) {
  ASSIGN_OR_RETURN(SweepRuntime * sweep, FindSweep(req.sweep_id()));
  const std::string fingerprint = ChangeFingerprint(req);
  if (auto replayed = Replayed(*sweep, req.request_id(), fingerprint)) return *replayed;
  const std::string id = absl::StrCat("sweep ", req.sweep_id());
  RETURN_IF_ERROR(CheckChangeable(*sweep, "extended"));
  const Budget& now_budget = sweep->spec().budget;
  BudgetChange change = sweep->rec.budget_change;
  std::vector<std::string> said;
  if (req.max_trials() < 0 || req.add_trials() < 0 || req.max_concurrent() < 0 ||
      req.wall_time_seconds() < 0 || req.gpu_hours() < 0 || req.add_gpu_hours() < 0 ||
      req.node_hours() < 0 || req.add_node_hours() < 0) {
    return absl::InvalidArgumentError("extend: every amount must be positive");
  }
  if (req.max_trials() > 0 && req.add_trials() > 0) {
    return absl::InvalidArgumentError(
        "extend: give the new number of trials or how many more, not both");
  }
  const int64_t made = sweep->Counted();
  if (req.max_trials() > 0 || req.add_trials() > 0) {
    int64_t limit = req.max_trials() > 0 ? req.max_trials()
                                         : std::max(sweep->plan.limit, made) + req.add_trials();
    if (limit <= made) {
      return absl::InvalidArgumentError(
          absl::StrCat("extend: ", id, " already made ", made, " trial(s); --trials ", limit,
                       " gives it none more (use a larger number, or +N)"));
    }
    std::optional<int64_t> cap = sweep->plan.sampler->MaxTrials(sweep->spec().space);
    if (sweep->exhausted || (cap && sweep->sampled >= *cap)) {
      return absl::InvalidArgumentError(
          absl::StrCat("extend: ", id, "'s ", sweep->plan.sampler->Name(),
                       " search has nothing more to propose (", sweep->sampled,
                       " trial(s) made); more trials need a larger space: `hpo fork`"));
    }
    change.max_trials = limit;
    said.push_back(absl::StrCat("trials ", limit));
  }
  if (req.max_concurrent() > 0) {
    change.max_concurrent = req.max_concurrent();
    said.push_back(absl::StrCat("concurrent ", req.max_concurrent()));
  }
  if (req.wall_time_seconds() > 0) {
    absl::Duration more = absl::Seconds(req.wall_time_seconds());
    change.wall_time = (clock_.Now() - sweep->rec.created_at) + more;
    said.push_back(absl::StrCat("wall time ", absl::FormatDuration(more), " more"));
  }
  const Usage usage = MeasureUsage(*sweep, clock_.Now());
  ASSIGN_OR_RETURN(change.gpu_hours,
                   ExtendHours(id, "GPU-hours", req.gpu_hours(), req.add_gpu_hours(),
                               now_budget.gpu_hours, usage.GpuSeconds(), change.gpu_hours, said));
  ASSIGN_OR_RETURN(change.node_hours, ExtendHours(id, "node-hours", req.node_hours(),
                                                  req.add_node_hours(), now_budget.node_hours,
                                                  usage.NodeSeconds(), change.node_hours, said));
  if (said.empty()) {
    return absl::InvalidArgumentError(
        "extend: nothing to change (give --trials, --wall-time, --concurrent, --gpu-hours or "
        "--node-hours)");
  }
  // What stopped it must have moved, or it would end again at once.
  absl::Duration ran = clock_.Now() - sweep->rec.created_at;
  if (std::optional<absl::Duration> wall =
          change.wall_time ? change.wall_time : now_budget.wall_time;
      wall && ran >= *wall) {
    return absl::InvalidArgumentError(absl::StrCat("extend: ", id, "'s wall time (",
                                                   absl::FormatDuration(*wall),
                                                   ") has run out; give --wall-time too"));
  }
  Budget changed = now_budget;
  if (change.gpu_hours) changed.gpu_hours = change.gpu_hours;
  if (change.node_hours) changed.node_hours = change.node_hours;
  if (std::optional<std::string> reached = BudgetReached(changed, usage)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "extend: ", id, " used its ", *reached, "; give --",
        absl::StartsWith(*reached, "budget.gpu") ? "gpu-hours" : "node-hours", " too"));
  }
  int64_t limit = change.max_trials ? *change.max_trials : sweep->plan.limit;
  if (sweep->retries.empty() && sweep->rec.queue.empty() && limit > 0 && made >= limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("extend: ", id, " made all its ", limit, " trial(s); give --trials too"));
  }
  NoteApplied(*sweep, req.request_id(), fingerprint);
  Change(*sweep, change, absl::StrCat("extended by the user: ", absl::StrJoin(said, ", ")));
  return View(*sweep);
}

absl::StatusOr<std::optional<double>> Controller::ExtendHours(
    const std::string& id, const char* unit, double set, double add, std::optional<double> budget,
    double used_seconds, std::optional<double> changed, std::vector<std::string>& said) {
  if (set <= 0 && add <= 0) return changed;
  if (set > 0 && add > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("extend: give the new ", unit, " budget or how many more, not both"));
  }
  double hours = set > 0 ? set : budget.value_or(0) + add;
  double used = used_seconds / 3600;
  if (hours <= used) {
    return absl::InvalidArgumentError(
        absl::StrFormat("extend: %s already used %.4g %s; a budget of %.4g gives it nothing more",
                        id, used, unit, hours));
  }
  said.push_back(absl::StrFormat("%s %.4g", unit, hours));
  return hours;
}

absl::Status Controller::CheckChangeable(const SweepRuntime& sweep, const char* verb) const {
  v1::SweepState state = sweep.Ending() ? sweep.rec.ending : sweep.rec.state;
  if (state == v1::SWEEP_STATE_CANCELED || state == v1::SWEEP_STATE_FAILED ||
      state == v1::SWEEP_STATE_GOAL_REACHED || !sweep.plan.sampler) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sweep ", sweep.rec.id, " is ", v1::StateName(state), sweep.Ending() ? " (ending)" : "",
        ": only a running sweep, or one that ran out of budget (COMPLETED, TIMED_OUT), can be ",
        verb, "; `hpo fork` starts a new one from it"));
  }
  return absl::OkStatus();
}

std::optional<absl::StatusOr<v1::Sweep>> Controller::Replayed(
    const SweepRuntime& sweep, const std::string& key, const std::string& fingerprint) const {
  if (key.empty()) return std::nullopt;
  for (const auto& [applied, print] : sweep.rec.applied) {
    if (applied != key) continue;
    if (print != fingerprint) {
      return absl::InvalidArgumentError(absl::StrCat("sweep ", sweep.rec.id, ": request ", key,
                                                     " was applied before with other values"));
    }
    spdlog::info("sweep {}: request {} was applied before; not again", sweep.rec.id, key);
    return View(sweep);
  }
  return std::nullopt;
}

void Controller::NoteApplied(SweepRuntime& sweep, const std::string& key,
                             const std::string& fingerprint) {
  if (key.empty()) return;
  constexpr size_t kKept = 64;  // retries come within minutes; a sweep is changed rarely
  auto& applied = sweep.rec.applied;
  applied.emplace_back(key, fingerprint);
  if (applied.size() > kKept) applied.erase(applied.begin(), applied.end() - kKept);
}

void Controller::Change(SweepRuntime& sweep, const BudgetChange& change,
                        const std::string& message) {
  sweep.rec.budget_change = change;
  ApplyBudgetChange(sweep.plan, change);
  sweep.budget_spent.reset();  // CheckBudgets decides again, against the new budget
  bool reopens = sweep.Final() || sweep.Ending();
  if (sweep.Final()) {
    sweep.rec.state = v1::SWEEP_STATE_RUNNING;
    sweep.rec.ended_at.reset();
    backend_.SweepReopened(sweep.rec.id);
  }
  sweep.rec.ending = v1::SWEEP_STATE_UNSPECIFIED;
  sweep.rec.message = message;
  spdlog::info("sweep {}: {}{}", sweep.rec.id, message, reopens ? " (reopened)" : "");
  lifecycle_.SaveSweep(sweep);
  lifecycle_.Schedule(sweep);
}

absl::StatusOr<v1::Sweep> Controller::Enqueue(const v1::EnqueueRequest& req) {
  ASSIGN_OR_RETURN(SweepRuntime * sweep, FindSweep(req.sweep_id()));
  const std::string fingerprint = ChangeFingerprint(req);
  if (auto replayed = Replayed(*sweep, req.request_id(), fingerprint)) return *replayed;
  const std::string id = absl::StrCat("sweep ", req.sweep_id());
  RETURN_IF_ERROR(CheckChangeable(*sweep, "given configurations"));
  if (req.points().empty()) return absl::InvalidArgumentError("enqueue: no configuration given");
  std::vector<algorithms::Params> points;
  for (int i = 0; i < req.points_size(); ++i) {
    const auto& values = req.points(i).values();
    absl::StatusOr<algorithms::Params> p =
        sweep->spec().space.ParsePoint({values.begin(), values.end()});
    if (!p.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("enqueue: configuration ", i + 1, ": ", p.status().message()));
    }
    points.push_back(*std::move(p));
  }
  const Budget& budget = sweep->spec().budget;
  if (budget.wall_time && clock_.Now() - sweep->rec.created_at >= *budget.wall_time) {
    return absl::InvalidArgumentError(absl::StrCat("enqueue: ", id,
                                                   "'s wall time has run out; `hpo extend ",
                                                   sweep->rec.id, " --wall-time D` first"));
  }
  if (std::optional<std::string> reached =
          BudgetReached(budget, MeasureUsage(*sweep, clock_.Now()))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "enqueue: ", id, " used its ", *reached, "; `hpo extend ", sweep->rec.id, " --",
        absl::StartsWith(*reached, "budget.gpu") ? "gpu-hours" : "node-hours", " X` first"));
  }
  // They run whatever is left of the trial budget: the limit grows when they need it to.
  BudgetChange change = sweep->rec.budget_change;
  int64_t want = sweep->Counted() + static_cast<int64_t>(sweep->rec.queue.size()) +
                 static_cast<int64_t>(points.size());
  std::string message = absl::StrCat(points.size(), " configuration(s) enqueued by the user");
  if (budget.max_trials > 0 && want > sweep->plan.limit) {
    change.max_trials = want;
    absl::StrAppend(&message, "; budget.max_trials raised to ", want, " for them");
  }
  for (auto& p : points) sweep->rec.queue.push_back(std::move(p));
  NoteApplied(*sweep, req.request_id(), fingerprint);
  Change(*sweep, change, message);
  return View(*sweep);
}

absl::StatusOr<v1::AskResponse> Controller::Ask(int64_t sweep_id) {
  ASSIGN_OR_RETURN(SweepRuntime * sweep, FindSweep(sweep_id));
  ASSIGN_OR_RETURN(TrialRuntime * trial, lifecycle_.Ask(*sweep));
  v1::AskResponse resp;
  *resp.mutable_trial() = TrialView(*sweep, *trial, clock_.Now());
  resp.set_token(trial->rec.token);
  resp.set_endpoint(lifecycle_.options().report_endpoint);
  return resp;
}

absl::StatusOr<v1::Trial> Controller::Tell(const v1::TellRequest& req) {
  auto [sweep, trial] = table_.FindTrial(req.trial_id());
  if (trial == nullptr) return absl::NotFoundError(absl::StrCat("no trial ", req.trial_id()));
  if (req.state() != v1::TRIAL_STATE_COMPLETED && req.state() != v1::TRIAL_STATE_FAILED) {
    return absl::InvalidArgumentError("tell: the state is completed or failed");
  }
  RETURN_IF_ERROR(
      lifecycle_.Tell(*sweep, *trial, req.state() == v1::TRIAL_STATE_COMPLETED, req.message()));
  lifecycle_.Schedule(*sweep);
  return TrialView(*sweep, *trial, clock_.Now());
}

absl::StatusOr<std::vector<std::string>> Controller::Remove(int64_t sweep_id) {
  ASSIGN_OR_RETURN(SweepRuntime * sweep, FindSweep(sweep_id));
  if (!sweep->Final()) {
    return absl::FailedPreconditionError(
        absl::StrCat("sweep ", sweep_id, " is ", v1::StateName(sweep->rec.state),
                     "; only an ended sweep can be removed (hpo cancel ", sweep_id, " first)"));
  }
  // Its directories: where its trials' are (`<sweeps>/<id>/trials/<number>`), and where a sweep
  // of this id would have them now. Nothing else is removed.
  std::set<std::string> dirs;
  const std::string name = std::to_string(sweep_id);
  for (const auto& t : sweep->trials) {
    std::filesystem::path trials = std::filesystem::path(t->rec.trial_dir).parent_path();
    if (trials.filename() == "trials" && trials.parent_path().filename() == name) {
      dirs.insert(trials.parent_path().string());
    }
  }
  dirs.insert(lifecycle_.options().data_dir.sweep_dir(sweep_id));
  RETURN_IF_ERROR(store_.DeleteSweep(sweep_id));
  spdlog::info("sweep {} '{}' removed", sweep_id, sweep->rec.name);
  table_.RemoveSweep(sweep_id);
  return std::vector<std::string>(dirs.begin(), dirs.end());
}

absl::StatusOr<std::vector<v1::Trial>> Controller::ListTrials(
    const v1::ListTrialsRequest& req) const {
  ASSIGN_OR_RETURN(SweepRuntime * sweep, FindSweep(req.sweep_id()));
  return TrialsView(*sweep, req, clock_.Now());
}

absl::StatusOr<v1::GetTrialResponse> Controller::GetTrial(const v1::GetTrialRequest& req) {
  auto [sweep, trial] = table_.FindTrial(req.trial_id());
  if (trial == nullptr) return absl::NotFoundError(absl::StrCat("no trial ", req.trial_id()));
  v1::GetTrialResponse resp;
  *resp.mutable_trial() = TrialView(*sweep, *trial, clock_.Now());
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
  auto [sweep, trial] = table_.FindTrial(trial_id);
  if (trial == nullptr) return absl::NotFoundError(absl::StrCat("no trial ", trial_id));
  return trial->rec.trial_dir;
}

absl::StatusOr<std::string> Controller::TrialToken(int64_t trial_id) const {
  auto [sweep, trial] = table_.FindTrial(trial_id);
  if (trial == nullptr) return absl::NotFoundError(absl::StrCat("no trial ", trial_id));
  return trial->rec.token;
}

absl::Status Controller::Watch(int64_t sweep_id, int64_t since_seq,
                               std::shared_ptr<EventSink> sink) {
  ASSIGN_OR_RETURN(SweepRuntime * sweep, FindSweep(sweep_id));
  return events_.Subscribe(sweep_id, since_seq, std::move(sink), sweep->Final());
}

}  // namespace hpo::server
