#include "server/core/budget.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hpo::server {
namespace {

// One hour budget: its hours and the seconds charged against it.
struct HourBudget {
  const char* name;
  std::optional<double> hours;
  double used_seconds;
  int held;
};

std::vector<HourBudget> HourBudgets(const Budget& budget, const Usage& usage) {
  return {{"budget.gpu_hours", budget.gpu_hours, usage.GpuSeconds(), usage.GpusHeld()},
          {"budget.node_hours", budget.node_hours, usage.NodeSeconds(), usage.NodesHeld()}};
}

// `hpo extend --gpu-hours`/`--node-hours` (`unit`): the new budget from `set` or `add` (0: not
// given) over `budget`, above the `used_seconds`, noted in `said`; `changed` (the budget as
// extended before) when neither is given; INVALID_ARGUMENT otherwise.
absl::StatusOr<std::optional<double>> ExtendHours(const std::string& id, const char* unit,
                                                  double set, double add,
                                                  std::optional<double> budget, double used_seconds,
                                                  std::optional<double> changed,
                                                  std::vector<std::string>& said) {
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

// The flag of `hpo extend` that moves the hour budget `reached` names.
const char* HoursFlag(const std::string& reached) {
  return absl::StartsWith(reached, "budget.gpu") ? "gpu-hours" : "node-hours";
}

}  // namespace

void ApplyBudgetChange(SweepPlan& plan, const BudgetChange& change) {
  Budget& b = plan.spec.budget;
  if (change.max_trials) b.max_trials = *change.max_trials;
  if (change.max_concurrent) b.max_concurrent = *change.max_concurrent;
  if (change.wall_time) b.wall_time = *change.wall_time;
  if (change.gpu_hours) b.gpu_hours = *change.gpu_hours;
  if (change.node_hours) b.node_hours = *change.node_hours;
  plan.limit = plan.spec.TrialLimit(*plan.sampler);
}

bool WallTimeRanOut(const Budget& budget, absl::Time created, absl::Time now) {
  return budget.wall_time && now - created >= *budget.wall_time;
}

std::optional<std::string> BudgetReached(const Budget& budget, const Usage& usage) {
  for (const HourBudget& b : HourBudgets(budget, usage)) {
    if (b.hours && b.used_seconds >= *b.hours * 3600) {
      return absl::StrCat(b.name, " (", *b.hours, ")");
    }
  }
  return std::nullopt;
}

std::optional<double> BudgetSecondsLeft(const Budget& budget, const Usage& usage) {
  std::optional<double> left;
  for (const HourBudget& b : HourBudgets(budget, usage)) {
    if (!b.hours || b.held <= 0) continue;
    double lasts = std::max(0.0, *b.hours * 3600 - b.used_seconds) / b.held;
    left = left ? std::min(*left, lasts) : lasts;
  }
  return left;
}

absl::StatusOr<Extension> ExtendBudget(const v1::ExtendSweepRequest& req,
                                       const BudgetState& state) {
  const std::string id = absl::StrCat("sweep ", state.sweep_id);
  Extension out;
  out.change = state.change;
  BudgetChange& change = out.change;
  std::vector<std::string>& said = out.said;
  if (req.max_trials() < 0 || req.add_trials() < 0 || req.max_concurrent() < 0 ||
      req.wall_time_seconds() < 0 || req.gpu_hours() < 0 || req.add_gpu_hours() < 0 ||
      req.node_hours() < 0 || req.add_node_hours() < 0) {
    return absl::InvalidArgumentError("extend: every amount must be positive");
  }
  if (req.max_trials() > 0 && req.add_trials() > 0) {
    return absl::InvalidArgumentError(
        "extend: give the new number of trials or how many more, not both");
  }
  if (req.max_trials() > 0 || req.add_trials() > 0) {
    int64_t limit = req.max_trials() > 0 ? req.max_trials()
                                         : std::max(state.limit, state.made) + req.add_trials();
    if (limit <= state.made) {
      return absl::InvalidArgumentError(
          absl::StrCat("extend: ", id, " already made ", state.made, " trial(s); --trials ", limit,
                       " gives it none more (use a larger number, or +N)"));
    }
    if (state.sampler_done) {
      return absl::InvalidArgumentError(absl::StrCat(
          "extend: ", id, "'s ", state.sampler, " search has nothing more to propose (",
          state.sampled, " trial(s) made); more trials need a larger space: `hpo fork`"));
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
    change.wall_time = (state.now - state.created) + more;
    said.push_back(absl::StrCat("wall time ", absl::FormatDuration(more), " more"));
  }
  const Budget& budget = state.budget;
  auto gpu_hours = ExtendHours(id, "GPU-hours", req.gpu_hours(), req.add_gpu_hours(),
                               budget.gpu_hours, state.usage.GpuSeconds(), change.gpu_hours, said);
  if (!gpu_hours.ok()) return gpu_hours.status();
  change.gpu_hours = *gpu_hours;
  auto node_hours =
      ExtendHours(id, "node-hours", req.node_hours(), req.add_node_hours(), budget.node_hours,
                  state.usage.NodeSeconds(), change.node_hours, said);
  if (!node_hours.ok()) return node_hours.status();
  change.node_hours = *node_hours;
  if (said.empty()) {
    return absl::InvalidArgumentError(
        "extend: nothing to change (give --trials, --wall-time, --concurrent, --gpu-hours or "
        "--node-hours)");
  }
  // What stopped it must have moved, or it would end again at once.
  Budget changed = budget;
  if (change.wall_time) changed.wall_time = change.wall_time;
  if (change.gpu_hours) changed.gpu_hours = change.gpu_hours;
  if (change.node_hours) changed.node_hours = change.node_hours;
  if (WallTimeRanOut(changed, state.created, state.now)) {
    return absl::InvalidArgumentError(absl::StrCat("extend: ", id, "'s wall time (",
                                                   absl::FormatDuration(*changed.wall_time),
                                                   ") has run out; give --wall-time too"));
  }
  if (std::optional<std::string> reached = BudgetReached(changed, state.usage)) {
    return absl::InvalidArgumentError(absl::StrCat("extend: ", id, " used its ", *reached,
                                                   "; give --", HoursFlag(*reached), " too"));
  }
  int64_t limit = change.max_trials ? *change.max_trials : state.limit;
  if (state.queued + state.retrying == 0 && limit > 0 && state.made >= limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("extend: ", id, " made all its ", limit, " trial(s); give --trials too"));
  }
  return out;
}

absl::StatusOr<Extension> EnqueueBudget(int64_t more, const BudgetState& state) {
  const int64_t id = state.sweep_id;
  if (WallTimeRanOut(state.budget, state.created, state.now)) {
    return absl::InvalidArgumentError(absl::StrCat("enqueue: sweep ", id,
                                                   "'s wall time has run out; `hpo extend ", id,
                                                   " --wall-time D` first"));
  }
  if (std::optional<std::string> reached = BudgetReached(state.budget, state.usage)) {
    return absl::InvalidArgumentError(absl::StrCat("enqueue: sweep ", id, " used its ", *reached,
                                                   "; `hpo extend ", id, " --", HoursFlag(*reached),
                                                   " X` first"));
  }
  // They run whatever is left of the trial budget: the limit grows when they need it to.
  Extension out;
  out.change = state.change;
  int64_t want = state.made + state.queued + more;
  if (state.budget.max_trials > 0 && want > state.limit) {
    out.change.max_trials = want;
    out.said.push_back(absl::StrCat("budget.max_trials raised to ", want, " for them"));
  }
  return out;
}

}  // namespace hpo::server
