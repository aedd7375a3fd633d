#include "common/token.h"

#include <sys/random.h>

#include <cstdint>
#include <vector>

namespace hpo {

std::string RandomHex(size_t count) {
  std::vector<unsigned char> bytes(count);
  size_t got = 0;
  while (got < count) {
    ssize_t n = getrandom(bytes.data() + got, count - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * count);
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

bool TokensEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace hpo
