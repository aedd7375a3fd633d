#pragma once
// `hpo daemon start|stop|status`: the hpod of $HPO_DATA_DIR. `start` passes hpod's own options
// on, checked by hpod before it starts in the background, or (--as-job) as a Slurm job. `hpo
// dashboard`: a login link to its web dashboard.

#include <string>

#include "CLI/CLI.hpp"

namespace hpo::client::cli {

class DaemonCommands {
 public:
  DaemonCommands(CLI::App& app, int& rc);

 private:
  struct StartOptions {
    int gpus = -1, cpus = 0;
    std::string listen, tls_cert, tls_key;
    std::string as_job;  // sbatch options, split at blanks
    int wait_s = 120;    // how long --as-job waits for the job to serve
  };
  struct StopOptions {
    bool keep_trials = false;
  };
  void Start();
  void Stop();
  void Status();
  void Dashboard();

  int& rc_;
  CLI::App* start_app_ = nullptr;
  StartOptions start_;
  StopOptions stop_;
  bool open_ = false;  // hpo dashboard --open
};

}  // namespace hpo::client::cli
