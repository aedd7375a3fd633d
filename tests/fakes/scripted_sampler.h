#pragma once
// ScriptedSampler: a Sampler that proposes what its script says, in order: given parameters,
// an error, or nothing more (exhausted). Past the script's end it has nothing more.

#include <variant>
#include <vector>

#include "algorithms/sampler.h"

namespace hpo::fakes {

class ScriptedSampler final : public algorithms::Sampler {
 public:
  // One suggestion: the parameters, or the error Suggest returns.
  using Step = std::variant<algorithms::Params, absl::Status>;
  explicit ScriptedSampler(std::vector<Step> script) : script_(std::move(script)) {}

  std::string Name() const override { return "scripted"; }
  // Trial number n gets script[n].
  [[nodiscard]] absl::StatusOr<std::optional<algorithms::Params>> Suggest(
      const algorithms::SuggestRequest& req) const override;
  std::optional<int64_t> MaxTrials(const algorithms::SearchSpace&) const override {
    return static_cast<int64_t>(script_.size());
  }
  int calls() const { return calls_; }

 private:
  std::vector<Step> script_;
  mutable int calls_ = 0;
};

}  // namespace hpo::fakes
