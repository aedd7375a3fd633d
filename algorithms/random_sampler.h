#pragma once
// RandomSampler: independent uniform draws per parameter (log-uniform for log parameters,
// on the step lattice when a step is given). Trial n's draw depends only on (seed, n).

#include "algorithms/rng.h"
#include "algorithms/sampler.h"

namespace hpo::algorithms {

class RandomSampler final : public Sampler {
 public:
  std::string Name() const override { return "random"; }
  bool ReadsHistory() const override { return false; }
  [[nodiscard]] absl::StatusOr<std::optional<Params>> Suggest(
      const SuggestRequest& req) const override;
  std::optional<int64_t> MaxTrials(const SearchSpace&) const override { return std::nullopt; }

  // One draw of one parameter; exposed for samplers that build on random draws.
  static ParamValue Draw(const ParamDef& p, Rng& rng);
};

}  // namespace hpo::algorithms
