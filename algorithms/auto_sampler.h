#pragma once
// AutoSampler: `algorithm: auto`, the default. It chooses a sampler and its settings from what
// the sweep file says — the parameters (their types and how many values they take), the number
// of objectives and constraints, budget.max_trials and budget.max_concurrent — and runs it:
//
//   1. Every parameter takes finitely many values and all N configurations fit in
//      budget.max_trials: grid, every value of every parameter, in a seeded random order (each
//      configuration runs once; none is drawn twice, as a model or random search would).
//   2. budget.max_trials is at most TPE's start-up trials (10), or the sweep runs them all at
//      once (budget.max_concurrent >= max_trials): random search, since no result comes back
//      in time for a model to use it.
//   3. Otherwise TPE (tpe_sampler.h), multivariate, 10 start-up trials — multi-objective TPE for
//      several objectives or constraints. It leads or ties on Hartmann-6, the digits table and
//      the multi-objective problems of hpod's benchmarks (docs/benchmarks.md, "Search
//      quality"), at one worker and at eight; on the loosely predictive forest table it stops
//      improving early.
//
// As the sweep goes, what runs changes with what it has seen: TPE draws at random until 10
// trials have reported (with early stopping: reported at all; without, finished), then models.
// Choice() says which, and why. Deterministic: a pure function of the file and the history, so
// a restarted daemon chooses alike.

#include <memory>
#include <string>

#include "algorithms/sampler.h"

namespace hpo::algorithms {

struct AutoChoice {
  AlgorithmSpec spec;  // the sampler chosen and its settings
  std::string why;     // in words
};

// The choice for a sweep (AlgorithmSpec::max_trials and ::concurrency say what it needs of the
// budget); `pareto`: several objectives or constraints.
AutoChoice ChooseSampler(const AlgorithmSpec& given, const SearchSpace& space, bool pareto);

class AutoSampler final : public Sampler {
 public:
  AutoSampler(AutoChoice choice, std::unique_ptr<Sampler> chosen)
      : choice_(std::move(choice)), chosen_(std::move(chosen)) {}
  std::string Name() const override { return "auto"; }
  [[nodiscard]] absl::StatusOr<std::optional<Params>> Suggest(
      const SuggestRequest& req) const override {
    return chosen_->Suggest(req);
  }
  std::optional<int64_t> MaxTrials(const SearchSpace& space) const override {
    return chosen_->MaxTrials(space);
  }
  bool ReadsHistory() const override { return chosen_->ReadsHistory(); }
  std::string Choice(const SuggestRequest& req) const override;
  const AutoChoice& choice() const { return choice_; }

 private:
  AutoChoice choice_;
  std::unique_ptr<Sampler> chosen_;
};

}  // namespace hpo::algorithms
