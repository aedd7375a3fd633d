#include "algorithms/grid_sampler.h"

#include <cmath>

#include "algorithms/rng.h"

namespace hpo::algorithms {
namespace {

std::vector<ParamValue> Axis(const ParamDef& p, int points) {
  std::vector<ParamValue> out;
  switch (p.type) {
    case ParamType::kFixed:
      out.push_back(p.value);
      break;
    case ParamType::kCategorical:
      out = p.choices;
      break;
    case ParamType::kInt:
    case ParamType::kFloat: {
      std::optional<int64_t> card = p.Cardinality();
      bool is_int = p.type == ParamType::kInt;
      if (card && *card <= points) {
        double step = p.step.value_or(1.0);
        for (int64_t k = 0; k < *card; ++k) {
          double v = p.low + static_cast<double>(k) * step;
          if (is_int)
            out.emplace_back(std::in_place_type<int64_t>, std::llround(v));
          else
            out.emplace_back(std::in_place_type<double>, v);
        }
        break;
      }
      int n = std::max(points, 1);
      int64_t last_int = 0;
      for (int k = 0; k < n; ++k) {
        double t = n == 1 ? 0.5 : static_cast<double>(k) / (n - 1);
        double v = p.log ? std::exp(std::log(p.low) + t * (std::log(p.high) - std::log(p.low)))
                         : p.low + t * (p.high - p.low);
        if (p.step) v = p.low + std::round((v - p.low) / *p.step) * *p.step;
        v = std::clamp(v, p.low, p.high);
        if (is_int) {
          int64_t iv = std::llround(v);
          if (k == 0 || iv != last_int) out.emplace_back(std::in_place_type<int64_t>, iv);
          last_int = iv;
        } else {
          out.emplace_back(std::in_place_type<double>, v);
        }
      }
      break;
    }
  }
  return out;
}

// A bijection on [0, n) from a seed: a cycle-walking affine permutation.
int64_t Permute(int64_t i, int64_t n, uint64_t seed) {
  if (n <= 1) return i;
  Rng rng(seed, 0x6772696400ULL);
  uint64_t m = 1;
  while (m < static_cast<uint64_t>(n)) m <<= 1;
  uint64_t a = (rng.Next() | 1) & (m - 1), b = rng.Next() & (m - 1);
  uint64_t x = static_cast<uint64_t>(i);
  do {
    x = (a * x + b) & (m - 1);
  } while (x >= static_cast<uint64_t>(n));
  return static_cast<int64_t>(x);
}

}  // namespace

GridSampler::GridSampler(const SearchSpace& space, int points, bool shuffle) : shuffle_(shuffle) {
  for (const ParamDef& p : space.params) {
    names_.push_back(p.name);
    axes_.push_back(Axis(p, points));
    size_ = axes_.back().empty()
                ? 0
                : std::min(kMaxGridSize + 1, size_ * static_cast<int64_t>(axes_.back().size()));
  }
}

absl::StatusOr<std::optional<Params>> GridSampler::Suggest(const SuggestRequest& req) const {
  if (size_ > kMaxGridSize) {
    return absl::InvalidArgumentError("the grid has more than 100,000,000 points");
  }
  if (req.trial_number < 0 || req.trial_number >= size_) return std::optional<Params>();
  int64_t index = shuffle_ ? Permute(req.trial_number, size_, req.seed) : req.trial_number;
  Params out;
  for (size_t i = axes_.size(); i-- > 0;) {
    int64_t n = static_cast<int64_t>(axes_[i].size());
    out[names_[i]] = axes_[i][static_cast<size_t>(index % n)];
    index /= n;
  }
  return std::optional<Params>(std::move(out));
}

}  // namespace hpo::algorithms
