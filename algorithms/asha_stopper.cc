#include "algorithms/asha_stopper.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hpo::algorithms {
namespace {

// The value of the curve's first point at or past `step`, or nullopt.
std::optional<double> ValueAt(const Curve& c, int64_t step) {
  for (const auto& [s, v] : c.points) {
    if (s >= step) return v;
  }
  return std::nullopt;
}

}  // namespace

std::vector<int64_t> AshaStopper::Rungs(int bracket) const {
  std::vector<int64_t> rungs;
  int64_t eta = std::max<int64_t>(options_.reduction_factor, 2);
  int64_t r = std::max<int64_t>(options_.min_resource, 1);
  for (int b = 0; b < bracket; ++b) r *= eta;
  for (; options_.max_resource <= 0 || r < options_.max_resource; r *= eta) {
    rungs.push_back(r);
    if (rungs.size() >= 62 || r > (int64_t{1} << 56)) break;
    if (options_.max_resource <= 0 && rungs.size() >= 40) break;
  }
  return rungs;
}

int AshaStopper::BracketOf(int64_t trial_number) const {
  int b = std::max(options_.brackets, 1);
  return static_cast<int>(((trial_number % b) + b) % b);
}

std::optional<std::pair<size_t, int64_t>> AshaStopper::CrossedRung(const Curve& trial) const {
  if (trial.points.empty()) return std::nullopt;
  int64_t step = trial.points.back().first;
  int64_t previous =
      trial.points.size() >= 2 ? trial.points[trial.points.size() - 2].first : INT64_MIN;
  std::optional<std::pair<size_t, int64_t>> crossed;
  std::vector<int64_t> rungs = Rungs(BracketOf(trial.trial_number));
  for (size_t k = 0; k < rungs.size(); ++k) {
    if (previous < rungs[k] && rungs[k] <= step) crossed = std::pair(k, rungs[k]);
  }
  return crossed;
}

StopDecision AshaStopper::Verdict(size_t rung_index, int64_t rung, double value, double threshold,
                                  size_t keep, size_t n) const {
  if (Bootstrapping(n)) {
    return {Decision::kStop,
            absl::StrFormat("%s: at rung %d (step %d) only %d trial(s) so far; it promotes none "
                            "until more than %d (bootstrap)",
                            Name(), rung_index, rung, n, options_.bootstrap)};
  }
  return {
      Decision::kStop,
      absl::StrFormat("%s: at rung %d (step %d) %g is not among the best %d of %d (threshold %g)",
                      Name(), rung_index, rung, value, keep, n, threshold)};
}

StopDecision AshaStopper::Decide(const Curve& trial, const std::vector<const Curve*>& others,
                                 Direction direction) const {
  std::optional<std::pair<size_t, int64_t>> crossed = CrossedRung(trial);
  if (!crossed) return {};
  auto [rung_index, rung] = *crossed;
  double value = trial.points.back().second;
  int bracket = BracketOf(trial.trial_number);
  std::vector<double> values = {value};
  for (const Curve* other : others) {
    if (BracketOf(other->trial_number) != bracket) continue;
    if (auto v = ValueAt(*other, rung)) values.push_back(*v);
  }
  int64_t eta = std::max<int64_t>(options_.reduction_factor, 2);
  size_t keep = std::max<size_t>(1, values.size() / static_cast<size_t>(eta));
  // Sort best first; the trial goes on when it is at least as good as the keep-th best.
  std::sort(values.begin(), values.end(),
            [direction](double a, double b) { return IsBetter(a, b, direction); });
  double threshold = values[keep - 1];
  if (!Bootstrapping(values.size()) && !IsBetter(threshold, value, direction)) return {};
  return Verdict(rung_index, rung, value, threshold, keep, values.size());
}

StopDecision AshaStopper::Observe(const Curve& trial, Direction direction) {
  std::optional<std::pair<size_t, int64_t>> crossed = CrossedRung(trial);
  if (!crossed) return {};
  auto [rung_index, rung] = *crossed;
  double value = trial.points.back().second;
  RungValues& r = rungs_[{BracketOf(trial.trial_number), rung}];
  bool min = direction == Direction::kMinimize;
  // The worst of the top values, and the best of the rest, per direction.
  auto worst_top = [&] { return min ? std::prev(r.top.end()) : r.top.begin(); };
  auto best_rest = [&] { return min ? r.rest.begin() : std::prev(r.rest.end()); };
  if (!r.top.empty() && IsBetter(value, *worst_top(), direction))
    r.top.insert(value);
  else
    r.rest.insert(value);
  size_t n = r.top.size() + r.rest.size();
  int64_t eta = std::max<int64_t>(options_.reduction_factor, 2);
  size_t keep = std::max<size_t>(1, n / static_cast<size_t>(eta));
  while (r.top.size() > keep) {
    auto it = worst_top();
    r.rest.insert(*it);
    r.top.erase(it);
  }
  while (r.top.size() < keep && !r.rest.empty()) {
    auto it = best_rest();
    r.top.insert(*it);
    r.rest.erase(it);
  }
  double threshold = *worst_top();
  if (!Bootstrapping(n) && !IsBetter(threshold, value, direction)) return {};
  return Verdict(rung_index, rung, value, threshold, keep, n);
}

}  // namespace hpo::algorithms
