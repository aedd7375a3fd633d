#pragma once
// For tests that drive a Backend directly, with no store whose commit it would wait for: the
// decision and its carrying out (Act) in one call.

#include "backend/backend.h"

namespace hpo::fakes {

inline absl::Status LaunchNow(backend::Backend& b, const backend::LaunchSpec& spec) {
  absl::Status s = b.Launch(spec);
  b.Act();
  return s;
}

inline absl::Status StopNow(backend::Backend& b, int64_t trial_id, absl::Duration grace) {
  absl::Status s = b.Stop(trial_id, grace);
  b.Act();
  return s;
}

}  // namespace hpo::fakes
