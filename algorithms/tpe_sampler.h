#pragma once
// TpeSampler: the tree-structured Parzen estimator (Bergstra et al., 2011).
//
// After `startup_trials` random draws, the known trials are split into the best
// gamma(n) = min(ceil(0.1 n), 25) ("good") and the rest ("bad"). Two densities are fitted — l(x)
// on the good configurations, g(x) on the bad ones — and `candidates` draws from l are scored by
// log l(x) - log g(x); the best is proposed. Multivariate (the default): one joint density, a
// kernel per trial over all parameters (Scott's-rule widths); univariate: one density per
// parameter, its kernel width the gap to the neighbouring observations. Numeric parameters are
// modelled in log space for log parameters; categoricals with smoothed counts / kernels.
//
// Which trials, ranked how: up to 1,000 trials, all of them; past that the 900 most recent and
// the 100 best of the others (Modelled), so that a suggestion costs the same at 1,000 trials as at
// 100,000. When the history carries curves (the sweep has a stopper), every
// trial that has reported, running or not, compared at the furthest step at least half of them
// reached; else the finished trials by their objective.
//
// Several objectives or constraints (multi-objective TPE, Ozaki et al., 2020): the trials are
// ranked by constrained non-dominated sorting — with curves (a stopper), every trial that has
// reported, compared at the furthest step at least half of them reached, as above; without, the
// trials that ran to their end. The good ones are the first gamma(n), and where that cut goes
// through a front, the members of that front that add the most hypervolume come first (greedy
// hypervolume subset selection, the reference point 10% past the worst value of each
// objective). Trials that ended short of the step (or were stopped early) follow, those that got
// furthest first.
//
// A trial whose curve repeats an earlier trial's — the very same value at each of its first three
// steps — ran a configuration the sweep has run already, as far as the objective can tell (a
// deterministic trainer that maps nearby values to one model: a rounded parameter, a fraction of
// a few features). It is ranked after every other trial, among the bad ones: it tells nothing
// new, and counted as good it would draw the search back to the same place again and again.
//
// In a space of finitely many configurations (every parameter categorical, int or stepped),
// multivariate TPE passes over draws that are configurations among the modelled trials, while
// fresh ones turn up among up to 10x `candidates` draws: a repeat would tell it nothing.
//
// Deterministic in (seed, trial number, history); no state.

#include "algorithms/sampler.h"

namespace hpo::algorithms {

struct TpeOptions {
  int startup_trials = 10;
  int candidates = 24;
  bool multivariate = true;  // one joint density over all parameters instead of one per parameter
};

class TpeSampler final : public Sampler {
 public:
  explicit TpeSampler(const TpeOptions& options) : options_(options) {}
  std::string Name() const override { return "tpe"; }
  [[nodiscard]] absl::StatusOr<std::optional<Params>> Suggest(
      const SuggestRequest& req) const override;
  std::optional<int64_t> MaxTrials(const SearchSpace&) const override { return std::nullopt; }
  // How many trials the model would learn from for this request (below startup_trials: the
  // suggestion is a random draw).
  static size_t Learned(const SuggestRequest& req) {
    std::vector<const HistoryEntry*> among = Modelled(req);
    if (req.MultiObjective()) {
      MultiKnown known = MultiKnownTrials(req, among);
      return known.entries.size() + known.behind.size();
    }
    return Ranked(req, among).size();
  }
  // Whether Learned(req) >= k, mostly from the last few trials (cheap in a long sweep).
  static bool ModelsAtLeast(const SuggestRequest& req, size_t k);
  // At most this many trials are modelled (see Modelled).
  static constexpr size_t kRecent = 900, kBestEarlier = 100;
  // The trials the model is fitted on, in history order: all of them up to kRecent +
  // kBestEarlier; past that, the kRecent most recent and the kBestEarlier best of the others
  // (by their final objective; with several objectives, the best by each in turn, feasible
  // first), so that a suggestion's cost stays bounded however long the sweep.
  static std::vector<const HistoryEntry*> Modelled(const SuggestRequest& req);
  const TpeOptions& options() const { return options_; }

 private:
  // The trials the model learns from, best first (see above).
  static std::vector<const HistoryEntry*> Ranked(const SuggestRequest& req,
                                                 const std::vector<const HistoryEntry*>& among);
  static std::vector<const HistoryEntry*> MultiRanked(
      const SuggestRequest& req, const std::vector<const HistoryEntry*>& among);
  // The trials MultiRanked ranks, unranked: those compared at one step (or that ran to their
  // end), their points, and those that ended short of it.
  struct MultiKnown {
    std::vector<const HistoryEntry*> entries, behind;
    Points points;
  };
  static MultiKnown MultiKnownTrials(const SuggestRequest& req,
                                     const std::vector<const HistoryEntry*>& among);
  // `ranked` with the trials that repeat an earlier one's curve (see above) moved to its end.
  static std::vector<const HistoryEntry*> RepeatsLast(std::vector<const HistoryEntry*> ranked);
  // How many of n ranked trials are the good ones.
  static size_t Good(size_t n);
  TpeOptions options_;
};

}  // namespace hpo::algorithms
