#pragma once
// MoAshaStopper: multi-objective asynchronous successive halving (Schmucker et al., 2021,
// arXiv 2106.12639), and Hyperband's brackets of it.
//
// The rungs and brackets are ASHA's (asha_stopper.h). When a trial's report first reaches a
// rung, its objective vector there is ranked with the vectors every trial of its bracket had at
// that rung: by non-dominated sorting (constrained: a point that misses the sweep's constraints
// ranks after every one that meets them), and within the front that straddles the cut by the
// ε-net order (farthest-first in objective space scaled by the rung's ranges, seeded by the best
// value of the first objective), which keeps a spread of trade-offs rather than a cluster. The
// trial goes on only if it is among the first max(1, floor(n / eta)) of the n ranked; as in
// ASHA, `bootstrap` = N > 0 lets none go on at a rung until more than N reached it. A vector
// already at the rung, the very same in every value (a configuration run again, as far as the
// objectives tell), counts once and is judged as the first was: copies of one good
// configuration would otherwise fill the first third and stop every other configuration there.
// Vectors of several measured values alike by chance are rare, so distinct configurations are
// not merged in practice; one value alone (ASHA's) often ties by chance and is not merged.
//
// State: Observe keeps, per bracket and rung, the distinct vectors recorded there; a decision ranks
// them (O(n log n) for two objectives, plus the ε-net of one front). Decide is the same rule read
// off every curve, for the tests. Curves carry their points' vectors (Curve::vectors); a curve
// without them is never stopped.

#include <map>
#include <vector>

#include "algorithms/asha_stopper.h"
#include "algorithms/pareto.h"

namespace hpo::algorithms {

class MoAshaStopper final : public Stopper {
 public:
  MoAshaStopper(const AshaOptions& options, std::vector<Direction> directions)
      : options_(options), rungs_of_(options), directions_(std::move(directions)) {}
  std::string Name() const override {
    return options_.brackets > 1 ? "multi-objective hyperband" : "multi-objective asha";
  }
  StopDecision Observe(const Curve& trial, Direction direction) override;
  // The pure form: the decision for `trial` (its last point new) given every other curve.
  StopDecision Decide(const Curve& trial, const std::vector<const Curve*>& others) const;

 private:
  // The verdict for the point `target` of the rung's points.
  StopDecision Rank(const Points& at_rung, size_t target, size_t rung_index, int64_t rung) const;
  // Adds the vector v (k values and the violation) to the rung's points unless the very same is
  // there already; its index either way.
  size_t AddDistinct(Points& at, std::span<const double> v) const;
  // The vector of `c`'s point `index` (k values and the violation).
  std::span<const double> VectorOf(const Curve& c, size_t index) const;
  size_t width() const { return directions_.size() + 1; }

  AshaOptions options_;
  AshaStopper rungs_of_;  // the rungs and brackets
  std::vector<Direction> directions_;
  std::map<std::pair<int, int64_t>, Points> rungs_;  // (bracket, rung step) -> the vectors
};

}  // namespace hpo::algorithms
