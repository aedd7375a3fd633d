#include "common/data_dir.h"

#include <sys/stat.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/token.h"

namespace hpo {

DataDir DataDir::FromEnvironment() {
  if (const char* env = std::getenv("HPO_DATA_DIR"); env != nullptr && *env != '\0') {
    return DataDir(AbsolutePath(env));
  }
  const char* home = std::getenv("HOME");
  return DataDir(absl::StrCat(home != nullptr ? home : "/tmp", "/.hpo"));
}

std::string DataDir::sweep_dir(int64_t sweep_id) const {
  return absl::StrCat(sweeps_root(), "/", sweep_id);
}

std::string DataDir::trial_dir(int64_t sweep_id, int64_t trial_number) const {
  return absl::StrFormat("%s/trials/%05d", sweep_dir(sweep_id), trial_number);
}

absl::Status DataDir::Create() const {
  if (absl::Status s = MakeDirs(root_, 0700); !s.ok()) return s;
  ::chmod(root_.c_str(), 0700);
  return absl::OkStatus();
}

absl::StatusOr<std::string> DataDir::ReadToken() const {
  auto token = ReadFile(token_path());
  if (!token.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no token at ", token_path(), " (is hpod running for this HPO_DATA_DIR?)"));
  }
  return std::string(absl::StripAsciiWhitespace(*token));
}

absl::StatusOr<std::string> DataDir::ReadOrCreateInstanceId() const {
  if (auto text = ReadFile(instance_path()); text.ok()) {
    std::string id(absl::StripAsciiWhitespace(*text));
    if (!id.empty()) return id;
  }
  std::string id = RandomHex(8);
  if (absl::Status s = WriteFileAtomic(instance_path(), id + "\n", 0600); !s.ok()) return s;
  return id;
}

absl::StatusOr<std::string> DataDir::ReadOrCreateToken() const {
  if (auto token = ReadToken(); token.ok() && !token->empty()) return token;
  std::string token = NewToken();
  if (absl::Status s = WriteFileAtomic(token_path(), token + "\n", 0600); !s.ok()) return s;
  return token;
}

}  // namespace hpo
