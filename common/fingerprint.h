#pragma once
// A stable 64-bit hash of bytes (FNV-1a): the same for the same bytes on every build, run and
// machine, which std::hash and absl::Hash do not promise. For telling requests apart, never for
// secrets.

#include <cstdint>

#include "absl/strings/string_view.h"

namespace hpo {

inline uint64_t Fingerprint64(absl::string_view bytes) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

}  // namespace hpo
