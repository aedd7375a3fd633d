#pragma once
// `hpo watch|wait`: following a sweep's event stream until it ends.

#include <string>

#include "CLI/CLI.hpp"

namespace hpo::client::cli {

// The live table of a sweep until it ends (in place on a terminal, periodic lines otherwise),
// then the final table. Returns the exit code.
int WatchSweep(int64_t sweep_id, double interval_s, const std::string& sort);

class WatchCommands {
 public:
  WatchCommands(CLI::App& app, int& rc);

 private:
  struct WatchOptions {
    int64_t sweep = 0;
    double interval = 0.5;
    std::string sort = "objective";
  };
  struct WaitOptions {
    int64_t sweep = 0;
    double timeout = 0;
  };
  void Wait();

  int& rc_;
  WatchOptions watch_;
  WaitOptions wait_;
};

}  // namespace hpo::client::cli
