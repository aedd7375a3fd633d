#include "backend/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend/shim_signals.h"
#include "common/layout.h"

extern char** environ;

namespace hpo::backend {
namespace {

// argv / envp as the C arrays execvpe wants, built before fork.
struct CStrings {
  std::vector<std::string> storage;
  std::vector<char*> ptrs;
  char** data() {
    ptrs.clear();
    for (auto& s : storage) ptrs.push_back(s.data());
    ptrs.push_back(nullptr);
    return ptrs.data();
  }
};

CStrings BuildEnv(const SpawnSpec& spec) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == absl::string_view::npos) continue;
    absl::string_view key = kv.substr(0, eq);
    if (spec.inherit && !spec.inherit(key)) continue;
    env[std::string(key)] = std::string(kv.substr(eq + 1));
  }
  for (const auto& [k, v] : spec.env) env[k] = v;
  CStrings out;
  for (const auto& [k, v] : env) out.storage.push_back(k + "=" + v);
  return out;
}

}  // namespace

absl::StatusOr<Spawned> Spawn(const SpawnSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("empty command");
  CStrings envp = BuildEnv(spec);
  CStrings argv;
  if (!spec.shim.empty()) argv.storage = {spec.shim, spec.shim_dir, "--"};
  argv.storage.insert(argv.storage.end(), spec.argv.begin(), spec.argv.end());
  // posix_spawn (clone with CLONE_VFORK in glibc) instead of fork: it does not copy the
  // daemon's page tables, which matters for launch latency, and reports exec failures itself.
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, spec.stdout_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, spec.stderr_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addchdir_np(&actions, spec.workdir.c_str());
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  // The shim starts with the signals it outlives blocked, and unblocks them once it can pass
  // them on (hpo_shim.cc); a bare command starts with none blocked.
  if (!spec.shim.empty()) AddShimSignals(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  int err =
      ::posix_spawnp(&pid, argv.storage[0].c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  Spawned out;
  if (err == 0) {
    out.pid = pid;
    return out;
  }
  // The logs or the working directory failed as well as exec itself; tell them apart.
  for (const std::string* path : {&spec.stdout_path, &spec.stderr_path}) {
    int fd = ::open(path->c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot open the log ", *path, ": ", std::strerror(errno)));
    }
    ::close(fd);
  }
  if (err == EAGAIN || err == ENOMEM) {
    return absl::UnavailableError(absl::StrCat("cannot start a process: ", std::strerror(err)));
  }
  out.exec_errno = err;  // no child is left
  return out;
}

ExitRecord FromWaitStatus(int wait_status) {
  ExitRecord r;
  if (WIFEXITED(wait_status)) {
    r.exit_code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    r.exit_code = -1;
    r.term_signal = WTERMSIG(wait_status);
  }
  return r;
}

namespace {
std::optional<std::string> ReadSmallFile(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0 && out.size() < (1 << 20)) out.append(buf, n);
  std::fclose(f);
  return out;
}
}  // namespace

std::optional<ExitRecord> ReadExitRecord(const std::string& dir, int segment) {
  std::optional<std::string> text = ReadSmallFile(layout::TrialDir(dir).shim_exit());
  if (!text) return std::nullopt;
  char kind[16] = {0};
  int value = 0;
  int recorded = 1;  // "exit 0" alone: the first segment's
  int fields = std::sscanf(text->c_str(), "%15s %d segment %d", kind, &value, &recorded);
  if (fields < 2 || recorded != segment) return std::nullopt;
  ExitRecord r;
  if (std::strcmp(kind, "exit") == 0) {
    r.exit_code = value;
  } else if (std::strcmp(kind, "signal") == 0) {
    r.exit_code = -1;
    r.term_signal = value;
  } else if (std::strcmp(kind, "exec") == 0) {
    r.exit_code = 127;
    r.exec_errno = value;
  } else {
    return std::nullopt;
  }
  return r;
}

pid_t ReadShimPid(const std::string& dir) {
  std::optional<std::string> text = ReadSmallFile(layout::TrialDir(dir).shim_pid());
  int pid = 0;
  if (!text || std::sscanf(text->c_str(), "%d", &pid) != 1 || pid <= 1) return 0;
  return pid;
}

namespace {

// From /proc/PID/stat: whether `pid` is alive (neither a zombie nor gone), and whether it is a
// kernel thread (which has no environment at all).
struct ProcState {
  bool alive = false;
  bool kernel_thread = false;
};
ProcState ReadProcState(pid_t pid) {
  ProcState out;
  std::optional<std::string> stat = ReadSmallFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat) return out;
  size_t paren = stat->rfind(')');  // the state follows the command name, which may hold anything
  if (paren == std::string::npos || paren + 2 >= stat->size()) return out;
  char state = (*stat)[paren + 2];
  out.alive = state != 'Z' && state != 'X';
  // After the state: ppid pgrp session tty_nr tpgid flags.
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(*stat).substr(paren + 2), ' ', absl::SkipEmpty());
  unsigned long flags = 0;
  constexpr unsigned long kKernelThread = 0x00200000;  // PF_KTHREAD
  if (fields.size() > 6 && absl::SimpleAtoi(fields[6], &flags))
    out.kernel_thread = (flags & kKernelThread) != 0;
  return out;
}

// The environment of a live process. A process between posix_spawn's return and the end of its
// exec reads as an empty environment for a moment (the kernel sets it up after it lets the parent
// go on): wait that out, so a trial started a moment ago is not taken for a vanished one.
std::optional<std::string> ReadEnviron(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/environ");
  for (int tries = 0;; ++tries) {
    std::optional<std::string> env = ReadSmallFile(path);
    if (!env || !env->empty() || tries == 200) return env;
    ProcState st = ReadProcState(pid);
    if (!st.alive || st.kernel_thread) return env;
    ::usleep(1000);
  }
}

}  // namespace

bool IsTrialProcess(pid_t pid, int64_t trial_id) {
  if (pid <= 1 || !ReadProcState(pid).alive) return false;
  std::optional<std::string> env = ReadEnviron(pid);
  if (!env) return false;
  std::string needle = absl::StrCat("HPO_TRIAL_ID=", trial_id);
  for (absl::string_view var : absl::StrSplit(*env, '\0')) {
    if (var == needle) return true;
  }
  return false;
}

pid_t FindTrialProcess(int64_t trial_id, const std::string& trial_dir) {
  std::string id = absl::StrCat("HPO_TRIAL_ID=", trial_id);
  std::string dir = absl::StrCat("HPO_TRIAL_DIR=", trial_dir);
  std::error_code ec;
  pid_t found = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid) || pid <= 1) continue;
    std::optional<std::string> env = ReadEnviron(pid);
    if (!env) continue;
    bool has_id = false, has_dir = false;
    for (absl::string_view var : absl::StrSplit(*env, '\0')) {
      has_id |= var == id;
      has_dir |= var == dir;
    }
    if (!has_id || !has_dir || !IsTrialProcess(pid, trial_id)) continue;
    // The trial's session leader (hpo-shim) is the one to watch; else the oldest found.
    if (::getsid(pid) == pid) return pid;
    if (found == 0 || pid < found) found = pid;
  }
  return found;
}

std::vector<std::string> ProcessArgv(pid_t pid) {
  std::optional<std::string> text = ReadSmallFile(absl::StrCat("/proc/", pid, "/cmdline"));
  if (!text) return {};
  return absl::StrSplit(*text, '\0', absl::SkipEmpty());
}

TrialProcess::State TrialProcess::Check(ExitRecord* outcome) const {
  if (!adopted) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == 0) return State::kRunning;
    if (r == pid) {
      *outcome = FromWaitStatus(status);
      if (std::optional<ExitRecord> shim = ReadExitRecord(dir, segment);
          shim && shim->exec_errno != 0) {
        outcome->exec_errno = shim->exec_errno;
      }
      return State::kEnded;
    }
    // Not (or no longer) a child of ours: fall through to what the shim wrote down.
  } else if (IsTrialProcess(pid, trial_id)) {
    return State::kRunning;
  }
  if (std::optional<ExitRecord> shim = ReadExitRecord(dir, segment)) {
    *outcome = *shim;
    return State::kEnded;
  }
  return State::kVanished;
}

ChildWatcher::ChildWatcher() {
  event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ >= 0) thread_ = std::thread([this] { Loop(); });
}

ChildWatcher::~ChildWatcher() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  if (event_fd_ >= 0) {
    uint64_t one = 1;
    ssize_t ignored = ::write(event_fd_, &one, sizeof(one));
    (void)ignored;
  }
  if (thread_.joinable()) thread_.join();
  for (auto& [pid, fd] : pidfds_) ::close(fd);
  if (event_fd_ >= 0) ::close(event_fd_);
}

void ChildWatcher::SetWakeup(std::function<void()> wake) {
  std::lock_guard lock(wake_mu_);  // once this returns, the old function is not running
  wake_ = std::move(wake);
}

void ChildWatcher::Watch(pid_t pid) {
  if (event_fd_ < 0) return;
  // (glibc 2.36 declares pidfd_open without extern "C"; the system call is the same.)
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return;
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  {
    std::lock_guard lock(mu_);
    pidfds_[pid] = fd;
  }
  uint64_t one = 1;
  ssize_t ignored = ::write(event_fd_, &one, sizeof(one));
  (void)ignored;
}

void ChildWatcher::Loop() {
  std::vector<pollfd> fds;
  std::vector<pid_t> pids;
  while (true) {
    fds.clear();
    pids.clear();
    fds.push_back({event_fd_, POLLIN, 0});
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      for (auto& [pid, fd] : pidfds_) {
        fds.push_back({fd, POLLIN, 0});
        pids.push_back(pid);
      }
    }
    int n = ::poll(fds.data(), fds.size(), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) {
      uint64_t drained;
      ssize_t ignored = ::read(event_fd_, &drained, sizeof(drained));
      (void)ignored;
    }
    bool ended = false;
    {
      std::lock_guard lock(mu_);
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        ::close(fds[i].fd);
        pidfds_.erase(pids[i - 1]);
        ended = true;
      }
    }
    if (ended) {
      std::lock_guard lock(wake_mu_);
      if (wake_) wake_();
    }
  }
}

}  // namespace hpo::backend
