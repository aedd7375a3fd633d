#pragma once
// File helpers that report failures as Status with the path in the message.

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace hpo {

[[nodiscard]] absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes to path.tmp, fsyncs (unless !sync), renames over path. `mode`, less the process's umask
// (ProcessUmask), applies to the new file.
[[nodiscard]] absl::Status WriteFileAtomic(const std::string& path, const std::string& data,
                                           int mode = 0644, bool sync = true);

// The process's umask (read once, from /proc/self/status; 022 where that does not say).
mode_t ProcessUmask();

// Creates the directory and its parents with `mode` for the ones it creates.
[[nodiscard]] absl::Status MakeDirs(const std::string& path, int mode = 0755);

// The last `max_bytes` of a file; `truncated` says whether the file is longer.
[[nodiscard]] absl::StatusOr<std::string> TailFile(const std::string& path, int64_t max_bytes,
                                                   bool* truncated);

// Directory of `path` ("." when it has none).
std::string DirName(const std::string& path);

// Absolute form of `path` relative to `base` (or to the current directory when base is empty).
std::string AbsolutePath(const std::string& path, const std::string& base = "");

// The directory of this process's executable ("" when /proc does not say): where the programs
// installed with it are.
std::string ExecutableDir();

}  // namespace hpo
