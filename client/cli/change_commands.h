#pragma once
// `hpo extend|enqueue|rm`: changing a sweep after it was submitted, while it runs or after it
// ended.

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace hpo::client::cli {

class ChangeCommands {
 public:
  ChangeCommands(CLI::App& app, int& rc);

 private:
  struct ExtendOptions {
    int64_t sweep = 0;
    std::string trials;     // "N" or "+N"
    std::string wall_time;  // a duration: this much more, from now
    int64_t concurrent = 0;
    std::string gpu_hours;   // "X" or "+X"
    std::string node_hours;  // "X" or "+X"
  };
  struct EnqueueOptions {
    int64_t sweep = 0;
    std::vector<std::string> values;  // name=value
  };
  struct RemoveOptions {
    int64_t sweep = 0;
    bool yes = false;
  };
  void Extend();
  void Remove();
  void Enqueue();

  int& rc_;
  ExtendOptions extend_;
  EnqueueOptions enqueue_;
  RemoveOptions rm_;
};

}  // namespace hpo::client::cli
