#include "algorithms/median_stopper.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"

namespace hpo::algorithms {
namespace {

// Best (per direction) value among the curve's points before the first one past `step`.
std::optional<double> BestUpTo(const Curve& c, int64_t step, Direction d) {
  std::optional<double> best;
  for (const auto& [s, v] : c.points) {
    if (s > step) break;
    if (!best || IsBetter(v, *best, d)) best = v;
  }
  return best;
}

}  // namespace

StopDecision MedianStopper::Verdict(int64_t step, double mine, double median, size_t n,
                                    Direction direction) const {
  if (!IsBetter(median, mine, direction)) return {};
  return {Decision::kStop,
          absl::StrFormat("median: best %g by step %d is worse than the median %g of %d trials",
                          mine, step, median, n)};
}

StopDecision MedianStopper::Decide(const Curve& trial, const std::vector<const Curve*>& others,
                                   Direction direction) const {
  if (trial.points.empty()) return {};
  int64_t step = trial.points.back().first;
  if (step < options_.grace_steps) return {};
  std::vector<double> bests;
  for (const Curve* other : others) {
    // Only trials that got at least this far count.
    if (other->points.empty() || other->points.back().first < step) continue;
    if (auto b = BestUpTo(*other, step, direction)) bests.push_back(*b);
  }
  if (static_cast<int>(bests.size()) < options_.min_trials) return {};
  std::sort(bests.begin(), bests.end());
  size_t n = bests.size();
  double median = n % 2 == 1 ? bests[n / 2] : (bests[n / 2 - 1] + bests[n / 2]) / 2;
  return Verdict(step, *BestUpTo(trial, step, direction), median, n, direction);
}

std::optional<double> MedianStopper::RecordBestUpTo(const TrialRecord& r, int64_t step) {
  auto past =
      std::upper_bound(r.points.begin(), r.points.end(), step,
                       [](int64_t s, const std::pair<int64_t, double>& p) { return s < p.first; });
  if (past == r.points.begin()) return std::nullopt;
  return r.best[static_cast<size_t>(past - r.points.begin()) - 1];
}

void MedianStopper::FallBack() {
  fallback_ = true;
  steps_.clear();
  entries_ = 0;
}

bool MedianStopper::Record(int64_t number, int64_t step, double value, Direction direction) {
  TrialRecord& r = trials_[number];
  std::optional<double> before;
  int64_t last = std::numeric_limits<int64_t>::min();
  if (!r.points.empty()) {
    before = r.best.back();
    last = r.points.back().first;
  }
  r.points.emplace_back(step, value);
  r.best.push_back(before && !IsBetter(value, *before, direction) ? *before : value);
  ++points_;
  if (fallback_) return false;
  if (before && step <= last) {  // not past its last step: the trees cannot follow
    FallBack();
    return false;
  }
  bool seen = steps_.count(step) > 0;
  // The trial now got as far as every step in (last, step]: up to those below `step` its best is
  // what it was before this point (if it had any), up to `step` it is the new best.
  for (auto it = before ? steps_.upper_bound(last) : steps_.lower_bound(step);
       it != steps_.end() && it->first <= step; ++it) {
    if (it->first == step) {
      it->second.insert({r.best.back(), number});
      ++entries_;
    } else if (before) {
      it->second.insert({*before, number});
      ++entries_;
    }
  }
  if (!seen) {  // a new step: every trial that got this far, this one included
    Ranked& tree = steps_[step];
    for (const auto& [n, t] : trials_) {
      if (t.points.empty() || t.points.back().first < step) continue;
      if (std::optional<double> b = RecordBestUpTo(t, step)) {
        tree.insert({*b, n});
        ++entries_;
      }
    }
  }
  // Step values that trials do not share would make a tree per report, each of every trial.
  if (entries_ > 8 * points_ + 4096) {
    FallBack();
    return false;
  }
  return true;
}

StopDecision MedianStopper::Observe(const Curve& trial, Direction direction) {
  if (trial.points.empty()) return {};
  int64_t number = trial.trial_number;
  // Record the points not seen yet (normally the last one).
  for (size_t k = trials_[number].points.size(); k < trial.points.size(); ++k) {
    Record(number, trial.points[k].first, trial.points[k].second, direction);
  }
  int64_t step = trial.points.back().first;
  if (step < options_.grace_steps) return {};
  if (fallback_) {
    std::vector<Curve> curves;
    curves.reserve(trials_.size());
    for (const auto& [n, t] : trials_) {
      if (n != number) curves.push_back({n, {t.points.data(), t.points.size()}, false, {}});
    }
    std::vector<const Curve*> others;
    for (const Curve& c : curves) others.push_back(&c);
    return Decide(trial, others, direction);
  }
  const Ranked& tree = steps_.at(step);
  double mine = trials_.at(number).best.back();
  size_t n = tree.size() - 1;  // the others: the tree holds this trial too
  if (static_cast<int>(n) < options_.min_trials) return {};
  size_t self = tree.order_of_key({mine, number});
  auto nth = [&](size_t k) { return tree.find_by_order(k < self ? k : k + 1)->first; };
  double median = n % 2 == 1 ? nth(n / 2) : (nth(n / 2 - 1) + nth(n / 2)) / 2;
  return Verdict(step, mine, median, n, direction);
}

}  // namespace hpo::algorithms
