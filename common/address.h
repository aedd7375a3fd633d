#pragma once
// Hosts and network addresses as hpod's flags and files write them ("host:port").

#include <unistd.h>

#include <string>

#include "absl/strings/match.h"

namespace hpo {

// Whether `address` (host:port) is on loopback: 127.0.0.0/8, [::1] or localhost.
inline bool IsLoopback(const std::string& address) {
  std::string host = address.substr(0, address.rfind(':'));
  return absl::StartsWith(host, "127.") || host == "localhost" || host == "[::1]" || host == "::1";
}

// This host's name, as hpod's lock file and endpoint write it.
inline std::string HostName() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : "localhost";
}

}  // namespace hpo
