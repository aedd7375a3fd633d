// hpo-shim: runs one trial command and writes down how it ended, so that a restarted hpod, which
// is no longer the trial's parent, can still learn the trial's true outcome.
//
//   hpo-shim DIR -- COMMAND [ARGS...]
//
// Before starting COMMAND it removes what an earlier run of the trial (an earlier segment of a
// resumable trial) left: DIR/hpo.exit and the Slurm task records DIR/.hpo-task.*. It writes its
// own pid (the trial's process group, since hpod starts it in a session of its own) to
// DIR/hpo.pid, and $HPO_PARAMS_JSON (the trial's parameters) to DIR/params.json. When COMMAND
// ends it writes DIR/hpo.exit: "exit N", "signal N", or "exec ERRNO" when COMMAND could not be
// started, followed by " segment K" ($HPO_SEGMENT, when above 1). Then it ends the way COMMAND
// did (the same exit code, or the same signal), so its parent sees no difference.
// Signals sent to the process group reach COMMAND as usual; the shim itself survives every one it
// can catch, so that it can record the outcome. When COMMAND's first process dies of a signal
// that came to the whole group (a stop, checkpoint or health signal from hpod), the shim ends only
// once the rest of the group has: `/bin/sh -c "python train.py"` loses its shell to the signal
// at once, while python is still writing its checkpoint or its stacks. Only libc is used: it
// starts in well under a millisecond.

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/shim_signals.h"
#include "common/layout.h"
#include "common/process_group.h"

namespace {

volatile sig_atomic_t g_received = 0;  // the last signal that came to the shim (and its group)

void Note(int sig) { g_received = sig; }

bool WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// path = content, in one write(2) of a few bytes: a reader sees an empty file or all of it. No
// temporary file and rename, no fsync: the file has to outlive hpod, not the machine, and each
// costs the trial's start or end a journal commit on the trial directory's file system.
void WriteSmallFile(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || !WriteAll(fd, content)) {
    std::fprintf(stderr, "hpo-shim: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
  }
  if (fd >= 0) ::close(fd);
}

// What an earlier run of the trial left in `dir`: its exit record and its Slurm task records.
void RemoveEarlierRecords(const hpo::layout::TrialDir& dir) {
  ::unlink(dir.shim_exit().c_str());
  DIR* d = ::opendir(dir.path().c_str());
  if (d == nullptr) return;
  const size_t prefix = std::strlen(hpo::layout::kTaskRecordPrefix);
  while (const dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, hpo::layout::kTaskRecordPrefix, prefix) == 0) {
      ::unlinkat(::dirfd(d), e->d_name, 0);
    }
  }
  ::closedir(d);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::strcmp(argv[2], "--") != 0) {
    std::fprintf(stderr, "usage: hpo-shim DIR -- COMMAND [ARGS...]\n");
    return 125;
  }
  const hpo::layout::TrialDir dir(argv[1]);
  char** command = argv + 3;
  // What the trial writes is private (or its group's) wherever it runs: hpod says which.
  if (const char* bits = std::getenv(hpo::layout::kUmaskEnv); bits != nullptr && *bits != '\0') {
    ::umask(static_cast<mode_t>(std::strtoul(bits, nullptr, 8) & 0777));
  }
  // Handlers, not SIG_IGN: exec resets handled signals to their defaults in the command, while
  // ignored ones would stay ignored. Installed before fork, so no signal falls in between. hpod
  // starts the shim with these signals blocked (Spawn), so one sent before now is pending, and
  // is passed on to the command once it is forked.
  struct sigaction sa {};
  sa.sa_handler = Note;
  sigemptyset(&sa.sa_mask);
  for (int sig : hpo::backend::kShimSignals) ::sigaction(sig, &sa, nullptr);
  sigset_t held, none;
  sigemptyset(&held);
  sigemptyset(&none);
  hpo::backend::AddShimSignals(&held);
  ::sigprocmask(SIG_BLOCK, &held, nullptr);
  RemoveEarlierRecords(dir);
  WriteSmallFile(dir.shim_pid(), std::to_string(::getpid()) + "\n");
  // " segment K" after the outcome, for the segments after the first.
  std::string segment;
  if (const char* s = std::getenv("HPO_SEGMENT"); s != nullptr && std::atoi(s) > 1) {
    segment = std::string(" segment ") + std::to_string(std::atoi(s));
  }
  // The trial's parameters, for the command to read (hpod passes them in the environment).
  if (const char* params = std::getenv("HPO_PARAMS_JSON"); params != nullptr && *params != '\0') {
    WriteSmallFile(dir.params(), std::string(params) + "\n");
  }

  int pipe_fds[2];  // carries exec's errno; closed by a successful exec (O_CLOEXEC)
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "hpo-shim: pipe: %s\n", std::strerror(errno));
    return 125;
  }
  pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "hpo-shim: fork: %s\n", std::strerror(errno));
    return 125;
  }
  if (child == 0) {
    // Defaults before unblocking, so that a signal passed on before exec ends the child.
    for (int sig : hpo::backend::kShimSignals) ::signal(sig, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::close(pipe_fds[0]);
    ::execvp(command[0], command);
    int err = errno;
    ssize_t ignored = ::write(pipe_fds[1], &err, sizeof(err));
    (void)ignored;
    ::_exit(127);
  }
  // What was sent to the group before the command existed reaches it now; then the shim takes
  // its own copies (ignored) and every later one, which reach the command directly.
  sigset_t pending;
  sigemptyset(&pending);
  ::sigpending(&pending);
  for (int sig : hpo::backend::kShimSignals) {
    if (sigismember(&pending, sig) == 1) ::kill(child, sig);
  }
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::close(pipe_fds[1]);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(pipe_fds[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  ::close(pipe_fds[0]);
  if (n != static_cast<ssize_t>(sizeof(exec_errno))) exec_errno = 0;

  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      std::fprintf(stderr, "hpo-shim: waitpid: %s\n", std::strerror(errno));
      return 125;
    }
  }
  if (exec_errno != 0) {
    char cwd[4096];
    std::fprintf(stderr, "hpod: cannot run '%s' in %s: %s\n", command[0],
                 ::getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : "?", std::strerror(exec_errno));
    WriteSmallFile(dir.shim_exit(), "exec " + std::to_string(exec_errno) + segment + "\n");
    return 127;
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    // The signal came to the group: what the first process ran got it too, and is given the time
    // it takes (hpod ends the group when the signal's grace is over).
    if (sig == g_received) {
      while (hpo::ProcessGroupHasOthers(::getpgrp(), ::getpid())) ::usleep(100 * 1000);
    }
    WriteSmallFile(dir.shim_exit(), "signal " + std::to_string(sig) + segment + "\n");
    // End by the same signal; the command already dumped core if it was going to.
    struct rlimit no_core {
      0, 0
    };
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(sig);
    return 128 + sig;  // a signal whose default is to be ignored
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 125;
  WriteSmallFile(dir.shim_exit(), "exit " + std::to_string(code) + segment + "\n");
  return code;
}
