#include "client/cli/user_commands.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "client/cli/cli.h"
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

}  // namespace

UserCommands::UserCommands(CLI::App& app, int& rc) : rc_(rc) {
  CLI::App* user =
      app.add_subcommand("user", "the owner of a shared daemon: give other users tokens");
  user->require_subcommand(1);
  CLI::App* add =
      user->add_subcommand("add", "make a token for NAME (prints the token file to hand over)");
  add->add_option("name", add_.name, "user name")->required()->check(CheckName);
  add->callback([this] { Add(); });
  CLI::App* rm = user->add_subcommand("rm", "revoke NAME's token (within a second)");
  rm->add_option("name", rm_.name, "user name")->required()->check(CheckName);
  rm->callback([this] { Remove(); });
  user->add_subcommand("ls", "list users with a token")->callback([this] { List(); });
}

void UserCommands::Add() {
  DataDir dir = DataDir::FromEnvironment();
  std::string path = dir.user_token_path(add_.name);
  if (absl::Status s = MakeDirs(dir.users_dir(), 0700); !s.ok()) {
    rc_ = Fail(s);
    return;
  }
  if (::access(path.c_str(), F_OK) == 0) {
    rc_ = Fail(
        absl::AlreadyExistsError(absl::StrCat("user ", add_.name, " already has a token: ", path)));
    return;
  }
  if (absl::Status s = WriteFileAtomic(path, NewToken() + "\n", 0600); !s.ok()) {
    rc_ = Fail(s);
    return;
  }
  std::printf("%s\n", path.c_str());
  std::fprintf(stderr,
               "hand this file to %s privately; they set HPO_SERVER=HOST:PORT and "
               "HPO_TOKEN_FILE=<their copy>, and see only their own sweeps\n",
               add_.name.c_str());
}

void UserCommands::Remove() {
  std::string path = DataDir::FromEnvironment().user_token_path(rm_.name);
  if (::unlink(path.c_str()) != 0) {
    rc_ = Fail(absl::NotFoundError(absl::StrCat("no token for user ", rm_.name, " (", path, ")")));
  }
}

void UserCommands::List() {
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& e :
       std::filesystem::directory_iterator(DataDir::FromEnvironment().users_dir(), ec)) {
    if (e.path().extension() == layout::kUserTokenSuffix) names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  for (const auto& n : names) std::printf("%s\n", n.c_str());
}

}  // namespace hpo::client::cli
