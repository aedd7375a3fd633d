#include "algorithms/random_sampler.h"

#include <algorithm>
#include <cmath>

namespace hpo::algorithms {

ParamValue RandomSampler::Draw(const ParamDef& p, Rng& rng) {
  switch (p.type) {
    case ParamType::kFixed:
      return p.value;
    case ParamType::kCategorical:
      return p.choices[rng.Below(p.choices.size())];
    case ParamType::kInt: {
      if (p.log) {
        double lo = std::log(p.low - 0.4999), hi = std::log(p.high + 0.4999);
        double x = std::round(std::exp(lo + rng.Uniform() * (hi - lo)));
        return static_cast<int64_t>(std::clamp(x, p.low, p.high));
      }
      int64_t n = *p.Cardinality();
      return static_cast<int64_t>(p.low) +
             static_cast<int64_t>(rng.Below(static_cast<uint64_t>(n))) *
                 static_cast<int64_t>(p.step.value_or(1));
    }
    case ParamType::kFloat: {
      if (p.step) {
        int64_t n = *p.Cardinality();
        double v = p.low + static_cast<double>(rng.Below(static_cast<uint64_t>(n))) * *p.step;
        return std::min(v, p.high);
      }
      if (p.log) {
        double lo = std::log(p.low), hi = std::log(p.high);
        return std::clamp(std::exp(lo + rng.Uniform() * (hi - lo)), p.low, p.high);
      }
      return p.low + rng.Uniform() * (p.high - p.low);
    }
  }
  return p.value;
}

absl::StatusOr<std::optional<Params>> RandomSampler::Suggest(const SuggestRequest& req) const {
  Rng rng(req.seed, static_cast<uint64_t>(req.trial_number));
  Params out;
  for (const ParamDef& p : req.space->params) out[p.name] = Draw(p, rng);
  return out;
}

}  // namespace hpo::algorithms
