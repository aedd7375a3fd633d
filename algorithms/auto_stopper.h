#pragma once
// AutoStopper: `early_stopping: auto`, the default. It chooses the early stopping rule and its
// settings from how many steps a trial reports when nothing stops it (L) — from plan.steps or
// budget.max_trial_steps when the file says, else from the first trial that completes — and
// from what the sweep's trials show as they end:
//
//   - The sampler is pbt, which decides itself how far each member trains: no early stopping.
//   - L below 4: no early stopping (there is no room for a rung before the end).
//   - One objective: ASHA (asha_stopper.h) with rungs from step max(1, L / 81) growing by
//     η = 3 below L, max_resource L, and rungs that must predict (min_correlation 0.5): a rung
//     stops trials only once the trials that ran to step L (at least 5) show a rank correlation
//     between their values there and at L of at least 0.5 less one standard error. Where early
//     steps predict the end, ASHA stops the poor trials early; where they do not (a model that
//     starts slowly and ends best), that rung lets every trial through rather than stall the
//     search.
//   - Several objectives or constraints: multi-objective ASHA with the same rungs.
//
// Until L is known nothing is stopped, and the points it is told are kept to be told to the
// chosen stopper once it exists: its records are then those it would have had from the start,
// so a restarted daemon (which replays every curve, then the ended trials in the order they
// ended) decides alike. Choice() says what it chose, from where, and each rung's correlation.

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/stopper.h"

namespace hpo::algorithms {

class AutoStopper final : public Stopper {
 public:
  // `spec.steps` (and `spec.steps_from`): L when the file says; `directions`: one per
  // objective when trials are ranked by Pareto dominance, else empty.
  AutoStopper(const StopperSpec& spec, std::vector<Direction> directions);
  std::string Name() const override { return "auto"; }
  StopDecision Observe(const Curve& trial, Direction direction) override;
  void Ended(const Curve& trial, bool completed) override;
  std::string Choice() const override;

  // The rule for trials of `steps` steps, and why, in words.
  static std::pair<StopperSpec, std::string> For(int64_t steps, bool pareto);
  // The chosen stopper; null until L is known.
  const Stopper* chosen() const { return chosen_.get(); }

 private:
  void Choose(int64_t steps, std::string from);

  std::vector<Direction> directions_;
  Direction direction_ = Direction::kMinimize;  // as the points were told
  StopperSpec spec_;                            // the rule chosen (once L is known)
  std::string why_;
  std::string from_;  // where L came from
  std::unique_ptr<Stopper> chosen_;
  // Until L is known: each trial's points so far, and the order they were told in (trial,
  // how many of its points).
  struct Kept {
    std::vector<std::pair<int64_t, double>> points;
    std::vector<double> vectors;
  };
  std::map<int64_t, Kept> kept_;
  std::vector<std::pair<int64_t, size_t>> told_;
};

}  // namespace hpo::algorithms
