#pragma once
// Stopper: decides, when a trial reports, whether it should go on.
//
// A stopper's decisions depend only on the curves it was told of (Observe), which the
// controller rebuilds from the store; each implementation also has a pure form (Decide over
// every curve, the rule as written) that its tests hold the incremental one to.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/search_space.h"

namespace hpo::algorithms {

// A trial's objective metric over its steps, in report order. A view: the caller owns the
// points and keeps them alive for the call.
struct Curve {
  int64_t trial_number = 0;
  std::span<const std::pair<int64_t, double>> points;  // (step, value)
  bool finished = false;
  // Pareto ranking (several objectives, or constraints): for each point, the value of every
  // objective in the sweep's order, then the point's constraint violation (0: met): k + 1 values
  // a point. Empty otherwise.
  std::span<const double> vectors = {};
};

enum class Decision { kContinue, kStop };

struct StopDecision {
  Decision decision = Decision::kContinue;
  std::string reason;  // why, for the trial's message when it stops
};

// Stopper settings from the sweep file (`early_stopping:` section).
struct StopperSpec {
  std::string name = "auto";     // auto (auto_stopper.h) | none | asha | hyperband | median
  int64_t min_resource = 1;      // asha/hyperband: first rung (step)
  int64_t max_resource = 0;      // asha/hyperband: no rung at or past it; 0: unbounded
  int64_t reduction_factor = 3;  // asha/hyperband: eta
  int brackets = 3;              // hyperband
  int64_t grace_steps = 1;       // median
  int min_trials = 3;            // median
  int64_t bootstrap =
      0;  // asha/hyperband: no trial goes on at a rung until more than this many reached it
  // asha/hyperband: a rung stops trials only while the trials that reached max_resource show at
  // least this rank correlation between their values there and at their end; 0: always.
  double min_correlation = 0;
  // asha/hyperband with min_correlation: a rung not measured yet stops trials as ASHA does
  // (true, `unmeasured: stop`) or lets every trial through (false, `unmeasured: pass`).
  bool unmeasured_stop = false;
  // auto: how many steps a trial reports when nothing stops it, when the file says (the parser
  // fills it in from plan.steps or budget.max_trial_steps, and `steps_from` with which); 0:
  // learned from the first trial that completes.
  int64_t steps = 0;
  std::string steps_from = {};
  // auto: set when the sampler decides itself how far each trial trains (pbt): then no early
  // stopping, for this reason.
  std::string none_because = {};
};

class Stopper {
 public:
  virtual ~Stopper() = default;
  virtual std::string Name() const = 0;
  // Told of each new point of every trial of the sweep, in report order (also of a trial already
  // told to stop: its values count for the others), the stopper decides whether `trial`, whose
  // last point is the new one, goes on. It keeps its own records of what it was told, so a
  // decision does not look at every curve; a restarted daemon replays every stored curve through
  // it, trial by trial. Stateful: not thread-safe.
  virtual StopDecision Observe(const Curve& trial, Direction direction) = 0;
  // A trial ended; `completed`: it ran to its own end (not stopped, failed or lost). Its points
  // were told before. A restarted daemon tells of every ended trial again, in the order they
  // ended, once it replayed the curves.
  virtual void Ended(const Curve& /*trial*/, bool /*completed*/) {}
  // What it does at this point of the sweep, and why, in words, for a stopper that chooses
  // (auto); empty for one that does one thing.
  virtual std::string Choice() const { return ""; }
};

// Never stops a trial.
class NoStopper final : public Stopper {
 public:
  std::string Name() const override { return "none"; }
  StopDecision Observe(const Curve&, Direction) override { return {}; }
};

// INVALID_ARGUMENT for an unknown name or impossible settings. With `directions` (one per
// objective: the sweep ranks trials by constrained Pareto dominance) asha and hyperband are
// multi-objective ASHA; median refuses.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Stopper>> MakeStopper(
    const StopperSpec& spec, const std::vector<Direction>& directions = {});
const std::vector<std::string>& StopperNames();

}  // namespace hpo::algorithms
