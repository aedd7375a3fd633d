#include "common/duration.h"

#include <cctype>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace hpo {

absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text) {
  absl::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "' is not a duration (examples: 90, 90s, 15m, 2h, 1d, 1h30m, 500ms)"));
  };
  if (s.empty()) return bad();
  double seconds = 0;
  if (absl::SimpleAtod(s, &seconds)) {
    if (!(seconds >= 0) || seconds > 1e9) return bad();
    return absl::Seconds(seconds);
  }
  absl::Duration total = absl::ZeroDuration();
  while (!s.empty()) {
    size_t n = 0;
    while (n < s.size() && (std::isdigit(static_cast<unsigned char>(s[n])) || s[n] == '.')) ++n;
    if (n == 0) return bad();
    double value = 0;
    if (!absl::SimpleAtod(s.substr(0, n), &value)) return bad();
    s.remove_prefix(n);
    size_t u = 0;
    while (u < s.size() && std::isalpha(static_cast<unsigned char>(s[u]))) ++u;
    absl::string_view unit = s.substr(0, u);
    s.remove_prefix(u);
    if (unit == "ms")
      total += absl::Milliseconds(value);
    else if (unit == "s")
      total += absl::Seconds(value);
    else if (unit == "m")
      total += absl::Minutes(value);
    else if (unit == "h")
      total += absl::Hours(value);
    else if (unit == "d")
      total += absl::Hours(24 * value);
    else
      return bad();
  }
  if (total > absl::Hours(24 * 365 * 10)) return bad();
  return total;
}

std::string HumanDuration(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  if (d < absl::Seconds(1)) return absl::StrFormat("%dms", absl::ToInt64Milliseconds(d));
  if (d < absl::Minutes(1)) return absl::StrFormat("%.1fs", absl::ToDoubleSeconds(d));
  int64_t s = absl::ToInt64Seconds(d);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm%02ds", s / 3600, (s / 60) % 60, s % 60);
}

}  // namespace hpo
