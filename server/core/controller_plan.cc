// The controller's plans (`hpo plan`): what a sweep will cost, learned from the file, the caller
// or an earlier sweep's trials (estimate.h). The rest of the controller is in controller.cc.
#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/core/controller.h"
#include "server/core/views.h"

namespace hpo::server {

absl::StatusOr<EstimateInputs> Controller::InputsFor(const Caller& caller, const SweepSpec& spec,
                                                     int64_t limit,
                                                     const v1::PlanSweepRequest& req) const {
  EstimateInputs in;
  in.limit = limit;
  std::string steps_from, time_from;
  if (int64_t like = req.like_sweep() > 0 ? req.like_sweep() : spec.plan.like; like > 0) {
    RETURN_IF_ERROR(Authorize(caller, Need{Action::kView, like}));
    ASSIGN_OR_RETURN(Sweep * from, FindSweep(like));
    std::vector<const TrialRecord*> trials;
    for (const auto& t : from->trials()) trials.push_back(&t->rec);
    EstimateInputs learned =
        InputsFromTrials(trials, ReportSpans(trials), from->spec().budget.max_trial_steps);
    if (learned.step_seconds.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sweep ", like, " has no finished trial with a report to learn a step's time from"));
    }
    in.step_seconds = std::move(learned.step_seconds);
    in.startup_seconds = std::move(learned.startup_seconds);
    in.tail_seconds = std::move(learned.tail_seconds);
    time_from = absl::StrCat("sweep ", like, "'s ", in.step_seconds.size(), " finished trial(s)");
    if (learned.steps > 0) {
      in.steps = learned.steps;
      steps_from = absl::StrCat("sweep ", like, "'s completed trials");
    }
  }
  if (spec.plan.step_time) {
    in.step_seconds = {absl::ToDoubleSeconds(*spec.plan.step_time)};
    in.startup_seconds.clear();
    in.tail_seconds.clear();
    time_from = "the file's plan.step_time";
  }
  if (req.step_seconds() > 0) {
    in.step_seconds = {req.step_seconds()};
    in.startup_seconds.clear();
    in.tail_seconds.clear();
    time_from = "given";
  }
  if (int64_t declared = DeclaredSteps(spec);
      declared > 0 && (in.steps <= 0 || spec.plan.steps > 0)) {
    in.steps = declared;
    steps_from = spec.plan.steps > 0 ? "the file's plan.steps" : "early_stopping.max_resource";
  }
  if (req.steps() > 0) {
    in.steps = req.steps();
    steps_from = "given";
  }
  in.basis = absl::StrCat(in.steps, " step(s) a trial (", steps_from, ")");
  if (!in.step_seconds.empty()) {
    double sum = 0;
    for (double s : in.step_seconds) sum += s;
    auto mean = [](const std::vector<double>& v) {
      double sum = 0;
      for (double x : v) sum += x;
      return sum / static_cast<double>(std::max<size_t>(1, v.size()));
    };
    auto text = [](double seconds) {
      return absl::FormatDuration(absl::Milliseconds(std::round(1000 * seconds)));
    };
    const double step = mean(in.step_seconds);
    absl::StrAppend(&in.basis, ", ", text(step), " a step");
    // A trial's start and end, when they are more than a trifle next to a step.
    const double trifle = std::max(0.05, step / 10);
    if (double s = mean(in.startup_seconds); s > trifle) {
      absl::StrAppend(&in.basis, ", ", text(s), " to start");
    }
    if (double s = mean(in.tail_seconds); s > trifle) {
      absl::StrAppend(&in.basis, ", ", text(s), " to end");
    }
    absl::StrAppend(&in.basis, " (", time_from, in.step_seconds.size() > 1 ? ", on average" : "",
                    ")");
  }
  return in;
}

std::map<int64_t, ReportSpan> Controller::ReportSpans(
    const std::vector<const TrialRecord*>& trials) const {
  // The most recent finished trials, enough for the plan's bootstrap; each one's reports are read.
  constexpr size_t kMostTrials = 200;
  std::map<int64_t, ReportSpan> spans;
  for (auto it = trials.rbegin(); it != trials.rend() && spans.size() < kMostTrials; ++it) {
    const TrialRecord& t = **it;
    if (t.state != v1::TRIAL_STATE_COMPLETED && t.state != v1::TRIAL_STATE_STOPPED) continue;
    absl::StatusOr<std::vector<ReportRecord>> reports = store_.LoadReports(t.id);
    if (!reports.ok() || reports->empty()) continue;
    ReportSpan span{reports->front().step, reports->front().step, reports->front().time,
                    reports->front().time};
    for (const ReportRecord& r : *reports) {
      if (r.time < span.first) std::tie(span.first, span.first_step) = std::tie(r.time, r.step);
      if (r.time > span.last) std::tie(span.last, span.last_step) = std::tie(r.time, r.step);
    }
    spans[t.id] = span;
  }
  return spans;
}

Controller::Done Controller::Plan(const Allowed& allowed, const v1::PlanSweepRequest& req,
                                  Reply<v1::PlanSweepResponse> reply) {
  return PlanOn(allowed, req, std::move(reply), /*off_thread=*/true);
}

Controller::Done Controller::PlanOn(const Allowed& allowed, const v1::PlanSweepRequest& req,
                                    Reply<v1::PlanSweepResponse> reply, bool off_thread) {
  if (absl::Status s = Within(allowed, Action::kUse, 0); !s.ok()) return reply(s);
  absl::StatusOr<Slots::Held> slot = plan_slots_->Take(allowed.caller().user);
  if (!slot.ok()) return reply(slot.status());
  v1::PlanSweepResponse resp;
  PlanResult planned =
      PlanSweep(req.spec_yaml(), req.source(), req.base_dir(), &backend_, SubmitDefaults());
  for (const std::string& e : planned.errors) resp.add_errors(e);
  if (!planned.plan) return reply(std::move(resp));
  const SweepSpec& spec = planned.plan->spec;
  absl::StatusOr<EstimateInputs> in = InputsFor(allowed.caller(), spec, planned.plan->limit, req);
  if (!in.ok()) {
    resp.add_errors(std::string(in.status().message()));
    return reply(std::move(resp));
  }
  if (req.pilot()) {
    // A pilot measures what is not known: only what it cannot learn is checked.
    if (absl::Status s = CheckBounded(spec, in->limit); !s.ok()) {
      resp.add_errors(std::string(s.message()));
    }
    resp.set_length_unknown(in->steps <= 0);
    return reply(std::move(resp));
  }
  // With the estimate: the backend's guess of the queue wait, on this thread.
  auto estimated = [this, resp, reply, r = spec.MaxResources(),
                    p = spec.placement](const absl::StatusOr<Estimate>& estimate) mutable -> Done {
    if (!estimate.ok()) {
      resp.add_errors(std::string(estimate.status().message()));
      return reply(std::move(resp));
    }
    *resp.mutable_estimate() = EstimateProto(*estimate);
    return QueueWait(r, p, std::move(resp), std::move(reply));
  };
  if (!off_thread) return estimated(EstimateSweep(spec, *in));
  plans_.Run([this, spec, in = std::move(*in), slot = std::move(*slot), estimated]() mutable {
    absl::StatusOr<Estimate> estimate = EstimateSweep(spec, in);
    slot.reset();  // computed: the user may plan again
    Post([estimated, estimate = std::move(estimate)]() mutable -> Done {
      return estimated(estimate);
    });
  });
  return nullptr;
}

Controller::Done Controller::QueueWait(const backend::Resources& r, const backend::Placement& p,
                                       v1::PlanSweepResponse resp,
                                       Reply<v1::PlanSweepResponse> reply) {
  const absl::Time asked = clock_.Now();
  using Wait = absl::StatusOr<backend::Capacity::QueueWait>;
  return Awaiting<Wait>(
      [this, r, p](auto answer) { backend_.ExpectedStart(r, p, std::move(answer)); },
      [resp, reply, asked](const Wait& wait) mutable -> Done {
        v1::SweepEstimate* e = resp.mutable_estimate();
        if (wait.ok()) {
          e->set_has_queue_wait(true);
          e->set_queue_wait_seconds(std::max(0.0, absl::ToDoubleSeconds(wait->start - asked)));
          e->set_queue_wait_basis(absl::StrCat("slurmctld's will_run for ", wait->what));
        } else if (absl::IsUnavailable(wait.status())) {
          e->set_queue_wait_basis(std::string(wait.status().message()));
        } else if (!absl::IsUnimplemented(wait.status())) {
          e->set_queue_wait_basis(absl::StrCat("no queue wait: ", wait.status().message()));
        }
        return reply(std::move(resp));
      });
}

absl::StatusOr<v1::PlanSweepResponse> Controller::Plan(const Allowed& allowed,
                                                       const v1::PlanSweepRequest& req) {
  return Inline<v1::PlanSweepResponse>([&](Reply<v1::PlanSweepResponse> reply) {
    return PlanOn(allowed, req, reply, /*off_thread=*/false);
  });
}

}  // namespace hpo::server
