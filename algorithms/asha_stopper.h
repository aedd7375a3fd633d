#pragma once
// AshaStopper: asynchronous successive halving (Li et al., 2020), and Hyperband as brackets of it.
//
// Rungs sit at steps r_k = min_resource * eta^k below max_resource. When a trial's report first
// reaches a rung, its value there is compared with the values every trial of its bracket had
// when it reached the same rung (finished trials included): it goes on only if it is among the
// best max(1, floor(n / eta)) of those n values, ties counting in its favour. No trial waits for
// others (asynchronous); early arrivals at a rung are judged against the few values there are —
// unless `bootstrap` = N > 0: then a rung lets no trial go on until more than N trials reached
// it (Optuna's bootstrap_count), so the first, mostly random trials do not run long.
//
// State: none for Decide. A trial's value at a rung is read off its curve (its first point at or
// past the rung), so Decide is a pure function of the curves and a restarted daemon decides
// alike. Observe (incremental) keeps, per bracket and rung, the values recorded there split into
// the best max(1, floor(n / eta)) and the rest (two ordered multisets), so that a decision costs
// O(log n) instead of a pass over every trial; it decides exactly as Decide does.
//
// Hyperband: with `brackets` = B > 1, trial n belongs to bracket n mod B, whose min_resource is
// min_resource * eta^bracket; trials are compared only within their bracket.
//
// Rungs that predict (`min_correlation` = c > 0): early values of some models say little of
// their end (a slow starter is the best at the end). A rung then stops a trial only when the
// trials that reached max_resource (any bracket; at least max(5, bootstrap) of them) show a
// Spearman rank correlation between their values at that rung and at their last step that is
// at least c even less one standard error (Fisher's z; SureCorrelation): over few trials a high
// correlation may be chance — it takes 0.86 to count as 0.5 over 5 trials, 0.74 over 10, 0.67
// over 20. A rung short of that lets every trial go on, and so does one not measured yet —
// unless `unmeasured_stop`: then it stops trials as ASHA does until shown not to predict. Once
// a rung stops trials, only those it ranks well reach max_resource, and their ends tend to bear
// it out whatever it predicts: a rung turned on by the luck of the first few trials would stay
// on, which is what the margin guards against.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "algorithms/stopper.h"

namespace hpo::algorithms {

struct AshaOptions {
  int64_t min_resource = 1;  // first rung (the grace period)
  int64_t max_resource = 0;  // no rung at or past it (0: unbounded)
  int64_t reduction_factor = 3;
  int brackets = 1;            // 1: ASHA; > 1: Hyperband
  int64_t bootstrap = 0;       // a rung stops every trial until more than this many reached it
  double min_correlation = 0;  // a rung stops trials only while it predicts this well (above)
  // With min_correlation: what a rung does before its correlation is measured (fewer than
  // max(5, bootstrap) trials reached max_resource): stop trials as ASHA does (true), or let
  // every trial through (false).
  bool unmeasured_stop = false;
};

class AshaStopper final : public Stopper {
 public:
  explicit AshaStopper(const AshaOptions& options) : options_(options) {}
  std::string Name() const override { return options_.brackets > 1 ? "hyperband" : "asha"; }
  StopDecision Observe(const Curve& trial, Direction direction) override;
  // The pure form: the decision for `trial` (its last point new) given every other trial's
  // curve, finished or not. Observe decides exactly alike; the tests hold it to this.
  StopDecision Decide(const Curve& trial, const std::vector<const Curve*>& others,
                      Direction direction) const;

  // The rung steps of a bracket, ascending.
  std::vector<int64_t> Rungs(int bracket) const;
  int BracketOf(int64_t trial_number) const;
  // The rung (index, step) the trial's last point crossed (previous step < rung <= step).
  std::optional<std::pair<size_t, int64_t>> CrossedRung(const Curve& trial) const;
  // With min_correlation, in words, each rung's rank correlation with max_resource so far and
  // whether it stops trials ("step 1: 0.12 over 7 trials (at least -0.39), off; ..."); empty
  // otherwise.
  std::string RungStates() const;
  // The rank correlation r over n trials less one standard error (Fisher's z): what a rung's
  // correlation is at least, short of bad luck in which trials got to max_resource. A rung
  // stops trials only while this is at least min_correlation.
  static double SureCorrelation(double r, size_t n);

 private:
  StopDecision Verdict(size_t rung_index, int64_t rung, double value, double threshold, size_t keep,
                       size_t n) const;
  // Whether a rung with n values (the trial's included) still stops every trial.
  bool Bootstrapping(size_t n) const { return static_cast<int64_t>(n) <= options_.bootstrap; }
  struct RungValues {
    std::multiset<double> top, rest;  // the best max(1, n / eta) values, and the others
  };
  // Whether a rung at `rung` may stop a trial (min_correlation), and the reason's words for it.
  // `ended`: the trials that reached max_resource, as (value at each rung step, last value).
  struct Ended {
    std::map<int64_t, double> at;  // rung step -> the value there
    double last = 0;
  };
  std::pair<bool, std::string> Predicts(int64_t rung, const std::map<int64_t, Ended>& ended) const;
  // The rank correlation at `rung` and the number of trials it is over; nullopt while fewer
  // than max(5, bootstrap) trials reached max_resource with a value there.
  std::optional<std::pair<double, size_t>> Correlation(int64_t rung,
                                                       const std::map<int64_t, Ended>& ended) const;
  // The trial's record once it reached max_resource, or nullopt.
  std::optional<Ended> EndedOf(const Curve& trial) const;
  // Correlation over ended_, kept per rung until another trial reaches max_resource (Observe
  // asks at every rung a trial would be stopped at, and RungStates at every change of the
  // sweep's trials: recomputing each time ranked every ended trial again).
  std::optional<std::pair<double, size_t>> EndedCorrelation(int64_t rung) const;
  AshaOptions options_;
  std::map<std::pair<int, int64_t>, RungValues> rungs_;  // (bracket, rung step) -> values
  std::map<int64_t, Ended> ended_;                       // trial number -> its record
  mutable std::map<int64_t, std::optional<std::pair<double, size_t>>> correlations_;
  mutable size_t correlations_of_ = 0;  // ended_.size() when correlations_ was filled
};

}  // namespace hpo::algorithms
