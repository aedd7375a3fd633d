#pragma once
// GridSampler: the Cartesian product of every parameter's grid values. Categorical parameters
// contribute their choices, int and stepped float parameters every lattice value (thinned to
// `points` evenly spaced values when there are more), continuous floats `points` values
// (evenly spaced, in log space for log parameters). Trial n gets grid point n, in row-major
// order or, with shuffle, in a seeded permutation; after the last point the grid is exhausted.

#include "algorithms/sampler.h"

namespace hpo::algorithms {

class GridSampler final : public Sampler {
 public:
  GridSampler(const SearchSpace& space, int points, bool shuffle);
  std::string Name() const override { return "grid"; }
  bool ReadsHistory() const override { return false; }
  [[nodiscard]] absl::StatusOr<std::optional<Params>> Suggest(
      const SuggestRequest& req) const override;
  std::optional<int64_t> MaxTrials(const SearchSpace&) const override { return size_; }

  // The values each parameter takes on the grid, in space order.
  const std::vector<std::vector<ParamValue>>& axes() const { return axes_; }

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<ParamValue>> axes_;
  int64_t size_ = 1;
  bool shuffle_ = false;
};

// Grid size above which GridSampler refuses the space.
inline constexpr int64_t kMaxGridSize = 100'000'000;

}  // namespace hpo::algorithms
