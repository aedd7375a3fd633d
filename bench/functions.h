#pragma once
// Standard optimization test functions, shared by the benchmarks and the sampler tests.
#include <cmath>
#include <string>

#include "algorithms/search_space.h"

namespace hpo::bench {

// Hartmann-6 on [0, 1]^6 over parameters x1..x6; minimum -3.32237 at
// (0.2017, 0.1500, 0.4769, 0.2753, 0.3117, 0.6573).
inline double Hartmann6(const algorithms::Params& p) {
  static const double a[4] = {1.0, 1.2, 3.0, 3.2};
  static const double A[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                 {0.05, 10, 17, 0.1, 8, 14},
                                 {3, 3.5, 1.7, 10, 17, 8},
                                 {17, 8, 0.05, 10, 0.1, 14}};
  static const double P[4][6] = {{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
                                 {0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
                                 {0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
                                 {0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381}};
  double total = 0;
  for (int i = 0; i < 4; ++i) {
    double e = 0;
    for (int j = 0; j < 6; ++j) {
      double x = *algorithms::NumericValue(p.at("x" + std::to_string(j + 1)));
      e += A[i][j] * (x - P[i][j]) * (x - P[i][j]);
    }
    total += a[i] * std::exp(-e);
  }
  return -total;
}

}  // namespace hpo::bench
