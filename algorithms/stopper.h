#pragma once
// Stopper: decides, when a trial reports, whether it should go on.
//
// Pure: the decision depends only on the trial's curve and the other trials' curves, which the
// controller rebuilds from the store. Implementations are thread-compatible.

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
};

enum class Decision { kContinue, kStop };

struct StopDecision {
  Decision decision = Decision::kContinue;
  std::string reason;  // why, for the trial's message when it stops
};

// Stopper settings from the sweep file (`early_stopping:` section).
struct StopperSpec {
  std::string name = "none";      // none | asha | hyperband | median
  int64_t min_resource = 1;       // asha/hyperband: first rung (step)
  int64_t max_resource = 0;       // asha/hyperband: no rung at or past it; 0: unbounded
  int64_t reduction_factor = 3;   // asha/hyperband: eta
  int brackets = 3;               // hyperband
  int64_t grace_steps = 1;        // median
  int min_trials = 3;             // median
  int64_t bootstrap = 0;          // asha/hyperband: no trial goes on at a rung until more than this many reached it
};

class Stopper {
 public:
  virtual ~Stopper() = default;
  virtual std::string Name() const = 0;
  // Called after `trial` received a new point (its last one). `others` are every other trial of
  // the sweep, finished or not.
  virtual StopDecision Decide(const Curve& trial, const std::vector<const Curve*>& others,
                              Direction direction) const = 0;
  // The incremental form, for sweeps of many trials, where handing every curve to each decision
  // would cost O(trials) per report. A stopper that supports it keeps its own records: Observe
  // is told of each new point of every trial, in report order, and decides alike from those
  // records alone. A restarted daemon replays every stored curve through it. (Stateful: not
  // thread-safe.)
  virtual bool Incremental() const { return false; }
  virtual StopDecision Observe(const Curve& trial, Direction direction) { return Decide(trial, {}, direction); }
};

// Never stops a trial.
class NoStopper final : public Stopper {
 public:
  std::string Name() const override { return "none"; }
  StopDecision Decide(const Curve&, const std::vector<const Curve*>&, Direction) const override {
    return {};
  }
};

// INVALID_ARGUMENT for an unknown name or impossible settings.
absl::StatusOr<std::unique_ptr<Stopper>> MakeStopper(const StopperSpec& spec);
const std::vector<std::string>& StopperNames();

}  // namespace hpo::algorithms
