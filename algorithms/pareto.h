#pragma once
// Pareto: the multi-objective arithmetic that samplers, stoppers and the daemon share —
// constrained dominance, non-dominated sorting, crowding distance, the ε-net order and the
// hypervolume.
//
// Every objective is minimized here: callers turn a maximized one around (Minimized). A point
// carries its constraint violation (0: feasible; the sum of how far each bound is missed), and
// dominance is Deb's constrained one: a feasible point dominates every infeasible one, of two
// infeasible points the one with the smaller violation dominates, and of two feasible points
// one dominates the other when it is no worse in every objective and better in one.
//
// Pure functions, thread-compatible. Costs: NonDominatedRanks is O(n log n) for one or two
// objectives and O(k n^2) beyond; Hypervolume is O(n log n) in two and three dimensions and
// grows by a factor n per dimension beyond (meant for fronts of hundreds of points).

#include <cstddef>
#include <span>
#include <vector>

#include "algorithms/search_space.h"

namespace hpo::algorithms {

// n points of k objectives each, row-major, all minimized, with their violations.
struct Points {
  size_t k = 0;
  std::vector<double> f;          // n * k
  std::vector<double> violation;  // n; 0: feasible

  size_t size() const { return violation.size(); }
  const double* row(size_t i) const { return f.data() + i * k; }
  double at(size_t i, size_t j) const { return f[i * k + j]; }
  bool feasible(size_t i) const { return violation[i] <= 0; }
  // Appends a point: `values` as they are for their `directions` (turned to minimized).
  void Add(std::span<const double> values, std::span<const Direction> directions,
           double violation = 0);
};

// The value to minimize for a value of an objective with `direction`.
inline double Minimized(double value, Direction direction) {
  return direction == Direction::kMaximize ? -value : value;
}

// Plain Pareto dominance of minimized rows of k values: a is no worse anywhere, better somewhere.
bool Dominates(const double* a, const double* b, size_t k);
// Deb's constrained dominance of points i and j of `p` (see above).
bool ConstrainedDominates(const Points& p, size_t i, size_t j);

// The front of every point: 0 for the points nothing dominates, 1 for those only front 0
// dominates, and so on (constrained: every infeasible point ranks after every feasible one, by
// its violation).
std::vector<int> NonDominatedRanks(const Points& p);
// The points of each front, front 0 first, each in index order.
std::vector<std::vector<size_t>> Fronts(const std::vector<int>& ranks);

// NSGA-II's crowding distance of each point of `front` (indices into p), in front order: the
// sum over objectives of the gap between its neighbours, over the front's range; infinite for
// the extremes.
std::vector<double> CrowdingDistances(const Points& p, const std::vector<size_t>& front);

// The ε-net order of `front` (indices into p; Clarkson's farthest-first traversal, as MO-ASHA
// orders a front): first the point best in the first objective, then each time the point
// farthest (Euclidean, each objective scaled by its range over `scale`, the indices of the
// points the range is taken over) from those already taken. Ties go to the lower index.
std::vector<size_t> EpsilonNetOrder(const Points& p, const std::vector<size_t>& front,
                                    const std::vector<size_t>& scale);

// The hypervolume the feasible points of `p` dominate up to `reference` (k values, minimized):
// the measure of {x : some point <= x < reference}. Points not strictly better than the
// reference in every objective add nothing.
double Hypervolume(const Points& p, std::span<const double> reference);
// The same for the points listed in `subset`.
double Hypervolume(const Points& p, const std::vector<size_t>& subset,
                   std::span<const double> reference);

}  // namespace hpo::algorithms
