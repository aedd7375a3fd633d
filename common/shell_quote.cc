#include "common/shell_quote.h"

namespace hpo {

std::string ShellQuote(const std::string& s) {
  static constexpr char kSafe[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/:=+@%";
  if (!s.empty() && s.find_first_not_of(kSafe) == std::string::npos) return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

}  // namespace hpo
