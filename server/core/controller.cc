#include "server/core/controller.h"

#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "hpo/v1/states.h"
#include "server/core/budget.h"
#include "server/core/convert.h"
#include "server/core/recovery.h"
#include "server/core/usage.h"
#include "server/core/views.h"
#include "spdlog/spdlog.h"

namespace hpo::server {

Controller::Controller(Options options, Store& store, backend::Backend& backend, TrialFiles& files,
                       const Clock& clock)
    : spec_defaults_(options.spec_defaults.empty() ? SpecDefaultVersions() : options.spec_defaults),
      store_(store),
      backend_(backend),
      files_(files),
      clock_(clock),
      telemetry_(options.telemetry != nullptr ? options.telemetry : &none_),
      events_(store),
      lifecycle_(options, table_, store, backend, files, events_, clock),
      intake_(table_, store, lifecycle_, clock),
      loop_(
          store, clock, options.tick,
          {[this] { lifecycle_.Tick(); }, [this](const absl::Status& commit) { Committed(commit); },
           [this](double seconds) { telemetry_->ObserveBatch(seconds); }}) {
  lifecycle_.set_more_to_schedule([this] { loop_.Wake(); });
  lifecycle_.set_late_reports(
      [this](Sweep& sweep, TrialRuntime& trial, const std::vector<JournalEntry>& entries,
             bool running) { intake_.Late(sweep, trial, entries, running); });
}

Controller::~Controller() { Shutdown(); }

absl::Status Controller::Recover() {
  absl::Status s =
      Recovery(table_, store_, backend_, lifecycle_, events_, clock_, spec_defaults_).Run();
  if (s.ok()) backend_.Act();  // stops of sweeps that were ending, now durable again
  return s;
}

void Controller::Start() {
  backend_.SetWakeup([this] { loop_.Wake(); });
  files_.SetWakeup([this] { loop_.Wake(); });
  lifecycle_.set_suggestions_wakeup([this] { loop_.Wake(); });
  loop_.Start();
}

void Controller::Shutdown(bool keep_trials) {
  if (stopped_) return;
  stopped_ = true;
  backend_.SetWakeup(nullptr);
  files_.SetWakeup(nullptr);
  lifecycle_.set_suggestions_wakeup(nullptr);
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

absl::StatusOr<Sweep*> Controller::FindSweep(int64_t sweep_id) const {
  Sweep* sweep = table_.FindSweep(sweep_id);
  if (sweep == nullptr) return absl::NotFoundError(absl::StrCat("no sweep ", sweep_id));
  return sweep;
}

v1::Sweep Controller::View(const Sweep& sweep, bool with_spec) const {
  return SweepView(sweep, with_spec, clock_.Now());
}

Controller::Done Controller::Vetting(int64_t sweep_id, const SweepSpec& spec,
                                     std::function<Done(const absl::Status&)> then) {
  return Awaiting<absl::Status>(
      [this, sweep_id, r = spec.MaxResources(), p = spec.placement](auto answer) {
        backend_.Vet(sweep_id, r, p, /*starts_now=*/true, std::move(answer));
      },
      std::move(then));
}

Controller::Done Controller::Validate(const Allowed& allowed, const v1::ValidateSweepRequest& req,
                                      Reply<v1::ValidateSweepResponse> reply) {
  if (absl::Status s = Within(allowed, Action::kUse, 0); !s.ok()) return reply(s);
  v1::ValidateSweepResponse resp;
  PlanResult planned =
      PlanSweep(req.spec_yaml(), req.source(), req.base_dir(), &backend_, SubmitDefaults());
  for (const std::string& e : planned.errors) resp.add_errors(e);
  resp.set_valid(planned.plan.has_value());
  if (!planned.plan) return reply(std::move(resp));
  resp.set_trial_count(planned.plan->limit);
  resp.set_summary(planned.plan->spec.Summary(*planned.plan->sampler));
  auto spec = std::make_shared<SweepSpec>(std::move(planned.plan->spec));
  return Vetting(0, *spec, [spec, resp, reply](const absl::Status& vetted) mutable -> Done {
    if (!vetted.ok()) {
      resp.add_errors(PlacementError(*spec, vetted.message()));
      resp.set_valid(false);
    }
    return reply(std::move(resp));
  });
}

absl::StatusOr<v1::ValidateSweepResponse> Controller::Validate(
    const Allowed& allowed, const v1::ValidateSweepRequest& req) {
  return Inline<v1::ValidateSweepResponse>(
      [&](Reply<v1::ValidateSweepResponse> reply) { return Validate(allowed, req, reply); });
}

absl::StatusOr<v1::Sweep> Controller::Submit(const Allowed& allowed,
                                             const v1::SubmitSweepRequest& req) {
  return Inline<v1::Sweep>([&](Reply<v1::Sweep> reply) { return Submit(allowed, req, reply); });
}

Controller::Done Controller::Submit(const Allowed& allowed, const v1::SubmitSweepRequest& req,
                                    Reply<v1::Sweep> reply) {
  if (absl::Status s = Within(allowed, Action::kSubmit, 0); !s.ok()) return reply(s);
  const std::string& owner = allowed.caller().user;
  if (absl::Status health = store_.Health(); !health.ok()) {
    return reply(absl::UnavailableError(absl::StrCat(
        "hpod refuses new sweeps while it cannot write its data: ", health.message())));
  }
  PlanResult planned =
      PlanSweep(req.spec_yaml(), req.source(), req.base_dir(), &backend_, SubmitDefaults());
  if (!planned.plan) {
    std::string msg = "the sweep is invalid:";
    for (const auto& e : planned.errors) absl::StrAppend(&msg, "\n  ", e);
    return reply(absl::InvalidArgumentError(msg));
  }
  // A pilot: the file checked as it is, then its pilot planned and run in its place.
  std::string spec_yaml = req.spec_yaml();
  if (req.pilot_trials() != 0 || req.pilot_steps() != 0 || req.pilot_full_trials() != 0) {
    absl::StatusOr<std::string> pilot =
        PilotYaml(req.spec_yaml(), req.pilot_trials(), req.pilot_steps(), req.pilot_full_trials());
    if (!pilot.ok()) return reply(pilot.status());
    spec_yaml = std::move(*pilot);
    planned = PlanSweep(spec_yaml, req.source(), req.base_dir(), &backend_, SubmitDefaults());
    if (!planned.plan) {
      std::string msg = "the sweep's pilot is invalid:";
      for (const auto& e : planned.errors) absl::StrAppend(&msg, "\n  ", e);
      return reply(absl::InvalidArgumentError(msg));
    }
  }
  if (req.warm_start_sweep() > 0) planned.plan->spec.warm_start_sweep = req.warm_start_sweep();
  std::vector<TrialRecord> inherited;
  if (int64_t from = planned.plan->spec.warm_start_sweep; from > 0) {
    absl::StatusOr<std::vector<TrialRecord>> trials = WarmStartTrials(planned.plan->spec, from);
    if (!trials.ok()) return reply(trials.status());
    inherited = std::move(*trials);
  }
  auto sweep = std::make_unique<Sweep>();
  sweep->plan = std::move(*planned.plan);
  SweepRecord& rec = sweep->rec;
  rec.spec_yaml = std::move(spec_yaml);
  rec.source = req.source().empty() ? "<spec>" : req.source();
  rec.base_dir = AbsolutePath(req.base_dir().empty() ? "." : req.base_dir());
  // Stored as not yet admitted (no state) until the backend took it: a restart before then
  // removes it, as the submit it belongs to never answered.
  rec.state = v1::SWEEP_STATE_UNSPECIFIED;
  rec.created_at = clock_.Now();
  rec.owner = owner;
  rec.backend = sweep->spec().placement.backend;  // resolved by PlanSweep
  rec.queue = sweep->spec().enqueue;
  rec.name = !req.name().empty() ? req.name() : sweep->spec().name;
  rec.defaults_version = spec_defaults_.back().version;
  rec.hpod_version = kVersion;
  // What it is expected to cost, when its file (or the sweep it names as like) says how long its
  // trials are; kept to compare with what it used.
  if (absl::StatusOr<EstimateInputs> in =
          InputsFor(allowed.caller(), sweep->spec(), sweep->plan.limit, v1::PlanSweepRequest());
      in.ok() && in->steps > 0) {
    if (absl::StatusOr<Estimate> e = EstimateSweep(sweep->spec(), *in); e.ok()) {
      rec.plan_json = EstimateJson(*e);
    }
  }
  // Stored before the backend is asked, so that what it takes for the sweep (its first Slurm
  // allocation) carries the sweep's id; a sweep the backend refuses is deleted again.
  absl::StatusOr<int64_t> id = store_.InsertSweep(rec);
  if (!id.ok()) return reply(id.status());
  rec.id = *id;
  if (rec.name.empty()) {
    rec.name = absl::StrCat("sweep-", rec.id);
    if (absl::Status s = store_.UpdateSweep(rec); !s.ok()) return reply(s);
  }
  struct Pending {
    std::unique_ptr<Sweep> sweep;
    std::vector<TrialRecord> inherited;
  };
  auto pending = std::make_shared<Pending>(Pending{std::move(sweep), std::move(inherited)});
  const SweepSpec& spec = pending->sweep->spec();
  return Vetting(rec.id, spec, [this, pending, reply](const absl::Status& vetted) -> Done {
    if (!vetted.ok()) {
      int64_t id = pending->sweep->rec.id;
      if (absl::Status s = store_.DeleteSweep(id); !s.ok()) {
        spdlog::error("sweep {}: refused, but cannot delete its record: {}", id, s.ToString());
      }
      return reply(absl::Status(
          vetted.code(), absl::StrCat("the sweep is invalid:\n  ",
                                      PlacementError(pending->sweep->spec(), vetted.message()))));
    }
    pending->sweep->rec.state = v1::SWEEP_STATE_RUNNING;
    if (absl::Status s = store_.UpdateSweep(pending->sweep->rec); !s.ok()) return reply(s);
    return reply(Admit(std::move(pending->sweep), std::move(pending->inherited)));
  });
}

absl::StatusOr<v1::Sweep> Controller::Admit(std::unique_ptr<Sweep> sweep,
                                            std::vector<TrialRecord> inherited) {
  Sweep& s = table_.AddSweep(std::move(sweep));
  spdlog::info("sweep {} '{}' submitted from {}", s.rec.id, s.rec.name, s.rec.source);
  lifecycle_.Announce(s);
  for (TrialRecord& t : inherited) {  // the sampler's history, never run
    t.sweep_id = s.rec.id;
    t.number = static_cast<int64_t>(s.trials().size());
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
  Sweep* old = table_.FindSweep(from);
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
  for (const auto& t : old->trials()) {
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

absl::StatusOr<v1::Sweep> Controller::GetSweep(const Allowed& allowed, int64_t sweep_id) const {
  RETURN_IF_ERROR(Within(allowed, Action::kView, sweep_id));
  ASSIGN_OR_RETURN(Sweep * sweep, FindSweep(sweep_id));
  return View(*sweep, /*with_spec=*/true);
}

absl::StatusOr<std::vector<v1::Sweep>> Controller::ListSweeps(const Allowed& allowed,
                                                              bool active_only) const {
  RETURN_IF_ERROR(Within(allowed, Action::kUse, 0));
  std::vector<v1::Sweep> out;
  for (const auto& [id, sweep] : table_.sweeps()) {
    if (active_only && sweep->Final()) continue;
    SweepRef ref{id, sweep->rec.owner};
    if (!allowed.anything_ && !server::Authorize(allowed.caller(), Action::kView, &ref).ok())
      continue;
    out.push_back(View(*sweep));
  }
  return out;
}

absl::Status Controller::Authorize(const Caller& caller, const Need& need) const {
  const Sweep* sweep = nullptr;
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

absl::StatusOr<CoreReads> Controller::Read(const Allowed& allowed) const {
  const Need& need = allowed.need();
  if (!allowed.anything_ && need.action != Action::kView && need.action != Action::kMetrics) {
    return absl::InternalError("the gate ruled on a call that reads nothing of the core");
  }
  return CoreReads{table_, store_, backend_, clock_.Now()};
}

absl::StatusOr<Allowed> Controller::Allow(const Caller& caller, const Need& need) const {
  RETURN_IF_ERROR(Authorize(caller, need));
  return Allowed(caller, need);
}

Allowed Controller::AllowedForTest() {
  return Allowed(Caller::Owner(""), Need{Action::kUse}, true);
}

absl::Status Controller::Within(const Allowed& allowed, Action action, int64_t sweep_id,
                                int64_t trial_id) const {
  if (allowed.anything_) return absl::OkStatus();
  const Need& need = allowed.need();
  if (need.action == action && need.sweep_id == sweep_id && need.trial_id == trial_id) {
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat("the gate ruled on another call (sweep ", need.sweep_id,
                                          ", trial ", need.trial_id, ") than this one (sweep ",
                                          sweep_id, ", trial ", trial_id, ")"));
}

absl::StatusOr<v1::Sweep> Controller::Cancel(const Allowed& allowed, int64_t sweep_id) {
  RETURN_IF_ERROR(Within(allowed, Action::kOperate, sweep_id));
  ASSIGN_OR_RETURN(Sweep * sweep, FindSweep(sweep_id));
  if (sweep->Final()) {
    return absl::FailedPreconditionError(
        absl::StrCat("sweep ", sweep_id, " already ended (", v1::StateName(sweep->rec.state), ")"));
  }
  // A cancel overrides any other ending.
  lifecycle_.BeginEnding(*sweep, v1::SWEEP_STATE_CANCELED, "canceled by the user",
                         /*override=*/true);
  return View(*sweep);
}

absl::StatusOr<v1::Sweep> Controller::Pause(const Allowed& allowed, int64_t sweep_id) {
  RETURN_IF_ERROR(Within(allowed, Action::kOperate, sweep_id));
  ASSIGN_OR_RETURN(Sweep * sweep, FindSweep(sweep_id));
  if (sweep->rec.state != v1::SWEEP_STATE_RUNNING || sweep->Ending()) {
    return absl::FailedPreconditionError(absl::StrCat("sweep ", sweep_id, " is ",
                                                      v1::StateName(sweep->rec.state),
                                                      "; only a RUNNING sweep can be paused"));
  }
  sweep->Pause("paused by the user");
  lifecycle_.SaveSweep(*sweep);
  return View(*sweep);
}

absl::StatusOr<v1::Sweep> Controller::Resume(const Allowed& allowed, int64_t sweep_id) {
  RETURN_IF_ERROR(Within(allowed, Action::kOperate, sweep_id));
  ASSIGN_OR_RETURN(Sweep * sweep, FindSweep(sweep_id));
  if (sweep->rec.state != v1::SWEEP_STATE_PAUSED) {
    return absl::FailedPreconditionError(absl::StrCat("sweep ", sweep_id, " is ",
                                                      v1::StateName(sweep->rec.state),
                                                      "; only a PAUSED sweep can be resumed"));
  }
  sweep->Resume("resumed by the user");
  lifecycle_.SaveSweep(*sweep);
  lifecycle_.Schedule(*sweep);
  return View(*sweep);
}

absl::StatusOr<v1::Sweep> Controller::AllowNode(const Allowed& allowed, int64_t sweep_id,
                                                const std::string& node) {
  RETURN_IF_ERROR(Within(allowed, Action::kOperate, sweep_id));
  ASSIGN_OR_RETURN(Sweep * sweep, FindSweep(sweep_id));
  auto it = sweep->rec.nodes.find(node);
  if (it == sweep->rec.nodes.end() || !it->second.quarantined) {
    std::set<std::string> quarantined = sweep->QuarantinedNodes();
    return absl::FailedPreconditionError(absl::StrCat(
        "node '", node, "' is not quarantined in sweep ", sweep_id,
        " (quarantined: ", quarantined.empty() ? "none" : absl::StrJoin(quarantined, ", "), ")"));
  }
  it->second.quarantined = false;
  it->second.failures = 0;
  spdlog::info("sweep {}: node {} allowed back in by the user", sweep_id, node);
  if (!sweep->Final()) backend_.ExcludeNodes(sweep_id, sweep->QuarantinedNodes());
  lifecycle_.SaveSweep(*sweep);
  lifecycle_.Schedule(*sweep);
  return View(*sweep);
}

absl::StatusOr<v1::Sweep> Controller::Extend(const Allowed& allowed,
                                             const v1::ExtendSweepRequest& req) {
  RETURN_IF_ERROR(Within(allowed, Action::kOperate, req.sweep_id()));
  ASSIGN_OR_RETURN(Sweep * sweep, FindSweep(req.sweep_id()));
  const std::string fingerprint = ChangeFingerprint(req);
  if (auto replayed = Replayed(*sweep, req.request_id(), fingerprint)) return *replayed;
  RETURN_IF_ERROR(CheckChangeable(*sweep, "extended"));
  ASSIGN_OR_RETURN(Extension extension, ExtendBudget(req, BudgetStateOf(*sweep)));
  const Caller& caller = allowed.caller();
  if (!caller.owner()) {
    // What this extend adds to a GPU-hour budget (setting one where there was none adds nothing:
    // it bounds what was unbounded), held against the cap the owner gave this user.
    std::optional<double> before = sweep->spec().budget.gpu_hours;
    double added = before && extension.change.gpu_hours
                       ? std::max(0.0, *extension.change.gpu_hours - *before)
                       : 0.0;
    double& so_far = extension.change.gpu_hours_added_by[caller.user];
    if (caller.max_extend_gpu_hours && so_far + added > *caller.max_extend_gpu_hours + 1e-9) {
      return absl::PermissionDeniedError(absl::StrFormat(
          "%s may add at most %.4g GPU-hours to a sweep's budget (the owner's cap: `hpo user role "
          "%s ... --max-extend-gpu-hours`); %s added %.4g to sweep %d already, and this extend "
          "adds %.4g",
          caller.user, *caller.max_extend_gpu_hours, caller.user, caller.user, so_far,
          sweep->rec.id, added));
    }
    so_far += added;
  }
  sweep->NoteApplied(req.request_id(), fingerprint);
  Change(*sweep, extension.change,
         absl::StrCat("extended by ",
                      caller.owner() ? absl::StrCat("the owner (", caller.user, ")") : caller.user,
                      ": ", absl::StrJoin(extension.said, ", ")));
  return View(*sweep);
}

BudgetState Controller::BudgetStateOf(const Sweep& sweep) const {
  BudgetState state;
  state.sweep_id = sweep.rec.id;
  state.budget = sweep.spec().budget;
  state.change = sweep.rec.budget_change;
  state.limit = sweep.plan.limit;
  state.made = sweep.Counted();
  state.queued = static_cast<int64_t>(sweep.rec.queue.size());
  state.retrying = static_cast<int64_t>(sweep.retries().size());
  std::optional<int64_t> cap = sweep.plan.sampler->MaxTrials(sweep.spec().space);
  state.sampler_done = sweep.exhausted() || (cap && sweep.sampled() >= *cap);
  state.sampler = sweep.plan.sampler->Name();
  state.sampled = sweep.sampled();
  state.created = sweep.rec.created_at;
  state.now = clock_.Now();
  state.usage = MeasureUsage(sweep, state.now);
  return state;
}

absl::Status Controller::CheckChangeable(const Sweep& sweep, const char* verb) const {
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
    const Sweep& sweep, const std::string& key, const std::string& fingerprint) const {
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

void Controller::Change(Sweep& sweep, const BudgetChange& change, const std::string& message) {
  sweep.ChangeBudget(change);  // the hour budgets are judged again, against the new budget
  bool was_final = sweep.Final();
  bool reopens = sweep.Reopen(message);
  if (was_final) backend_.SweepReopened(sweep.rec.id);
  spdlog::info("sweep {}: {}{}", sweep.rec.id, message, reopens ? " (reopened)" : "");
  lifecycle_.SaveSweep(sweep);
  lifecycle_.Schedule(sweep);
}

absl::StatusOr<v1::Sweep> Controller::Enqueue(const Allowed& allowed,
                                              const v1::EnqueueRequest& req) {
  RETURN_IF_ERROR(Within(allowed, Action::kOperate, req.sweep_id()));
  ASSIGN_OR_RETURN(Sweep * sweep, FindSweep(req.sweep_id()));
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
  ASSIGN_OR_RETURN(Extension extension,
                   EnqueueBudget(static_cast<int64_t>(points.size()), BudgetStateOf(*sweep)));
  std::string message = absl::StrCat(points.size(), " configuration(s) enqueued by the user");
  for (const std::string& said : extension.said) absl::StrAppend(&message, "; ", said);
  const BudgetChange& change = extension.change;
  sweep->Enqueue(std::move(points));
  sweep->NoteApplied(req.request_id(), fingerprint);
  Change(*sweep, change, message);
  return View(*sweep);
}

absl::StatusOr<v1::AskResponse> Controller::Ask(const Allowed& allowed, int64_t sweep_id) {
  RETURN_IF_ERROR(Within(allowed, Action::kOperate, sweep_id));
  ASSIGN_OR_RETURN(Sweep * sweep, FindSweep(sweep_id));
  ASSIGN_OR_RETURN(TrialRuntime * trial, lifecycle_.Ask(*sweep));
  v1::AskResponse resp;
  *resp.mutable_trial() = TrialView(*sweep, *trial, clock_.Now());
  resp.set_token(trial->rec.token);
  resp.set_endpoint(lifecycle_.options().report_endpoint);
  if (!lifecycle_.options().tls_ca_pem.empty()) {
    resp.set_tls_ca_data(Base64Encode(lifecycle_.options().tls_ca_pem));
  }
  return resp;
}

absl::StatusOr<v1::Trial> Controller::Tell(const Allowed& allowed, const v1::TellRequest& req) {
  RETURN_IF_ERROR(Within(allowed, Action::kOperate, 0, req.trial_id()));
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

absl::StatusOr<std::vector<std::string>> Controller::Remove(const Allowed& allowed,
                                                            int64_t sweep_id) {
  RETURN_IF_ERROR(Within(allowed, Action::kRemove, sweep_id));
  ASSIGN_OR_RETURN(Sweep * sweep, FindSweep(sweep_id));
  if (!sweep->Final()) {
    return absl::FailedPreconditionError(
        absl::StrCat("sweep ", sweep_id, " is ", v1::StateName(sweep->rec.state),
                     "; only an ended sweep can be removed (hpo cancel ", sweep_id, " first)"));
  }
  // Its directories: where its trials' are (`<sweeps>/<id>/trials/<number>`), and where a sweep
  // of this id would have them now. Nothing else is removed.
  std::set<std::string> dirs;
  const std::string name = std::to_string(sweep_id);
  for (const auto& t : sweep->trials()) {
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
    const Allowed& allowed, const v1::ListTrialsRequest& req) const {
  RETURN_IF_ERROR(Within(allowed, Action::kView, req.sweep_id()));
  ASSIGN_OR_RETURN(Sweep * sweep, FindSweep(req.sweep_id()));
  return TrialsView(*sweep, req, clock_.Now());
}

absl::StatusOr<v1::GetTrialResponse> Controller::GetTrial(const Allowed& allowed,
                                                          const v1::GetTrialRequest& req) {
  RETURN_IF_ERROR(Within(allowed, Action::kView, 0, req.trial_id()));
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

absl::StatusOr<std::string> Controller::TrialDir(const Allowed& allowed, int64_t trial_id) const {
  RETURN_IF_ERROR(Within(allowed, Action::kView, 0, trial_id));
  auto [sweep, trial] = table_.FindTrial(trial_id);
  if (trial == nullptr) return absl::NotFoundError(absl::StrCat("no trial ", trial_id));
  return trial->rec.trial_dir;
}

absl::StatusOr<std::string> Controller::TrialTokenForTest(int64_t trial_id) const {
  auto [sweep, trial] = table_.FindTrial(trial_id);
  if (trial == nullptr) return absl::NotFoundError(absl::StrCat("no trial ", trial_id));
  return trial->rec.token;
}

absl::Status Controller::Watch(const Allowed& allowed, int64_t sweep_id, int64_t since_seq,
                               std::shared_ptr<EventSink> sink) {
  RETURN_IF_ERROR(Within(allowed, Action::kView, sweep_id));
  ASSIGN_OR_RETURN(Sweep * sweep, FindSweep(sweep_id));
  return events_.Subscribe(sweep_id, since_seq, std::move(sink), sweep->Final());
}

}  // namespace hpo::server
