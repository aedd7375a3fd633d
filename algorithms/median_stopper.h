#pragma once
// MedianStopper: the median stopping rule (Golovin et al., 2017). After `grace_steps`, a trial
// stops when its best value so far is worse than the median of the other trials' best values up
// to the same step, once at least `min_trials` others reached that step.
//
// Decide is the rule as a pure function of every curve: O(points of the sweep) per report.
// Observe (incremental) decides exactly alike from the stopper's own records, in O(log trials)
// per report while trials report steps that only grow:
// - per trial, its points with the best value so far at each (to read its best up to any step);
// - per step S that some trial reported, an order-statistics tree of the best value up to S of
//   every trial that got at least that far. A report at step t by a trial whose last step was p
//   enters the trees of the steps in (p, t]; a step seen for the first time gets its tree from
//   one pass over the trials. The median of the others is two rank lookups.
// A trial that reports a step not past its last, or step values so scattered that the trees
// would hold more than a few entries per point, switch the stopper to Decide over the curves
// it keeps (exact; the cost of the pure form) for the rest of the sweep.

#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>

#include "algorithms/stopper.h"

namespace hpo::algorithms {

struct MedianOptions {
  int64_t grace_steps = 1;
  int min_trials = 3;
};

class MedianStopper final : public Stopper {
 public:
  explicit MedianStopper(const MedianOptions& options) : options_(options) {}
  std::string Name() const override { return "median"; }
  StopDecision Observe(const Curve& trial, Direction direction) override;
  // The pure form: the decision for `trial` (its last point new) given every other trial's
  // curve, finished or not. Observe decides exactly alike; the tests hold it to this.
  StopDecision Decide(const Curve& trial, const std::vector<const Curve*>& others,
                      Direction direction) const;

  // Whether Observe gave up the trees for the pure form (exposed for tests).
  bool FellBackForTest() const { return fallback_; }

 private:
  struct TrialRecord {
    std::vector<std::pair<int64_t, double>> points;  // (step, value), report order
    std::vector<double> best;                        // best value up to and including each point
  };
  // (best value up to the step, trial number): unique keys, ranked by value.
  using Ranked = __gnu_pbds::tree<std::pair<double, int64_t>, __gnu_pbds::null_type,
                                  std::less<std::pair<double, int64_t>>, __gnu_pbds::rb_tree_tag,
                                  __gnu_pbds::tree_order_statistics_node_update>;

  // Adds one point to a trial's record and the trees; false when the trees no longer apply.
  bool Record(int64_t number, int64_t step, double value, Direction direction);
  // The trial's best value up to `step` (its points are in step order), or nullopt.
  static std::optional<double> RecordBestUpTo(const TrialRecord& r, int64_t step);
  StopDecision Verdict(int64_t step, double mine, double median, size_t n,
                       Direction direction) const;
  void FallBack();

  MedianOptions options_;
  std::unordered_map<int64_t, TrialRecord> trials_;
  std::map<int64_t, Ranked> steps_;
  size_t entries_ = 0;  // in all trees
  size_t points_ = 0;   // in all records
  bool fallback_ = false;
};

}  // namespace hpo::algorithms
