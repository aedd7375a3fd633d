#pragma once
// For backend contract harnesses whose trials are real processes under hpo-shim (local, Slurm
// steps): a temp directory of their own, each trial's directory and the identity a restarted
// backend finds it by, and its shim, to watch and to signal. What still runs of them is killed,
// and the directory removed, at the end.

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <set>
#include <string>

#include "backend/process.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "tests/unit/backend/backend_contract.h"

namespace hpo::backend::contract {

class ProcessTrials {
 public:
  ProcessTrials() {
    char tmpl[] = "/tmp/hpo-contract-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  ~ProcessTrials() {
    for (int64_t id : made_) Kill(id, SIGKILL);
    std::system(("rm -rf " + dir_).c_str());
  }
  ProcessTrials(const ProcessTrials&) = delete;
  ProcessTrials& operator=(const ProcessTrials&) = delete;

  const std::string& dir() const { return dir_; }
  std::string TrialDir(int64_t id) const { return dir_ + "/t" + std::to_string(id); }
  // A trial of sweep 1 that runs `command` under sh in its own directory.
  LaunchSpec Spec(int64_t id, const std::string& command) {
    LaunchSpec s;
    s.trial_id = id;
    s.sweep_id = 1;
    s.workdir = dir_;
    s.trial_dir = TrialDir(id);
    EXPECT_TRUE(MakeDirs(s.trial_dir).ok());
    s.env["HPO_TRIAL_ID"] = std::to_string(id);
    s.env["HPO_TRIAL_DIR"] = s.trial_dir;
    s.argv = {"sh", "-c", command};
    made_.insert(id);
    return s;
  }
  // The command of a trial that exits 3 a moment after it started, or that runs until stopped.
  static std::string Command(Does does) {
    return does == Does::kExits3 ? "sleep 0.3; exit 3" : "exec sleep 600";
  }
  // Its shim, by the pid the shim recorded, or by its environment until it has.
  pid_t Shim(int64_t id) const {
    pid_t pid = ReadShimPid(TrialDir(id));
    return pid != 0 ? pid : FindTrialProcess(id, TrialDir(id));
  }
  bool Runs(int64_t id) const { return IsTrialProcess(Shim(id), id); }
  // `signal` to the trial's whole process group, if it still runs.
  void Kill(int64_t id, int signal) const {
    pid_t pid = Shim(id);
    if (IsTrialProcess(pid, id)) ::kill(-pid, signal);
  }

 private:
  std::string dir_;
  std::set<int64_t> made_;
};

}  // namespace hpo::backend::contract
