#include "algorithms/mo_asha_stopper.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace hpo::algorithms {

std::span<const double> MoAshaStopper::VectorOf(const Curve& c, size_t index) const {
  return c.vectors.subspan(index * width(), width());
}

size_t MoAshaStopper::AddDistinct(Points& at, std::span<const double> v) const {
  const size_t k = directions_.size();
  at.k = k;
  at.Add(v.first(k), directions_, v.back());  // as minimized, to compare with the others
  const size_t last = at.size() - 1;
  for (size_t i = 0; i < last; ++i) {
    if (at.violation[i] == at.violation[last] &&
        std::equal(at.row(i), at.row(i) + k, at.row(last))) {
      at.f.resize(last * k);
      at.violation.resize(last);
      return i;
    }
  }
  return last;
}

StopDecision MoAshaStopper::Rank(const Points& at_rung, size_t target, size_t rung_index,
                                 int64_t rung) const {
  size_t n = at_rung.size();
  int64_t eta = std::max<int64_t>(options_.reduction_factor, 2);
  size_t keep = std::max<size_t>(1, n / static_cast<size_t>(eta));
  if (static_cast<int64_t>(n) <= options_.bootstrap) {
    return {Decision::kStop,
            absl::StrFormat("%s: at rung %d (step %d) only %d trial(s) so far; it promotes none "
                            "until more than %d (bootstrap)",
                            Name(), rung_index, rung, n, options_.bootstrap)};
  }
  std::vector<int> ranks = NonDominatedRanks(at_rung);
  std::vector<std::vector<size_t>> fronts = Fronts(ranks);
  size_t before = 0;  // points in better fronts than the target's
  const std::vector<size_t>& front = fronts[static_cast<size_t>(ranks[target])];
  for (int r = 0; r < ranks[target]; ++r) before += fronts[static_cast<size_t>(r)].size();
  size_t position = before;
  if (before < keep && before + front.size() > keep) {  // the front the cut goes through
    std::vector<size_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = i;
    std::vector<size_t> order = EpsilonNetOrder(at_rung, front, all);
    position += static_cast<size_t>(std::find(order.begin(), order.end(), target) - order.begin());
  } else if (before < keep) {
    return {};  // its whole front is in
  }
  if (position < keep) return {};
  return {Decision::kStop,
          absl::StrFormat("%s: at rung %d (step %d) it ranks %d of %d (Pareto front %d); only "
                          "the first %d go on",
                          Name(), rung_index, rung, position + 1, n, ranks[target] + 1, keep)};
}

StopDecision MoAshaStopper::Observe(const Curve& trial, Direction) {
  if (trial.vectors.size() != trial.points.size() * width()) return {};
  std::optional<std::pair<size_t, int64_t>> crossed = rungs_of_.CrossedRung(trial);
  if (!crossed) return {};
  auto [rung_index, rung] = *crossed;
  std::span<const double> v = VectorOf(trial, trial.points.size() - 1);
  Points& at = rungs_[{rungs_of_.BracketOf(trial.trial_number), rung}];
  return Rank(at, AddDistinct(at, v), rung_index, rung);
}

StopDecision MoAshaStopper::Decide(const Curve& trial,
                                   const std::vector<const Curve*>& others) const {
  if (trial.vectors.size() != trial.points.size() * width()) return {};
  std::optional<std::pair<size_t, int64_t>> crossed = rungs_of_.CrossedRung(trial);
  if (!crossed) return {};
  auto [rung_index, rung] = *crossed;
  int bracket = rungs_of_.BracketOf(trial.trial_number);
  Points at;
  at.k = directions_.size();
  // The others, in the order they reached the rung does not matter: ranks do not depend on it.
  for (const Curve* other : others) {
    if (rungs_of_.BracketOf(other->trial_number) != bracket) continue;
    if (other->vectors.size() != other->points.size() * width()) continue;
    for (size_t i = 0; i < other->points.size(); ++i) {
      if (other->points[i].first < rung) continue;
      AddDistinct(at, VectorOf(*other, i));
      break;
    }
  }
  return Rank(at, AddDistinct(at, VectorOf(trial, trial.points.size() - 1)), rung_index, rung);
}

}  // namespace hpo::algorithms
