#pragma once
// `hpo report|exec`: inside a trial, pushing its metrics to hpod (HPO_ENDPOINT, HPO_TRIAL_ID
// and HPO_TRIAL_TOKEN in the environment).

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace hpo::client::cli {

class TrialSideCommands {
 public:
  TrialSideCommands(CLI::App& app, int& rc);

 private:
  struct ReportOptions {
    int64_t step = -1;
    std::vector<std::string> metrics;  // name=value
    bool deliver = false;              // be the trial's sender (started by `hpo report`)
    std::vector<std::string> lines;    // --deliver: reports no journal keeps, as journal lines
    int64_t trial_group = 0;           // --deliver: the trial's process group (0: not known)
  };
  struct ExecOptions {
    std::vector<std::string> command;
    std::string metric, regex;
  };

  int& rc_;
  ReportOptions report_;
  ExecOptions exec_;
};

// The two commands' work, with their exit codes.
int Report(int64_t step, const std::vector<std::string>& pairs);
// `hpo report --deliver`: the trial's sender, in the background (ReportSender).
int DeliverReports(const std::vector<std::string>& lines, pid_t trial_group);
int Exec(std::vector<std::string> cmd, std::string metric, std::string regex_text);

}  // namespace hpo::client::cli
