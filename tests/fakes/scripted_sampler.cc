#include "tests/fakes/scripted_sampler.h"

namespace hpo::fakes {

absl::StatusOr<std::optional<algorithms::Params>> ScriptedSampler::Suggest(
    const algorithms::SuggestRequest& req) const {
  ++calls_;
  if (req.trial_number < 0 || req.trial_number >= static_cast<int64_t>(script_.size())) {
    return std::optional<algorithms::Params>();
  }
  const Step& step = script_[static_cast<size_t>(req.trial_number)];
  if (const absl::Status* error = std::get_if<absl::Status>(&step)) return *error;
  return std::optional<algorithms::Params>(std::get<algorithms::Params>(step));
}

}  // namespace hpo::fakes
