#include "algorithms/asha_stopper.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace hpo::algorithms {
namespace {

// The value of the curve's first point at or past `step`, or nullopt.
std::optional<double> ValueAt(const Curve& c, int64_t step) {
  for (const auto& [s, v] : c.points) {
    if (s >= step) return v;
  }
  return std::nullopt;
}

// Ranks of `v` (1-based, ties share their average rank).
std::vector<double> Ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  for (size_t i = 0; i < v.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> ranks(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = 0.5 * static_cast<double>(i + j) + 1;
    i = j + 1;
  }
  return ranks;
}

// Spearman's rank correlation of x and y (the Pearson correlation of their ranks); 0 when either
// has no spread.
double Spearman(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<double> rx = Ranks(x), ry = Ranks(y);
  const double n = static_cast<double>(x.size());
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) mx += rx[i], my += ry[i];
  mx /= n;
  my /= n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0;
}

}  // namespace

double AshaStopper::SureCorrelation(double r, size_t n) {
  // Fisher's z of Spearman's r has a standard error of about 1.06 / sqrt(n - 3).
  double z = std::atanh(std::clamp(r, -0.9999, 0.9999)) -
             1.06 / std::sqrt(std::max(static_cast<double>(n) - 3, 1.0));
  return std::tanh(z);
}

std::optional<AshaStopper::Ended> AshaStopper::EndedOf(const Curve& trial) const {
  if (options_.min_correlation <= 0 || options_.max_resource <= 0 || trial.points.empty() ||
      trial.points.back().first < options_.max_resource) {
    return std::nullopt;
  }
  Ended e;
  e.last = *ValueAt(trial, options_.max_resource);
  for (int b = 0; b < std::max(options_.brackets, 1); ++b) {
    for (int64_t rung : Rungs(b)) {
      if (auto v = ValueAt(trial, rung)) e.at[rung] = *v;
    }
  }
  return e;
}

std::optional<std::pair<double, size_t>> AshaStopper::Correlation(
    int64_t rung, const std::map<int64_t, Ended>& ended) const {
  const size_t need = static_cast<size_t>(std::max<int64_t>(5, options_.bootstrap));
  std::vector<double> at, last;
  for (const auto& [number, e] : ended) {
    auto it = e.at.find(rung);
    if (it == e.at.end() || !std::isfinite(it->second) || !std::isfinite(e.last)) continue;
    at.push_back(it->second);
    last.push_back(e.last);
  }
  if (at.size() < need) return std::nullopt;
  return std::pair(Spearman(at, last), at.size());
}

std::optional<std::pair<double, size_t>> AshaStopper::EndedCorrelation(int64_t rung) const {
  if (correlations_of_ != ended_.size()) {
    correlations_.clear();
    correlations_of_ = ended_.size();
  }
  auto it = correlations_.find(rung);
  if (it == correlations_.end()) it = correlations_.emplace(rung, Correlation(rung, ended_)).first;
  return it->second;
}

std::pair<bool, std::string> AshaStopper::Predicts(int64_t rung,
                                                   const std::map<int64_t, Ended>& ended) const {
  std::optional<std::pair<double, size_t>> c =
      &ended == &ended_ ? EndedCorrelation(rung) : Correlation(rung, ended);
  if (!c && options_.unmeasured_stop) {
    return {true, absl::StrFormat(" (its rank correlation with step %d is not measured yet)",
                                  options_.max_resource)};
  }
  if (!c) return {false, ""};
  double sure = SureCorrelation(c->first, c->second);
  if (sure < options_.min_correlation) return {false, ""};
  return {true,
          absl::StrFormat(" (its rank correlation with step %d is %.2f over %d trials, at least "
                          "%.2f within one standard error)",
                          options_.max_resource, c->first, c->second, sure)};
}

std::string AshaStopper::RungStates() const {
  if (options_.min_correlation <= 0) return "";
  std::vector<std::string> parts;
  for (int64_t rung : Rungs(0)) {
    std::optional<std::pair<double, size_t>> c = EndedCorrelation(rung);
    if (!c) {
      parts.push_back(absl::StrFormat("step %d: not measured yet, %s", rung,
                                      options_.unmeasured_stop ? "on" : "off"));
      continue;
    }
    double sure = SureCorrelation(c->first, c->second);
    parts.push_back(absl::StrFormat("step %d: %.2f over %d trials (at least %.2f), %s", rung,
                                    c->first, c->second, sure,
                                    sure >= options_.min_correlation ? "on" : "off"));
  }
  return absl::StrJoin(parts, "; ");
}

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
  StopDecision d = Verdict(rung_index, rung, value, threshold, keep, values.size());
  if (options_.min_correlation > 0) {
    std::map<int64_t, Ended> ended;
    for (const Curve* c : others) {
      if (auto e = EndedOf(*c)) ended[c->trial_number] = *e;
    }
    if (auto e = EndedOf(trial)) ended[trial.trial_number] = *e;
    auto [predicts, why] = Predicts(rung, ended);
    if (!predicts) return {};
    d.reason += why;
  }
  return d;
}

StopDecision AshaStopper::Observe(const Curve& trial, Direction direction) {
  if (options_.min_correlation > 0 && !ended_.count(trial.trial_number)) {
    if (auto e = EndedOf(trial)) ended_[trial.trial_number] = *e;
  }
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
  StopDecision d = Verdict(rung_index, rung, value, threshold, keep, n);
  if (options_.min_correlation > 0) {
    auto [predicts, why] = Predicts(rung, ended_);
    if (!predicts) return {};
    d.reason += why;
  }
  return d;
}

}  // namespace hpo::algorithms
