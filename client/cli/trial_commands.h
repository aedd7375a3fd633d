#pragma once
// `hpo trials|best|logs|export|plot`: a sweep's trials, read.

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace hpo::client::cli {

class TrialCommands {
 public:
  TrialCommands(CLI::App& app, int& rc);

 private:
  struct TrialsOptions {
    int64_t sweep = 0;
    std::string sort = "number";
    std::vector<std::string> states;
    int limit = 0;
    bool where = false;
    bool pareto = false;
  };
  struct BestOptions {
    int64_t sweep = 0;
    bool json = false;
  };
  struct LogsOptions {
    int64_t trial = 0;
    bool stderr_log = false;
    int64_t bytes = 64 * 1024;
  };
  struct ExportOptions {
    int64_t sweep = 0;
    std::string format = "json", output;
  };
  struct PlotOptions {
    int64_t sweep = 0;
    std::string kind = "curves", output;
  };
  void Trials();
  void Best();
  void Logs();
  void Export();
  void Plot();

  int& rc_;
  TrialsOptions trials_;
  BestOptions best_;
  LogsOptions logs_;
  ExportOptions export_;
  PlotOptions plot_;
};

}  // namespace hpo::client::cli
