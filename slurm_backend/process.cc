#include "slurm_backend/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

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
  argv.storage = spec.argv;
  int out_fd = ::open(spec.stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int err_fd = ::open(spec.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int pipe_fds[2] = {-1, -1};
  bool io_ok = out_fd >= 0 && err_fd >= 0 && null_fd >= 0 && ::pipe2(pipe_fds, O_CLOEXEC) == 0;
  auto close_all = [&] {
    for (int fd : {out_fd, err_fd, null_fd, pipe_fds[0], pipe_fds[1]}) {
      if (fd >= 0) ::close(fd);
    }
  };
  if (!io_ok) {
    int err = errno;
    close_all();
    return absl::UnavailableError(absl::StrCat("cannot open the logs ", spec.stdout_path, " / ",
                                               spec.stderr_path, ": ", std::strerror(err)));
  }
  char** c_argv = argv.data();
  char** c_envp = envp.data();
  const char* workdir = spec.workdir.c_str();
  pid_t pid = ::fork();
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    ::setsid();
    ::dup2(null_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (::chdir(workdir) == 0) ::execvpe(c_argv[0], c_argv, c_envp);
    int err = errno;
    ssize_t ignored = ::write(pipe_fds[1], &err, sizeof(err));
    (void)ignored;
    ::_exit(127);
  }
  int fork_errno = errno;
  ::close(pipe_fds[1]);
  pipe_fds[1] = -1;
  if (pid < 0) {
    close_all();
    return absl::UnavailableError(absl::StrCat("fork failed: ", std::strerror(fork_errno)));
  }
  Spawned out;
  out.pid = pid;
  ssize_t n;
  do {
    n = ::read(pipe_fds[0], &out.exec_errno, sizeof(out.exec_errno));
  } while (n < 0 && errno == EINTR);
  if (n != sizeof(out.exec_errno)) out.exec_errno = 0;
  close_all();
  return out;
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
