#pragma once
// `hpo user add|rm|ls|role|rotate` and `hpo share`: the owner of a shared daemon gives other users
// a token and a role (files in the data directory, read by hpod within a moment; see
// server/auth/auth.h for what each role may do). Only the owner submits sweeps.

#include <string>

#include "CLI/CLI.hpp"

namespace hpo::client::cli {

class UserCommands {
 public:
  UserCommands(CLI::App& app, int& rc);

 private:
  struct UserOptions {
    std::string name;
    std::string role = "viewer";
    std::vector<int64_t> sweeps;
    bool owner = false;
    std::string max_extend_gpu_hours;  // "": unchanged; "none": no cap; else a number
  };
  struct ShareOptions {
    int64_t sweep_id = 0;
    std::string name, role;
  };
  void Add();
  void Remove();
  void List();
  void SetRole();
  void Rotate();
  void Share();

  int& rc_;
  UserOptions add_, rm_, role_, rotate_;
  ShareOptions share_;
};

}  // namespace hpo::client::cli
