#pragma once
// `hpo ask|tell`: trials of a sweep with `backend: external`, which something else launches.

#include <string>

#include "CLI/CLI.hpp"

namespace hpo::client::cli {

class ExternalCommands {
 public:
  ExternalCommands(CLI::App& app, int& rc);

 private:
  struct AskOptions {
    int64_t sweep = 0;
  };
  struct TellOptions {
    int64_t trial = 0;
    std::string state, message;
  };
  void Ask();
  void Tell();

  int& rc_;
  AskOptions ask_;
  TellOptions tell_;
};

}  // namespace hpo::client::cli
