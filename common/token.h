#pragma once
// Secrets: random tokens and their constant-time comparison.

#include <string>
#include <string_view>

namespace hpo {

// 32 random bytes from the kernel as 64 hex characters.
std::string NewToken();

// Compares without leaking where the first difference is.
bool TokensEqual(absl::string_view a, absl::string_view b);

}  // namespace hpo
