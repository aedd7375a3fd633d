#pragma once
// Secrets: random tokens and their constant-time comparison.

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace hpo {

// `bytes` random bytes from the kernel as 2 * bytes hex characters.
std::string RandomHex(size_t bytes);
// A token: 32 random bytes, 64 hex characters.
inline std::string NewToken() { return RandomHex(32); }

// Compares without leaking where the first difference is.
bool TokensEqual(absl::string_view a, absl::string_view b);

}  // namespace hpo
