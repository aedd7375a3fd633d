#pragma once
// Starting trial processes, and noticing at once when they end.
//
// Spawn starts one command (posix_spawnp) in its own session with stdin from /dev/null and
// stdout / stderr appended to two log files; an exec failure (or a missing working directory) is
// reported as exec_errno, with no child left, instead of looking like an exit 127. ChildWatcher
// watches children through pidfds on one thread of its own and calls a wake-up function when one
// ends, so the controller reaps it without waiting for its next tick.
//
// Thread safety: Spawn is reentrant. ChildWatcher: Watch and SetWakeup are thread-safe.

#include <sys/types.h>

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hpo::backend {

struct SpawnSpec {
  std::vector<std::string> argv;           // argv[0] is looked up in PATH
  std::map<std::string, std::string> env;  // on top of the daemon's environment
  // Which of the daemon's variables the child inherits (all when unset).
  std::function<bool(absl::string_view key)> inherit;
  std::string workdir;
  std::string stdout_path, stderr_path;  // opened for appending
  // Not empty: the command runs under this hpo-shim, which records in `shim_dir` the process
  // group's pid (hpo.pid) and how the command ended (hpo.exit); see hpo_shim.cc.
  std::string shim, shim_dir;
};

struct Spawned {
  pid_t pid = 0;
  int exec_errno = 0;  // not 0: the command could not be started; pid is 0
};

// UNAVAILABLE when the logs cannot be opened or fork fails.
[[nodiscard]] absl::StatusOr<Spawned> Spawn(const SpawnSpec& spec);

// How a trial's command ended, as a wait status says or as hpo-shim wrote it down.
struct ExitRecord {
  int exit_code = 0;    // -1 when a signal ended it
  int term_signal = 0;  // the signal, 0 if none
  int exec_errno = 0;   // not 0: the command could not be started (exit_code 127)
};
ExitRecord FromWaitStatus(int wait_status);
// What hpo-shim wrote in `dir` (hpo.exit) when segment `segment` of the trial ended, or nullopt
// when it has not ended (or ran without the shim, or the record is an earlier segment's).
std::optional<ExitRecord> ReadExitRecord(const std::string& dir, int segment = 1);
// The pid hpo-shim recorded in `dir` (hpo.pid), or 0.
pid_t ReadShimPid(const std::string& dir);
// True when `pid` is alive (not a zombie) and its environment says it runs trial `trial_id`,
// i.e. the pid was not reused by something else.
bool IsTrialProcess(pid_t pid, int64_t trial_id);
// A live process of trial `trial_id` (its environment names the trial and `trial_dir`), the
// trial's session leader when there is one; 0 when none runs. For a restart that finds no pid
// recorded: hpod may have died between starting the trial and hpo-shim writing its pid.
pid_t FindTrialProcess(int64_t trial_id, const std::string& trial_dir);
// The command line of a live process, or empty.
std::vector<std::string> ProcessArgv(pid_t pid);

// A trial's process as a backend tracks it: its own child, or one it re-adopted after a restart
// (then it cannot wait for it, and hpo-shim's record in `dir` tells the outcome).
struct TrialProcess {
  pid_t pid = 0;
  int64_t trial_id = 0;
  bool adopted = false;
  std::string dir;
  int segment = 1;  // which run of the trial (a resumable trial's segment): its exit record
  enum class State { kRunning, kEnded, kVanished };
  // kEnded: `*outcome` says how; kVanished: it is gone and nothing says how it ended.
  State Check(ExitRecord* outcome) const;
};

class ChildWatcher {
 public:
  ChildWatcher();
  ~ChildWatcher();
  ChildWatcher(const ChildWatcher&) = delete;
  ChildWatcher& operator=(const ChildWatcher&) = delete;

  void SetWakeup(std::function<void()> wake);
  // Calls the wake-up function once `pid` (a child of this process, or any process it may
  // see) has ended. Without pidfd
  // support this does nothing, and the child is noticed at the next tick.
  void Watch(pid_t pid);

 private:
  void Loop();
  std::mutex wake_mu_;
  std::function<void()> wake_ ABSL_GUARDED_BY(wake_mu_);  // and called under it
  std::mutex mu_;
  std::map<pid_t, int> pidfds_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int event_fd_ = -1;
  std::thread thread_;
};

}  // namespace hpo::backend
