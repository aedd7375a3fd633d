#include "server/core/views.h"

#include <algorithm>

#include "hpo/v1/states.h"
#include "server/core/budget.h"
#include "server/core/convert.h"
#include "server/core/objectives.h"
#include "server/core/usage.h"

namespace hpo::server {

v1::Sweep SweepView(const Sweep& sweep, bool with_spec, absl::Time now) {
  v1::Sweep out;
  const SweepRecord& rec = sweep.rec;
  const SweepSpec& spec = sweep.spec();
  out.set_id(rec.id);
  out.set_name(rec.name);
  out.set_state(rec.state);
  out.set_message(rec.message);
  *out.mutable_created_at() = ToProto(rec.created_at);
  if (rec.ended_at) *out.mutable_ended_at() = ToProto(*rec.ended_at);
  out.set_objective_metric(spec.objective.metric);
  out.set_direction(spec.objective.direction == algorithms::Direction::kMinimize
                        ? v1::DIRECTION_MINIMIZE
                        : v1::DIRECTION_MAXIMIZE);
  out.set_max_trials(sweep.plan.limit);
  out.set_max_concurrent(spec.budget.max_concurrent);
  for (const auto& t : sweep.trials()) (*out.mutable_trial_counts())[v1::StateName(t->rec.state)]++;
  if (sweep.best() >= 0) {
    const TrialRecord& best = sweep.trial(sweep.best()).rec;
    auto value = best.last_metrics.find(spec.objective.metric);
    std::optional<double> objective =
        best.objective
            ? best.objective
            : (value != best.last_metrics.end() ? std::optional(value->second) : std::nullopt);
    if (objective) {
      out.set_best_trial_id(best.id);
      out.set_best_objective(*objective);
    }
  }
  if (with_spec) out.set_spec_yaml(rec.spec_yaml);
  out.set_source(rec.source);
  out.set_algorithm(spec.algorithm.name);
  out.set_early_stopping(spec.early_stopping.name);
  auto [sampler_choice, stopper_choice] = sweep.Choices();
  out.set_algorithm_choice(sampler_choice);
  out.set_early_stopping_choice(stopper_choice);
  out.set_backend(rec.backend);
  out.set_owner(rec.owner);
  out.set_defaults_version(rec.defaults_version);
  out.set_hpod_version(rec.hpod_version);
  for (const std::string& w : sweep.plan.warnings) out.add_stored_warnings(w);
  Usage usage = MeasureUsage(sweep, now);
  out.set_gpu_seconds(usage.trial_gpu_seconds);
  out.set_gpus_held(usage.trial_gpus);
  out.set_allocation_gpu_seconds(usage.allocation_gpu_seconds);
  out.set_allocation_gpus_held(usage.allocation_gpus);
  out.set_utilization(usage.Utilization().value_or(0));
  out.set_charged_gpu_seconds(usage.GpuSeconds());
  out.set_node_seconds(usage.NodeSeconds());
  out.set_nodes_held(usage.NodesHeld());
  out.set_gpu_hours_budget(spec.budget.gpu_hours.value_or(0));
  out.set_node_hours_budget(spec.budget.node_hours.value_or(0));
  out.set_budget_seconds_left(BudgetSecondsLeft(spec.budget, usage).value_or(0));
  for (const Objective& o : spec.objectives) {
    v1::ObjectiveInfo* info = out.add_objectives();
    info->set_metric(o.metric);
    info->set_direction(o.direction == algorithms::Direction::kMinimize ? v1::DIRECTION_MINIMIZE
                                                                        : v1::DIRECTION_MAXIMIZE);
  }
  for (const Constraint& c : spec.constraints) out.add_constraints(c.Text());
  out.set_pareto_front_size(static_cast<int64_t>(sweep.front().size()));
  if (std::optional<Estimate> plan = EstimateFromJson(sweep.rec.plan_json)) {
    *out.mutable_plan() = EstimateProto(*plan);
  }
  for (const auto& [name, n] : sweep.rec.nodes) {
    v1::NodeHealth* node = out.add_nodes();
    node->set_node(name);
    node->set_failures(n.failures);
    node->set_quarantined(n.quarantined);
    node->set_last_failure(n.last_failure);
  }
  return out;
}

v1::SweepEstimate EstimateProto(const Estimate& e) {
  v1::SweepEstimate out;
  auto set = [](v1::EstimateRange* to, const EstimateRange& from) {
    to->set_low(from.low);
    to->set_expected(from.expected);
    to->set_high(from.high);
  };
  set(out.mutable_trials(), e.trials);
  set(out.mutable_steps(), e.steps);
  out.set_has_cost(e.has_cost);
  if (e.has_cost) {
    set(out.mutable_gpu_hours(), e.gpu_hours);
    set(out.mutable_node_hours(), e.node_hours);
    set(out.mutable_wall_seconds(), e.wall_seconds);
  }
  out.set_basis(e.basis);
  return out;
}

v1::Trial TrialView(const Sweep& sweep, const TrialRuntime& trial, absl::Time now) {
  v1::Trial out = ToProto(trial.rec);
  out.set_gpu_seconds(sweep.GpuSeconds(trial.rec, now));
  out.set_pareto_rank(-1);
  if (sweep.spec().Pareto()) {
    Scores scores = ScoresOf(sweep.spec(), trial.rec.last_metrics);
    for (double v : scores.values) out.add_objective_values(v);
    out.set_feasible(scores.violation <= 0);
  }
  return out;
}

std::vector<v1::Trial> TrialsView(const Sweep& sweep, const v1::ListTrialsRequest& req,
                                  absl::Time now) {
  const bool pareto = sweep.spec().Pareto();
  std::vector<int> ranks = pareto ? sweep.ParetoRanks() : std::vector<int>();
  auto rank = [&](const TrialRuntime* t) { return ranks[static_cast<size_t>(t->rec.number)]; };
  std::vector<const TrialRuntime*> picked;
  for (const auto& t : sweep.trials()) {
    if (req.states_size() > 0 &&
        std::find(req.states().begin(), req.states().end(), t->rec.state) == req.states().end()) {
      continue;
    }
    if (req.pareto() && (!pareto || rank(t.get()) != 0)) continue;
    picked.push_back(t.get());
  }
  algorithms::Direction dir = sweep.spec().objective.direction;
  if (pareto && (req.order() == v1::TRIAL_ORDER_OBJECTIVE || req.pareto())) {
    // By Pareto rank (the front first), then by the first objective.
    const std::string& first = sweep.spec().objective.metric;
    auto value = [&](const TrialRuntime* t) {
      auto it = t->rec.last_metrics.find(first);
      return it != t->rec.last_metrics.end() ? std::optional(it->second) : std::nullopt;
    };
    std::stable_sort(picked.begin(), picked.end(),
                     [&](const TrialRuntime* a, const TrialRuntime* b) {
                       if ((rank(a) >= 0) != (rank(b) >= 0)) return rank(a) >= 0;
                       if (rank(a) != rank(b)) return rank(a) < rank(b);
                       std::optional<double> x = value(a), y = value(b);
                       if (x.has_value() != y.has_value()) return x.has_value();
                       return x && IsBetter(*x, *y, dir);
                     });
  } else if (req.order() == v1::TRIAL_ORDER_OBJECTIVE) {
    std::stable_sort(
        picked.begin(), picked.end(), [dir](const TrialRuntime* a, const TrialRuntime* b) {
          if (a->rec.objective.has_value() != b->rec.objective.has_value()) {
            return a->rec.objective.has_value();
          }
          return a->rec.objective && IsBetter(*a->rec.objective, *b->rec.objective, dir);
        });
  } else if (req.order() == v1::TRIAL_ORDER_RECENT) {
    std::stable_sort(picked.begin(), picked.end(),
                     [](const TrialRuntime* a, const TrialRuntime* b) {
                       return a->rec.started_at.value_or(a->rec.created_at) >
                              b->rec.started_at.value_or(b->rec.created_at);
                     });
  }
  std::vector<v1::Trial> out;
  for (const TrialRuntime* t : picked) {
    if (req.limit() > 0 && static_cast<int>(out.size()) >= req.limit()) break;
    out.push_back(TrialView(sweep, *t, now));
    if (pareto) out.back().set_pareto_rank(rank(t));
  }
  return out;
}

v1::Event EventView(const Sweep& sweep, v1::EventKind kind, const TrialRuntime* trial,
                    absl::Time now) {
  v1::Event event;
  event.set_kind(kind);
  *event.mutable_time() = ToProto(now);
  event.set_sweep_id(sweep.rec.id);
  if (trial != nullptr) {
    *event.mutable_trial() = TrialView(sweep, *trial, now);
  } else {
    *event.mutable_sweep() = SweepView(sweep, false, now);
  }
  return event;
}

}  // namespace hpo::server
