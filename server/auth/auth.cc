#include "server/auth/auth.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/layout.h"
#include "common/token.h"
#include "spdlog/spdlog.h"

namespace hpo::server {
namespace {

std::optional<Role> RoleOf(absl::string_view name) {
  if (name == "none") return Role::kNone;
  if (name == "viewer") return Role::kViewer;
  if (name == "operator") return Role::kOperator;
  return std::nullopt;
}

const char* ActionWords(Action action) {
  switch (action) {
    case Action::kUse:
      return "use hpod";
    case Action::kView:
      return "see";
    case Action::kOperate:
      return "change (pause, resume, cancel, extend, enqueue, ask, tell)";
    case Action::kSubmit:
      return "submit sweeps";
    case Action::kRemove:
      return "remove";
    case Action::kMetrics:
      return "read /metrics";
  }
  return "do that";
}

// The caller of a user's token, from the user's access file (`access_text`; nullopt: none).
Caller UserCaller(const std::string& name, const std::string& token,
                  const std::optional<std::string>& access_text) {
  Caller c;
  c.user = name;
  c.token = token;
  if (!access_text) return c;  // a token from before roles: only the sweeps it submitted
  absl::StatusOr<AccessFile> access = ParseAccessFile(*access_text);
  if (!access.ok()) {
    spdlog::warn("user {}: {}; the user gets no role until it is fixed", name,
                 std::string(access.status().message()));
    return c;
  }
  if (access->role == "metrics") {
    c.kind = Caller::Kind::kMetrics;
    return c;
  }
  c.role = *RoleOf(access->role);
  for (const auto& [id, role] : access->sweeps) c.sweeps[id] = *RoleOf(role);
  c.max_extend_gpu_hours = access->max_extend_gpu_hours;
  return c;
}

int64_t MtimeNs(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

Role RoleOn(const Caller& caller, const SweepRef& sweep) {
  if (caller.owner()) return Role::kOperator;
  if (caller.kind != Caller::Kind::kUser) return Role::kNone;
  Role role = caller.role;
  if (auto it = caller.sweeps.find(sweep.id); it != caller.sweeps.end()) {
    role = std::max(role, it->second);
  }
  // Submitted by this user before only the owner could submit: theirs to operate.
  if (!sweep.owner.empty() && sweep.owner == caller.user) role = Role::kOperator;
  return role;
}

absl::Status Authorize(const Caller& caller, Action action, const SweepRef* sweep) {
  auto denied = [&](absl::string_view why) {
    return absl::PermissionDeniedError(absl::StrCat(caller.user, " may not ", ActionWords(action),
                                                    sweep ? absl::StrCat(" sweep ", sweep->id) : "",
                                                    ": ", why));
  };
  if (caller.owner()) return absl::OkStatus();
  if (caller.kind == Caller::Kind::kMetrics) {
    if (action == Action::kMetrics) return absl::OkStatus();
    return denied("a metrics token reads /metrics and nothing else");
  }
  switch (action) {
    case Action::kUse:
    case Action::kMetrics:  // filtered to the sweeps the user may see
      return absl::OkStatus();
    case Action::kSubmit:
    case Action::kRemove:
      return denied(
          "only the daemon's owner submits, forks and removes sweeps (a sweep's command runs as "
          "the daemon's Unix user); ask the owner to submit it and share it with you (hpo share "
          "SWEEP USER operator), or run an hpod of your own");
    case Action::kView:
    case Action::kOperate:
      break;
  }
  Role need = action == Action::kView ? Role::kViewer : Role::kOperator;
  Role have = sweep != nullptr ? RoleOn(caller, *sweep) : caller.role;
  if (have >= need) return absl::OkStatus();
  if (have == Role::kViewer) return denied("a viewer's role only reads it");
  return denied("it is not shared with this user");
}

TokenTable::TokenTable(std::string owner, std::string owner_token, std::string users_dir,
                       const Clock& clock, std::string owner_token_path)
    : owner_(std::move(owner)),
      users_dir_(std::move(users_dir)),
      owner_token_path_(std::move(owner_token_path)),
      clock_(clock),
      owner_token_(std::move(owner_token)) {
  std::lock_guard lock(mu_);
  ScanLocked();
}

bool TokenTable::ChangedLocked() {
  return !users_dir_.empty() && MtimeNs(users_dir_) != dir_mtime_ns_;
}

void TokenTable::ScanLocked() {
  scanned_ = clock_.Now();
  if (!owner_token_path_.empty()) {
    absl::StatusOr<std::string> text = ReadFile(owner_token_path_);
    std::string token = text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : "";
    if (token.size() >= 16) owner_token_ = token;
  }
  if (users_dir_.empty()) return;
  dir_mtime_ns_ = MtimeNs(users_dir_);
  std::error_code ec;
  std::map<std::string, Caller> users;
  for (const auto& entry : std::filesystem::directory_iterator(users_dir_, ec)) {
    if (entry.path().extension() != layout::kUserTokenSuffix) continue;
    absl::StatusOr<std::string> text = ReadFile(entry.path().string());
    if (!text.ok()) continue;
    std::string token(absl::StripAsciiWhitespace(*text));
    if (token.size() < 16) {
      spdlog::warn("ignoring {}: too short to be a token", entry.path().string());
      continue;
    }
    std::filesystem::path access_path = entry.path();
    access_path.replace_extension(layout::kUserAccessSuffix);
    absl::StatusOr<std::string> access = ReadFile(access_path.string());
    std::string name = entry.path().stem().string();
    users[token] =
        UserCaller(name, token, access.ok() ? std::optional<std::string>(*access) : std::nullopt);
  }
  users_.swap(users);
}

std::optional<Caller> TokenTable::Find(absl::string_view token) {
  if (token.empty()) return std::nullopt;
  std::lock_guard lock(mu_);
  absl::Time now = clock_.Now();
  if (now - scanned_ >= absl::Seconds(1) || ChangedLocked()) ScanLocked();
  if (TokensEqual(token, owner_token_)) {
    Caller owner = Caller::Owner(owner_);
    owner.token = owner_token_;
    return owner;
  }
  auto it = users_.find(std::string(token));
  if (it == users_.end() && now - scanned_ >= absl::Milliseconds(100)) {
    ScanLocked();  // a user added just now, on a file system with coarse times
    it = users_.find(std::string(token));
  }
  if (it == users_.end()) return std::nullopt;
  return it->second;
}

std::string ProcessUserName() {
  if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr) return pw->pw_name;
  return absl::StrCat("uid", ::geteuid());
}

}  // namespace hpo::server
