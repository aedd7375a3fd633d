#include "client/cli/user_commands.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/cli.h"
#include "common/access_file.h"
#include "common/data_dir.h"
#include "common/files.h"
#include "common/token.h"

namespace hpo::client::cli {
namespace {

std::string CheckName(const std::string& n) {
  if (n.empty() || n.size() > 64 || n[0] == '.' ||
      n.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
          std::string::npos) {
    return "a user name is 1-64 letters, digits, '.', '_' or '-', not starting with '.'";
  }
  return "";
}

std::function<std::string(const std::string&)> RoleCheck(bool per_sweep) {
  return [per_sweep](const std::string& role) {
    absl::Status s = CheckRoleName(role, per_sweep);
    return s.ok() ? std::string() : std::string(s.message());
  };
}

// The user's access file, or FAILED_PRECONDITION for a user without a token.
absl::StatusOr<AccessFile> ReadAccess(const DataDir& dir, const std::string& name) {
  if (::access(dir.user_token_path(name).c_str(), F_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("no user ", name, " (hpo user add ", name, " --role viewer|operator)"));
  }
  absl::StatusOr<std::string> text = ReadFile(dir.user_access_path(name));
  if (!text.ok()) return AccessFile{};  // a token from before roles: none
  absl::StatusOr<AccessFile> access = ParseAccessFile(*text);
  if (!access.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir.user_access_path(name), ": ", access.status().message()));
  }
  return access;
}

absl::Status WriteAccess(const DataDir& dir, const std::string& name, const AccessFile& access) {
  return WriteFileAtomic(dir.user_access_path(name), AccessFileText(access), 0600);
}

const char* kRoles = "viewer | operator | metrics | none";

constexpr char kCapHelp[] =
    "the most GPU-hours this user may add to any one sweep's budget with `hpo extend`, over all "
    "their extends of it ('none': no cap)";

// `--max-extend-gpu-hours`: into `access` ("" leaves it as it is).
absl::Status SetCap(const std::string& text, AccessFile& access) {
  if (text.empty()) return absl::OkStatus();
  if (text == "none") {
    access.max_extend_gpu_hours.reset();
    return absl::OkStatus();
  }
  double hours = 0;
  if (!absl::SimpleAtod(text, &hours) || !std::isfinite(hours) || hours < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-extend-gpu-hours ", text, ": give a number of GPU-hours, 0 or more, or none"));
  }
  access.max_extend_gpu_hours = hours;
  return absl::OkStatus();
}

}  // namespace

UserCommands::UserCommands(CLI::App& app, int& rc) : rc_(rc) {
  CLI::App* user =
      app.add_subcommand("user", "the owner of a shared daemon: give other users tokens and roles");
  user->require_subcommand(1);
  CLI::App* add = user->add_subcommand(
      "add", "make a token for NAME with a role (prints the token file to hand over)");
  add->add_option("name", add_.name, "user name")->required()->check(CheckName);
  add->add_option("--role", add_.role,
                  absl::StrCat("viewer: read; operator: also pause, resume, cancel, extend, "
                               "enqueue, ask, tell; metrics: /metrics only (",
                               kRoles, ")"))
      ->check(RoleCheck(false))
      ->capture_default_str();
  add->add_option("--sweeps", add_.sweeps,
                  "the role on these sweeps only (default: on every sweep)")
      ->delimiter(',');
  add->add_option("--max-extend-gpu-hours", add_.max_extend_gpu_hours, kCapHelp);
  add->callback([this] { Add(); });
  CLI::App* rm = user->add_subcommand(
      "rm", "revoke NAME's token: its calls, dashboard sessions and login links end at once");
  rm->add_option("name", rm_.name, "user name")->required()->check(CheckName);
  rm->callback([this] { Remove(); });
  user->add_subcommand("ls", "list users with their roles")->callback([this] { List(); });
  CLI::App* role = user->add_subcommand("role", "change NAME's role on every sweep");
  role->add_option("name", role_.name, "user name")->required()->check(CheckName);
  role->add_option("role", role_.role, kRoles)->required()->check(RoleCheck(false));
  role->add_option("--max-extend-gpu-hours", role_.max_extend_gpu_hours, kCapHelp);
  role->callback([this] { SetRole(); });
  CLI::App* rotate = user->add_subcommand(
      "rotate",
      "give NAME (or, with --owner, the owner) a new token; the old one, and every dashboard "
      "session made with it, ends at once");
  rotate->add_option("name", rotate_.name, "user name")->check(CheckName);
  rotate->add_flag("--owner", rotate_.owner, "rotate the owner's own token (DATA_DIR/token)");
  rotate->callback([this] { Rotate(); });
  CLI::App* share = app.add_subcommand(
      "share", "give user NAME a role on one sweep (viewer, operator; none takes it back)");
  share->add_option("sweep", share_.sweep_id, "sweep id")->required();
  share->add_option("name", share_.name, "user name")->required()->check(CheckName);
  share->add_option("role", share_.role, "viewer | operator | none")
      ->required()
      ->check(RoleCheck(true));
  share->callback([this] { Share(); });
}

void UserCommands::Add() {
  DataDir dir = DataDir::FromEnvironment();
  std::string path = dir.user_token_path(add_.name);
  if (absl::Status s = MakeDirs(dir.users_dir(), 0700); !s.ok()) {
    rc_ = Fail(s);
    return;
  }
  if (::access(path.c_str(), F_OK) == 0) {
    rc_ = Fail(absl::AlreadyExistsError(absl::StrCat(
        "user ", add_.name, " already has a token: ", path, " (hpo user role, hpo share)")));
    return;
  }
  if (add_.role == "metrics" && !add_.sweeps.empty()) {
    rc_ = Fail(absl::InvalidArgumentError("a metrics token reads /metrics only: no --sweeps"));
    return;
  }
  AccessFile access;
  if (add_.sweeps.empty()) {
    access.role = add_.role;
  } else {
    for (int64_t id : add_.sweeps) access.sweeps[id] = add_.role;
  }
  if (absl::Status s = SetCap(add_.max_extend_gpu_hours, access); !s.ok()) {
    rc_ = Fail(s);
    return;
  }
  // The role first: a token never exists without the access it was given.
  if (absl::Status s = WriteAccess(dir, add_.name, access); !s.ok()) {
    rc_ = Fail(s);
    return;
  }
  if (absl::Status s = WriteFileAtomic(path, NewToken() + "\n", 0600); !s.ok()) {
    rc_ = Fail(s);
    return;
  }
  std::printf("%s\n", path.c_str());
  std::fprintf(stderr,
               "hand this file to %s privately; they set HPO_SERVER=HOST:PORT and "
               "HPO_TOKEN_FILE=<their copy>. Role: %s on %s\n",
               add_.name.c_str(), add_.role.c_str(),
               add_.sweeps.empty()
                   ? "every sweep"
                   : absl::StrCat("sweeps ", absl::StrJoin(add_.sweeps, ",")).c_str());
}

void UserCommands::Remove() {
  DataDir dir = DataDir::FromEnvironment();
  std::string path = dir.user_token_path(rm_.name);
  if (::unlink(path.c_str()) != 0) {
    rc_ = Fail(absl::NotFoundError(absl::StrCat("no token for user ", rm_.name, " (", path, ")")));
    return;
  }
  ::unlink(dir.user_access_path(rm_.name).c_str());
}

void UserCommands::List() {
  DataDir dir = DataDir::FromEnvironment();
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.users_dir(), ec)) {
    if (e.path().extension() == layout::kUserTokenSuffix) names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    absl::StatusOr<AccessFile> access = ReadAccess(dir, n);
    if (!access.ok()) {
      std::printf("%s\t(%s)\n", n.c_str(), std::string(access.status().message()).c_str());
      continue;
    }
    std::vector<std::string> named;
    for (const auto& [id, role] : access->sweeps) named.push_back(absl::StrCat(id, ":", role));
    std::printf("%s\t%s%s%s%s\n", n.c_str(), access->role.c_str(), named.empty() ? "" : "\t",
                absl::StrJoin(named, ",").c_str(),
                access->max_extend_gpu_hours
                    ? absl::StrCat("\tmax_extend_gpu_hours=", *access->max_extend_gpu_hours).c_str()
                    : "");
  }
}

void UserCommands::SetRole() {
  DataDir dir = DataDir::FromEnvironment();
  absl::StatusOr<AccessFile> access = ReadAccess(dir, role_.name);
  if (!access.ok()) {
    rc_ = Fail(access.status());
    return;
  }
  access->role = role_.role;
  if (role_.role == "metrics") access->sweeps.clear();
  if (absl::Status s = SetCap(role_.max_extend_gpu_hours, *access); !s.ok()) {
    rc_ = Fail(s);
    return;
  }
  if (absl::Status s = WriteAccess(dir, role_.name, *access); !s.ok()) rc_ = Fail(s);
}

void UserCommands::Rotate() {
  DataDir dir = DataDir::FromEnvironment();
  if (rotate_.owner == !rotate_.name.empty()) {
    rc_ = Fail(absl::InvalidArgumentError("give a user's NAME or --owner"));
    return;
  }
  std::string path = rotate_.owner ? dir.token_path() : dir.user_token_path(rotate_.name);
  if (::access(path.c_str(), F_OK) != 0) {
    rc_ = Fail(absl::NotFoundError(absl::StrCat("no token at ", path)));
    return;
  }
  if (absl::Status s = WriteFileAtomic(path, NewToken() + "\n", 0600); !s.ok()) {
    rc_ = Fail(s);
    return;
  }
  std::printf("%s\n", path.c_str());
  if (!rotate_.owner) {
    std::fprintf(stderr, "hand the new file to %s privately; the old token no longer works\n",
                 rotate_.name.c_str());
  }
}

void UserCommands::Share() {
  DataDir dir = DataDir::FromEnvironment();
  absl::StatusOr<AccessFile> access = ReadAccess(dir, share_.name);
  if (!access.ok()) {
    rc_ = Fail(access.status());
    return;
  }
  if (access->role == "metrics") {
    rc_ = Fail(absl::FailedPreconditionError(
        absl::StrCat(share_.name, " holds a metrics token, which reads /metrics only")));
    return;
  }
  // The sweep must be there (asked as the owner, who sees every sweep).
  if (absl::StatusOr<v1::Sweep> sweep = Connect()->GetSweep(share_.sweep_id); !sweep.ok()) {
    rc_ = Fail(sweep.status());
    return;
  }
  if (share_.role == "none") {
    access->sweeps.erase(share_.sweep_id);
  } else {
    access->sweeps[share_.sweep_id] = share_.role;
  }
  if (absl::Status s = WriteAccess(dir, share_.name, *access); !s.ok()) {
    rc_ = Fail(s);
    return;
  }
  std::printf("%s: %s on sweep %lld\n", share_.name.c_str(), share_.role.c_str(),
              static_cast<long long>(share_.sweep_id));
}

}  // namespace hpo::client::cli
