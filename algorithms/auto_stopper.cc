#include "algorithms/auto_stopper.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "algorithms/asha_stopper.h"

namespace hpo::algorithms {

AutoStopper::AutoStopper(const StopperSpec& spec, std::vector<Direction> directions)
    : directions_(std::move(directions)) {
  if (!spec.none_because.empty()) {
    spec_.name = "none";
    why_ = absl::StrCat("none: ", spec.none_because);
    chosen_ = std::make_unique<NoStopper>();
  } else if (spec.steps > 0) {
    Choose(spec.steps, spec.steps_from);
  }
}

std::pair<StopperSpec, std::string> AutoStopper::For(int64_t steps, bool pareto) {
  StopperSpec s;
  if (steps < 4) {
    s.name = "none";
    return {s, absl::StrCat("trials of ", steps,
                            " step(s) are too short to stop early (no room for a rung before "
                            "the end): none")};
  }
  s.name = "asha";
  s.min_resource = std::max<int64_t>(1, steps / 81);
  s.max_resource = steps;
  s.reduction_factor = 3;
  std::string rungs = "asha";
  if (pareto) {
    rungs = "multi-objective asha (several objectives or constraints)";
  } else {
    s.min_correlation = 0.5;
  }
  return {s, rungs};
}

void AutoStopper::Choose(int64_t steps, std::string from) {
  auto [spec, why] = For(steps, !directions_.empty());
  absl::StatusOr<std::unique_ptr<Stopper>> made = MakeStopper(spec, directions_);
  if (!made.ok()) {  // For's settings are valid for every L; this is a bug
    spec.name = "none";
    why = absl::StrCat("none (", made.status().message(), ")");
    made = std::make_unique<NoStopper>();
  }
  spec_ = spec;
  why_ = std::move(why);
  from_ = std::move(from);
  chosen_ = std::move(*made);
  // What it was told so far, in the order it was told.
  const size_t width = directions_.size() + 1;
  for (const auto& [number, count] : told_) {
    const Kept& k = kept_[number];
    Curve c;
    c.trial_number = number;
    c.points = std::span(k.points.data(), count);
    if (!k.vectors.empty()) c.vectors = std::span(k.vectors.data(), count * width);
    (void)chosen_->Observe(c, direction_);
  }
  kept_.clear();
  told_.clear();
  told_.shrink_to_fit();
}

StopDecision AutoStopper::Observe(const Curve& trial, Direction direction) {
  direction_ = direction;
  if (chosen_) return chosen_->Observe(trial, direction);
  if (trial.points.empty()) return {};
  Kept& k = kept_[trial.trial_number];
  // A curve grows by a point a report: only the new ones are copied (a replay after a restart
  // tells each point once).
  if (k.points.size() <= trial.points.size() && k.vectors.size() <= trial.vectors.size()) {
    k.points.insert(k.points.end(), trial.points.begin() + static_cast<ptrdiff_t>(k.points.size()),
                    trial.points.end());
    k.vectors.insert(k.vectors.end(),
                     trial.vectors.begin() + static_cast<ptrdiff_t>(k.vectors.size()),
                     trial.vectors.end());
  } else {
    k.points.assign(trial.points.begin(), trial.points.end());
    k.vectors.assign(trial.vectors.begin(), trial.vectors.end());
  }
  told_.emplace_back(trial.trial_number, trial.points.size());
  return {};
}

void AutoStopper::Ended(const Curve& trial, bool completed) {
  if (chosen_) return chosen_->Ended(trial, completed);
  if (!completed || trial.points.empty()) return;
  int64_t steps = trial.points.back().first;
  Choose(steps, absl::StrCat("trial #", trial.trial_number, " (the first to complete) ran ", steps,
                             " steps"));
}

std::string AutoStopper::Choice() const {
  if (!chosen_) {
    return "none yet: it chooses once it knows how many steps a trial runs (plan.steps, "
           "budget.max_trial_steps, or the first trial that completes)";
  }
  if (spec_.name == "none") return from_.empty() ? why_ : absl::StrCat(why_, "; ", from_);
  const auto* asha = dynamic_cast<const AshaStopper*>(chosen_.get());
  std::vector<std::string> rungs;
  AshaStopper rungs_of(AshaOptions{spec_.min_resource, spec_.max_resource, spec_.reduction_factor});
  for (int64_t r : rungs_of.Rungs(0)) rungs.push_back(absl::StrCat(r));
  std::string out =
      absl::StrCat(why_, ", rungs at steps ", absl::StrJoin(rungs, ", "), " of ",
                   spec_.max_resource, " (", from_, "), reduction factor ", spec_.reduction_factor);
  if (asha != nullptr && spec_.min_correlation > 0) {
    absl::StrAppend(
        &out, "; a rung stops trials only while its values predict step ", spec_.max_resource,
        " (rank correlation at least ", spec_.min_correlation,
        " less one standard error, over 5 or more trials that got there): ", asha->RungStates());
  }
  return out;
}

}  // namespace hpo::algorithms
