#pragma once
// Starting trial processes, and noticing at once when they end.
//
// Spawn starts one command (posix_spawnp) in its own session with stdin from /dev/null and
// stdout / stderr appended to two log files; an exec failure (or a missing working directory) is
// reported as exec_errno, with no child left, instead of looking like an exit 127. ChildWatcher watches children through pidfds on one thread of its own and
// calls a wake-up function when one ends, so the controller reaps it without waiting for its
// next tick.
//
// Thread safety: Spawn is reentrant. ChildWatcher: Watch and SetWakeup are thread-safe.

#include <sys/types.h>

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hpo::backend {

struct SpawnSpec {
  std::vector<std::string> argv;           // argv[0] is looked up in PATH
  std::map<std::string, std::string> env;  // on top of the daemon's environment
  // Which of the daemon's variables the child inherits (all when unset).
  std::function<bool(absl::string_view key)> inherit;
  std::string workdir;
  std::string stdout_path, stderr_path;    // opened for appending
};

struct Spawned {
  pid_t pid = 0;
  int exec_errno = 0;  // not 0: the command could not be started; pid is 0
};

// UNAVAILABLE when the logs cannot be opened or fork fails.
absl::StatusOr<Spawned> Spawn(const SpawnSpec& spec);

class ChildWatcher {
 public:
  ChildWatcher();
  ~ChildWatcher();
  ChildWatcher(const ChildWatcher&) = delete;
  ChildWatcher& operator=(const ChildWatcher&) = delete;

  void SetWakeup(std::function<void()> wake);
  // Calls the wake-up function once `pid` (a child of this process) has ended. Without pidfd
  // support this does nothing, and the child is noticed at the next tick.
  void Watch(pid_t pid);

 private:
  void Loop();
  std::mutex wake_mu_;
  std::function<void()> wake_;   // guarded by wake_mu_, and called under it
  std::mutex mu_;
  std::map<pid_t, int> pidfds_;  // guarded by mu_
  bool stopping_ = false;        // guarded by mu_
  int event_fd_ = -1;
  std::thread thread_;
};

}  // namespace hpo::backend
