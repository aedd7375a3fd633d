#pragma once
// `hpo validate|plan|submit|fork|ls|show|cancel|pause|resume|nodes`: sweeps as a whole.

#include <string>

#include "CLI/CLI.hpp"

namespace hpo::client::cli {

class SweepCommands {
 public:
  SweepCommands(CLI::App& app, int& rc);

 private:
  struct FileOptions {  // validate, submit, fork
    std::string file, name;
    bool watch = false;
    int64_t from = 0;  // fork: the sweep whose trials the new one inherits
  };
  struct ListOptions {
    bool active = false;
  };
  struct ShowOptions {
    int64_t sweep = 0;
    bool spec = false;
  };
  struct CancelOptions {
    int64_t sweep = 0;
    bool no_wait = false;
  };
  struct PauseOptions {  // pause, resume
    int64_t sweep = 0;
  };
  struct PlanOptions {
    std::string file, step_time;
    int64_t like = 0, steps = 0;
    bool pilot = false;
    int64_t pilot_trials = 3, pilot_steps = 5;
  };
  struct NodesOptions {
    int64_t sweep = 0;
    std::string allow;
  };
  void Validate();
  void Submit(const FileOptions& options);
  void List();
  void Show();
  void Cancel();
  void PauseOrResume(bool pause);
  void Nodes();
  void Plan();

  int& rc_;
  FileOptions validate_, submit_, fork_;
  ListOptions ls_;
  ShowOptions show_;
  CancelOptions cancel_;
  PauseOptions pause_, resume_;
  NodesOptions nodes_;
  PlanOptions plan_;
};

}  // namespace hpo::client::cli
