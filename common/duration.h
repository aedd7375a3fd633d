#pragma once
// Human durations as written in sweep files and flags: "90", "90s", "15m", "2h", "1d", "1h30m",
// "500ms". A bare number is seconds.

#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hpo {

// Returns INVALID_ARGUMENT naming the text when it is not a non-negative duration.
[[nodiscard]] absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text);

// "1h02m03s", "4.2s", "350ms": short, for tables.
std::string HumanDuration(absl::Duration d);

}  // namespace hpo
