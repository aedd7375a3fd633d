#include "common/daemon_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/address.h"
#include "common/files.h"
#include "common/token.h"

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
  if ((f.size() != 4 && f.size() != 5) || !absl::SimpleAtoi(f[1], &h.pid) ||
      !absl::SimpleAtoi(f[3], &seen)) {
    return std::nullopt;
  }
  h.host = f[0];
  h.job = f[2] == "-" ? "" : f[2];
  h.seen = absl::FromUnixSeconds(seen);
  if (f.size() == 5) h.mark = f[4];
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
                                                                const std::string& job,
                                                                const Options& options) {
  std::string dir = path.substr(0, path.rfind('/'));
  std::string mark = RandomHex(8);
  auto cannot = [&](const std::string& what) {
    return absl::UnavailableError(absl::StrCat("cannot ", what, " ", path, ": ",
                                               std::strerror(errno),
                                               " (hpod needs a writable data directory)"));
  };
  // A file of this hpod's own, written before anyone can see it.
  std::string mine = absl::StrCat(path, ".", mark);
  int fd = ::open(mine.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return cannot("make a lock file beside");
  (void)::flock(fd, LOCK_EX | LOCK_NB);
  std::unique_ptr<DaemonLock> lock(new DaemonLock(fd, path, host, job, mark, options));
  if (absl::Status s = lock->Write(); !s.ok()) {
    ::unlink(mine.c_str());
    return s;
  }
  // A free data directory has no lock file: linked into place (link(2) fails where the name is
  // taken, atomically also on NFS), it is this hpod's alone.
  bool linked = ::link(mine.c_str(), path.c_str()) == 0;
  if (!linked && errno != EEXIST) {
    struct stat st {};
    linked = ::fstat(fd, &st) == 0 && st.st_nlink == 2;  // NFS: done, though the reply was lost
  }
  if (linked) {
    ::unlink(mine.c_str());
    lock->beat_ = std::thread([raw = lock.get()] { raw->Beat(); });
    return lock;
  }
  // Taken: who holds it, and may it be taken over?
  auto refuse = [&](absl::Status why) {
    lock->fd_ = -1;
    ::close(fd);
    ::unlink(mine.c_str());
    return why;
  };
  int old = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (old < 0) {
    int err = errno;
    refuse(absl::OkStatus()).IgnoreError();
    if (err == ENOENT) return Acquire(path, host, job, options);  // freed meanwhile
    errno = err;
    return cannot("open");
  }
  absl::Time now = absl::Now();
  std::optional<LockHolder> holder = ParseLockHolder(ReadAll(old));
  if (::flock(old, LOCK_EX | LOCK_NB) != 0 && errno != ENOSYS && errno != EOPNOTSUPP &&
      errno != ENOLCK) {
    // Held here (or where the file system carries flock across hosts).
    ::close(old);
    return refuse(absl::FailedPreconditionError(
        absl::StrCat("another hpod already runs for ", dir,
                     holder ? absl::StrCat(": ", Describe(*holder, now)) : "")));
  }
  bool alive_here =
      holder && holder->host == host && holder->pid != ::getpid() && ::kill(holder->pid, 0) == 0;
  if (holder && ((holder->host != host && holder->seen + options.stale > now) || alive_here)) {
    // Another host's hpod that beat lately (a flock that does not reach across hosts let this
    // one through), or one of this host whose lock the file system could not enforce.
    ::close(old);
    return refuse(absl::FailedPreconditionError(
        absl::StrCat("another hpod already runs for ", dir, ": ", Describe(*holder, now),
                     "; stop it first (a holder that died frees the lock ",
                     absl::FormatDuration(options.stale), " after its last beat)")));
  }
  // Free (an older hpod emptied it), or its holder is gone: replaced by this hpod's own file, so
  // that a holder that wakes up finds itself no longer named and writes nothing more.
  absl::Status replaced = absl::OkStatus();
  if (::rename(mine.c_str(), path.c_str()) != 0) replaced = cannot("replace");
  ::close(old);  // its flock held off a taker of this host until now
  if (!replaced.ok()) {
    ::unlink(mine.c_str());
    return replaced;
  }
  // Another start may have replaced it at the same moment: the last one did.
  absl::SleepFor(options.settle);
  std::optional<LockHolder> named = NamedLockHolder(path);
  if (!named || named->mark != mark) {
    lock->fd_ = -1;  // not ours to remove
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("another hpod took over ", dir, " at the same moment",
                     named ? absl::StrCat(": ", Describe(*named, absl::Now())) : ""));
  }
  if (holder && (holder->host != host || holder->pid != ::getpid())) lock->replaced_ = holder;
  lock->beat_ = std::thread([raw = lock.get()] { raw->Beat(); });
  return lock;
}

DaemonLock::DaemonLock(int fd, std::string path, std::string host, std::string job,
                       std::string mark, Options options)
    : fd_(fd),
      path_(std::move(path)),
      host_(std::move(host)),
      job_(std::move(job)),
      mark_(std::move(mark)),
      options_(options) {}

DaemonLock::~DaemonLock() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (beat_.joinable()) beat_.join();
  if (fd_ < 0) return;
  // Free at once, unless another hpod holds it now.
  std::optional<LockHolder> named = NamedLockHolder(path_);
  if (named && named->mark == mark_) ::unlink(path_.c_str());
  ::close(fd_);  // and the flock goes with it
}

absl::Status DaemonLock::Write() {
  std::string text = absl::StrCat(host_, " ", ::getpid(), " ", job_.empty() ? "-" : job_, " ",
                                  absl::ToUnixSeconds(absl::Now()), " ", mark_, "\n");
  // In place, in this hpod's own file (a taker replaces the path, never writes into it).
  if (::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
      ::ftruncate(fd_, static_cast<off_t>(text.size())) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot write the lock file: ", std::strerror(errno)));
  }
  (void)::fdatasync(fd_);
  return absl::OkStatus();
}

void DaemonLock::OnLost(std::function<void(const std::optional<LockHolder>& now)> lost) {
  std::lock_guard lock(lost_mu_);
  lost_ = std::move(lost);
}

bool DaemonLock::StillHeld() {
  std::optional<LockHolder> named = NamedLockHolder(path_);
  if (named && named->mark == mark_) return true;
  std::function<void(const std::optional<LockHolder>&)> lost;
  {
    std::lock_guard lock(lost_mu_);
    if (!lost_called_) {
      lost_called_ = true;
      lost = lost_;
    }
  }
  if (lost) lost(named);
  return false;
}

void DaemonLock::Beat() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, absl::ToChronoMilliseconds(options_.beat),
                       [this] { return stopping_; })) {
    if (!StillHeld()) return;
    (void)Write();
  }
}

}  // namespace hpo
