#include "common/access_file.h"

#include <cmath>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hpo {

absl::Status CheckRoleName(absl::string_view role, bool per_sweep) {
  if (role == "none" || role == "viewer" || role == "operator" ||
      (!per_sweep && role == "metrics")) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown role '", role, "': give ",
                   per_sweep ? "viewer, operator or none" : "viewer, operator, metrics or none"));
}

absl::StatusOr<AccessFile> ParseAccessFile(absl::string_view text) {
  AccessFile access;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("line ", number, ": ", why));
    };
    if (words[0] == "role" && words.size() == 2) {
      if (absl::Status s = CheckRoleName(words[1], false); !s.ok()) return bad(s.message());
      access.role = std::string(words[1]);
    } else if (words[0] == "sweep" && words.size() == 3) {
      int64_t id = 0;
      if (!absl::SimpleAtoi(words[1], &id) || id <= 0) return bad("'sweep' takes a sweep id");
      if (absl::Status s = CheckRoleName(words[2], true); !s.ok()) return bad(s.message());
      access.sweeps[id] = std::string(words[2]);
    } else if (words[0] == "max_extend_gpu_hours" && words.size() == 2) {
      double hours = 0;
      if (!absl::SimpleAtod(words[1], &hours) || !std::isfinite(hours) || hours < 0) {
        return bad("'max_extend_gpu_hours' takes a number of GPU-hours, 0 or more");
      }
      access.max_extend_gpu_hours = hours;
    } else {
      return bad("give 'role ROLE', 'sweep ID ROLE' or 'max_extend_gpu_hours HOURS'");
    }
  }
  return access;
}

std::string AccessFileText(const AccessFile& access) {
  std::string out = absl::StrCat("role ", access.role, "\n");
  for (const auto& [id, role] : access.sweeps) absl::StrAppend(&out, "sweep ", id, " ", role, "\n");
  if (access.max_extend_gpu_hours) {
    absl::StrAppend(&out, "max_extend_gpu_hours ", *access.max_extend_gpu_hours, "\n");
  }
  return out;
}

}  // namespace hpo
