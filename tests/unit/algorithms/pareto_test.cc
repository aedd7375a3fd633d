// The Pareto arithmetic (algorithms/pareto.h) against hand-computed cases and brute force.
#include "algorithms/pareto.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"

namespace hpo::algorithms {
namespace {

Points Make(size_t k, const std::vector<std::vector<double>>& rows,
            const std::vector<double>& violations = {}) {
  Points p;
  p.k = k;
  for (size_t i = 0; i < rows.size(); ++i) {
    p.Add(rows[i], {}, i < violations.size() ? violations[i] : 0.0);
  }
  return p;
}

// Ranks by the definition: peel off the points nothing left dominates.
std::vector<int> BruteRanks(const Points& p) {
  std::vector<int> ranks(p.size(), -1);
  for (int r = 0;; ++r) {
    std::vector<size_t> front;
    for (size_t i = 0; i < p.size(); ++i) {
      if (ranks[i] >= 0) continue;
      bool dominated = false;
      for (size_t j = 0; j < p.size() && !dominated; ++j) {
        dominated = j != i && ranks[j] < 0 && ConstrainedDominates(p, j, i);
      }
      if (!dominated) front.push_back(i);
    }
    if (front.empty()) return ranks;
    for (size_t i : front) ranks[i] = r;
  }
}

TEST(Pareto, MaximizedObjectivesAreTurnedAround) {
  Points p;
  p.k = 2;
  std::vector<Direction> d = {Direction::kMaximize, Direction::kMinimize};
  p.Add(std::vector<double>{0.9, 3.0}, d);
  EXPECT_EQ(p.at(0, 0), -0.9);
  EXPECT_EQ(p.at(0, 1), 3.0);
}

TEST(Pareto, RanksMatchTheDefinitionForAnyNumberOfObjectives) {
  std::mt19937_64 rng(7);
  for (size_t k : {1, 2, 3, 4}) {
    for (int round = 0; round < 30; ++round) {
      Points p;
      p.k = k;
      size_t n = 1 + rng() % 60;
      for (size_t i = 0; i < n; ++i) {
        std::vector<double> row;
        for (size_t j = 0; j < k; ++j) row.push_back(static_cast<double>(rng() % 6));  // ties
        double violation = rng() % 5 == 0 ? static_cast<double>(1 + rng() % 3) : 0.0;
        p.Add(row, {}, violation);
      }
      ASSERT_EQ(NonDominatedRanks(p), BruteRanks(p)) << "k " << k << " round " << round;
    }
  }
}

TEST(Pareto, InfeasiblePointsRankAfterFeasibleOnesByViolation) {
  Points p = Make(2, {{5, 5}, {0, 0}, {1, 1}, {9, 9}}, {0, 2, 1, 0});
  EXPECT_EQ(NonDominatedRanks(p), (std::vector<int>{0, 3, 2, 1}));
  EXPECT_TRUE(ConstrainedDominates(p, 0, 1));
  EXPECT_TRUE(ConstrainedDominates(p, 2, 1));
}

TEST(Pareto, CrowdingDistanceIsTheNeighboursGapOverTheRange) {
  Points p = Make(2, {{0, 4}, {1, 3}, {3, 1}, {4, 0}});
  std::vector<double> c = CrowdingDistances(p, {0, 1, 2, 3});
  EXPECT_TRUE(std::isinf(c[0]) && std::isinf(c[3]));
  EXPECT_DOUBLE_EQ(c[1], 3.0 / 4 + 3.0 / 4);  // (3-0)/4 in each objective
  EXPECT_DOUBLE_EQ(c[2], 3.0 / 4 + 3.0 / 4);
}

TEST(Pareto, EpsilonNetStartsAtTheBestFirstObjectiveAndGoesFarthestFirst) {
  Points p = Make(2, {{2, 2}, {0, 4}, {4, 0}, {1, 3}, {3, 1}});
  EXPECT_EQ(EpsilonNetOrder(p, {0, 1, 2, 3, 4}, {}), (std::vector<size_t>{1, 2, 0, 3, 4}));
}

TEST(Pareto, HypervolumeOfKnownSets) {
  std::vector<double> ref2 = {4, 4};
  EXPECT_DOUBLE_EQ(Hypervolume(Make(2, {{1, 3}, {2, 2}, {3, 1}}), ref2), 6.0);
  // A dominated point, one outside the reference and an infeasible one add nothing.
  EXPECT_DOUBLE_EQ(
      Hypervolume(Make(2, {{1, 3}, {2, 2}, {3, 1}, {3, 3}, {5, 0}, {0, 0}}, {0, 0, 0, 0, 0, 1}),
                  ref2),
      6.0);
  std::vector<double> ref3 = {2, 2, 2};
  EXPECT_DOUBLE_EQ(Hypervolume(Make(3, {{1, 1, 1}}), ref3), 1.0);
  EXPECT_DOUBLE_EQ(Hypervolume(Make(3, {{0, 0, 1}, {1, 1, 0}}), ref3), 5.0);
  EXPECT_DOUBLE_EQ(Hypervolume(Make(1, {{3}, {1}}), std::vector<double>{4}), 3.0);
}

// Three and four dimensions against inclusion-exclusion over every subset.
TEST(Pareto, HypervolumeMatchesInclusionExclusion) {
  std::mt19937_64 rng(11);
  for (size_t k : {3, 4}) {
    for (int round = 0; round < 20; ++round) {
      size_t n = 1 + rng() % 7;
      std::vector<std::vector<double>> rows;
      for (size_t i = 0; i < n; ++i) {
        std::vector<double> row;
        for (size_t j = 0; j < k; ++j) row.push_back(static_cast<double>(rng() % 10) / 10);
        rows.push_back(row);
      }
      std::vector<double> ref(k, 1.0);
      double expect = 0;
      for (uint32_t mask = 1; mask < (1u << n); ++mask) {
        double box = 1;
        for (size_t j = 0; j < k; ++j) {
          double worst = 0;
          for (size_t i = 0; i < n; ++i) {
            if (mask & (1u << i)) worst = std::max(worst, rows[i][j]);
          }
          box *= ref[j] - worst;
        }
        expect += (__builtin_popcount(mask) % 2 == 1 ? 1 : -1) * box;
      }
      EXPECT_NEAR(Hypervolume(Make(k, rows), ref), expect, 1e-12) << k << " " << round;
    }
  }
}

}  // namespace
}  // namespace hpo::algorithms
