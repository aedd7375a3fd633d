#include "server/auth.h"

#include <pwd.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/layout.h"
#include "common/token.h"
#include "spdlog/spdlog.h"

namespace hpo::server {

TokenTable::TokenTable(std::string owner, std::string owner_token, std::string users_dir,
                       const Clock& clock)
    : owner_(std::move(owner)),
      owner_token_(std::move(owner_token)),
      users_dir_(std::move(users_dir)),
      clock_(clock) {
  std::lock_guard lock(mu_);
  ScanLocked();
}

void TokenTable::ScanLocked() {
  scanned_ = clock_.Now();
  if (users_dir_.empty()) return;
  std::error_code ec;
  std::map<std::string, std::string> users;
  for (const auto& entry : std::filesystem::directory_iterator(users_dir_, ec)) {
    if (entry.path().extension() != layout::kUserTokenSuffix) continue;
    absl::StatusOr<std::string> text = ReadFile(entry.path().string());
    if (!text.ok()) continue;
    std::string token(absl::StripAsciiWhitespace(*text));
    if (token.size() < 16) {
      spdlog::warn("ignoring {}: too short to be a token", entry.path().string());
      continue;
    }
    users[token] = entry.path().stem().string();
  }
  users_.swap(users);
}

std::optional<Caller> TokenTable::Find(absl::string_view token) {
  if (token.empty()) return std::nullopt;
  if (TokensEqual(token, owner_token_)) return Caller{owner_, true};
  std::lock_guard lock(mu_);
  absl::Time now = clock_.Now();
  if (now - scanned_ >= absl::Seconds(1)) ScanLocked();  // users added or removed
  auto it = users_.find(std::string(token));
  if (it == users_.end() && now - scanned_ >= absl::Milliseconds(100)) {
    ScanLocked();  // a user added just now
    it = users_.find(std::string(token));
  }
  if (it == users_.end()) return std::nullopt;
  return Caller{it->second, false};
}

absl::Status CheckOwner(const Caller& caller, const std::string& owner, int64_t sweep_id) {
  if (caller.admin || caller.user == owner) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("sweep ", sweep_id, " belongs to another user"));
}

std::string ProcessUserName() {
  if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr) return pw->pw_name;
  return absl::StrCat("uid", ::geteuid());
}

}  // namespace hpo::server
