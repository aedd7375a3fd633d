#pragma once
// Deterministic, platform-independent random numbers for samplers: the same seed gives the same
// numbers with any standard library (unlike std::uniform_*_distribution).

#include <cstdint>
#include <random>

namespace hpo::algorithms {

class Rng {
 public:
  // Seeds from the sweep seed and a stream (e.g. the trial number) so streams are independent.
  Rng(uint64_t seed, uint64_t stream)
      : engine_(Mix(seed * 0x9E3779B97F4A7C15ULL ^ Mix(stream + 1))) {}
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n); n > 0.
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>(Uniform() * static_cast<double>(n)) % n;
  }
  uint64_t Next() { return engine_(); }

 private:
  static uint64_t Mix(uint64_t x) {  // splitmix64 finalizer
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
  }
  std::mt19937_64 engine_;
};

}  // namespace hpo::algorithms
