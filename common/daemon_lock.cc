#include "common/daemon_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/address.h"
#include "common/files.h"

namespace hpo {
namespace {

std::string Describe(const LockHolder& h, absl::Time now) {
  return absl::StrCat("hpod on ", h.host, " (pid ", h.pid, h.job.empty() ? "" : ", Slurm job ",
                      h.job, "), last seen ",
                      absl::FormatDuration(absl::Trunc(now - h.seen, absl::Seconds(1))), " ago");
}

std::string ReadAll(int fd) {
  std::string text;
  char buf[512];
  ssize_t n;
  off_t at = 0;
  while ((n = ::pread(fd, buf, sizeof buf, at)) > 0) {
    text.append(buf, static_cast<size_t>(n));
    at += n;
  }
  return text;
}

}  // namespace

std::optional<LockHolder> ParseLockHolder(const std::string& text) {
  std::vector<std::string> f = absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  LockHolder h;
  int64_t seen = 0;
  if (f.size() != 4 || !absl::SimpleAtoi(f[1], &h.pid) || !absl::SimpleAtoi(f[3], &seen)) {
    return std::nullopt;
  }
  h.host = f[0];
  h.job = f[2] == "-" ? "" : f[2];
  h.seen = absl::FromUnixSeconds(seen);
  return h;
}

bool GoneFromThisHost(const LockHolder& holder) {
  return holder.host == HostName() && ::kill(holder.pid, 0) != 0 && errno == ESRCH;
}

std::optional<LockHolder> NamedLockHolder(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return std::nullopt;
  return ParseLockHolder(*text);
}

std::optional<LockHolder> LiveLockHolder(const std::string& path) {
  std::optional<LockHolder> holder = NamedLockHolder(path);
  if (!holder || holder->seen + DaemonLock::kStale <= absl::Now() || GoneFromThisHost(*holder)) {
    return std::nullopt;
  }
  return holder;
}

absl::StatusOr<std::unique_ptr<DaemonLock>> DaemonLock::Acquire(const std::string& path,
                                                                const std::string& host,
                                                                const std::string& job) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno),
                                               " (hpod needs a writable data directory)"));
  }
  std::string dir = path.substr(0, path.rfind('/'));
  absl::Time now = absl::Now();
  std::optional<LockHolder> holder = ParseLockHolder(ReadAll(fd));
  bool flocked = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  if (!flocked) {
    // A file system without flock (Lustre without its flock mount option) says so; then the
    // holder the file names decides alone.
    if (errno != ENOSYS && errno != EOPNOTSUPP && errno != ENOLCK) {
      ::close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat("another hpod already runs for ", dir,
                       holder ? absl::StrCat(": ", Describe(*holder, now)) : ""));
    }
  }
  bool alive_here = !flocked && holder && holder->pid != ::getpid() && ::kill(holder->pid, 0) == 0;
  if (holder && holder->seen + kStale > now && (holder->host != host || alive_here)) {
    // Another host's hpod that beat lately (a flock that does not reach across hosts let this
    // one through), or one of this host whose lock the file system could not enforce. (Of this
    // host, with flock, the holder is gone: its lock went with it.)
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("another hpod already runs for ", dir, ": ", Describe(*holder, now),
                     "; stop it first (a holder that died frees the lock ",
                     absl::FormatDuration(kStale), " after its last beat)"));
  }
  std::unique_ptr<DaemonLock> lock(new DaemonLock(fd, host, job));
  if (holder && (holder->host != host || holder->pid != ::getpid())) lock->replaced_ = holder;
  if (absl::Status s = lock->Write(); !s.ok()) return s;
  lock->beat_ = std::thread([raw = lock.get()] { raw->Beat(); });
  return lock;
}

DaemonLock::DaemonLock(int fd, std::string host, std::string job)
    : fd_(fd), host_(std::move(host)), job_(std::move(job)) {}

DaemonLock::~DaemonLock() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (beat_.joinable()) beat_.join();
  (void)::ftruncate(fd_, 0);
  ::close(fd_);  // and the flock goes with it
}

absl::Status DaemonLock::Write() {
  std::string text = absl::StrCat(host_, " ", ::getpid(), " ", job_.empty() ? "-" : job_, " ",
                                  absl::ToUnixSeconds(absl::Now()), "\n");
  // In place: the flock is on this file, so it is never replaced by a rename.
  if (::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
      ::ftruncate(fd_, static_cast<off_t>(text.size())) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot write the lock file: ", std::strerror(errno)));
  }
  (void)::fdatasync(fd_);
  return absl::OkStatus();
}

void DaemonLock::Beat() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, absl::ToChronoSeconds(kBeat), [this] { return stopping_; })) {
    (void)Write();
  }
}

}  // namespace hpo
