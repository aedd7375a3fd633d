#pragma once
// `hpo user add|rm|ls`: the owner of a shared daemon gives other users tokens (files in the data
// directory; see server/auth.h). A user sees and acts on only the sweeps they submitted.

#include <string>

#include "CLI/CLI.hpp"

namespace hpo::client::cli {

class UserCommands {
 public:
  UserCommands(CLI::App& app, int& rc);

 private:
  struct UserOptions {
    std::string name;
  };
  void Add();
  void Remove();
  void List();

  int& rc_;
  UserOptions add_, rm_;
};

}  // namespace hpo::client::cli
