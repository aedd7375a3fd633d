#pragma once
// A user's access file, DATA_DIR/users/NAME.access: the role the daemon's owner gave NAME
// (server/auth/auth.h says what each may do), written by `hpo user` and `hpo share`, read by hpod.
// One setting a line, '#' starts a comment:
//
//   role viewer            the role on every sweep: none | viewer | operator | metrics
//   sweep 12 operator      a role on one sweep: none | viewer | operator (the stronger counts)
//   max_extend_gpu_hours 4 the most GPU-hours NAME may add to any one sweep's budget with
//                          `hpo extend` (over all of NAME's extends of it); none: no cap

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hpo {

struct AccessFile {
  std::string role = "none";
  std::map<int64_t, std::string> sweeps;  // sweep id -> role
  std::optional<double> max_extend_gpu_hours;
};

// INVALID_ARGUMENT naming the line for anything but the lines above.
[[nodiscard]] absl::StatusOr<AccessFile> ParseAccessFile(absl::string_view text);
std::string AccessFileText(const AccessFile& access);
// INVALID_ARGUMENT unless `role` is a role for every sweep (`per_sweep` false: none, viewer,
// operator, metrics) or for one (none, viewer, operator).
[[nodiscard]] absl::Status CheckRoleName(absl::string_view role, bool per_sweep);

}  // namespace hpo
