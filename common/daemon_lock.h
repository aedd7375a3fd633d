#pragma once
// DaemonLock: one hpod per data directory, also when the directory is shared between hosts
// (hpod run as a Slurm job moves from node to node over a network file system), and a holder
// that loses it writes nothing more.
//
// The lock file (DATA_DIR/hpod.lock) says who holds it, "<host> <pid> <job or -> <unix seconds>
// <mark>", the mark being this run's own random fencing token. A start makes the file with
// O_EXCL (atomic also on NFS), so of two that start together one gets it; a clean stop removes
// it. A file that is there already is taken only when it names nobody, or a holder of this host
// whose process is gone, or one silent for `stale` (its node died; the time is written again
// every kBeat) — and only by replacing it with a file of the taker's own (rename), never by
// writing into it, after which the taker waits `settle` and reads it again: of two takers the
// last rename wins, and the other refuses. The file is also held with flock where the file
// system carries it, which keeps a second hpod of the same host out at once.
//
// The holder reads the file again, by its path, before every beat and whenever asked
// (StillHeld; the store asks before every commit, inside the transaction): the moment it names
// another holder, the holder's lost handler runs (hpod stops at once, writing nothing more).
// Clocks of the cluster's hosts are taken to agree within seconds (NTP).
//
// Thread safety: the beat runs on a thread of its own; StillHeld may be called from any thread.
// Errors: FAILED_PRECONDITION naming the holder when another hpod holds the lock; UNAVAILABLE
// when the file cannot be made or written.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hpo {

struct LockHolder {
  std::string host;
  int pid = 0;
  std::string job;   // the Slurm job hpod runs as, or ""
  absl::Time seen;   // the holder's last beat
  std::string mark;  // its run's fencing token ("" as an older hpod wrote the file)
};

// The holder a lock file names, or nullopt for an empty (free) or unreadable one.
std::optional<LockHolder> ParseLockHolder(const std::string& text);

// The holder the lock file at `path` names, beating or not; nullopt for a free or unreadable one.
std::optional<LockHolder> NamedLockHolder(const std::string& path);

// Whether `holder` ran on this host and its process is gone (killed, or its host rebooted): its
// lock went with it, and nothing listens on the socket it left.
bool GoneFromThisHost(const LockHolder& holder);

// The hpod the lock file at `path` names while it beats (its last beat within kStale), else
// nullopt: no hpod holds the data directory, or the one named is surely gone (silent for
// kStale, or of this host and its process gone).
std::optional<LockHolder> LiveLockHolder(const std::string& path);

class DaemonLock {
 public:
  static constexpr absl::Duration kBeat = absl::Seconds(10);
  static constexpr absl::Duration kStale = absl::Seconds(45);
  static constexpr absl::Duration kSettle = absl::Seconds(1);

  struct Options {
    // How long another host's holder must have been silent before it is taken over.
    absl::Duration stale = kStale;
    // How long a taker waits before it reads the file again to see that it kept it.
    absl::Duration settle = kSettle;
    absl::Duration beat = kBeat;
  };
  // Takes the lock at `path` for this process (`host`: this host's name; `job`: its Slurm job,
  // or ""), and starts beating.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DaemonLock>> Acquire(const std::string& path,
                                                                           const std::string& host,
                                                                           const std::string& job,
                                                                           const Options& options);
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DaemonLock>> Acquire(const std::string& path,
                                                                           const std::string& host,
                                                                           const std::string& job) {
    return Acquire(path, host, job, Options());
  }
  // Stops beating and removes the file if it still names this holder: the lock is free at once.
  ~DaemonLock();
  DaemonLock(const DaemonLock&) = delete;
  DaemonLock& operator=(const DaemonLock&) = delete;

  // The holder this lock replaced after it went silent, if any (for the log).
  const std::optional<LockHolder>& replaced() const { return replaced_; }
  // This run's fencing token, as the file says it.
  const std::string& mark() const { return mark_; }

  // Runs once, on the thread that finds it (a beat, or a StillHeld), the moment the file names
  // another holder (or none): `now` is whom it names. hpod's stops the process at once.
  void OnLost(std::function<void(const std::optional<LockHolder>& now)> lost);
  // Whether the file at the path still names this holder (read anew, never from a cache); when
  // it does not, the lost handler runs first.
  bool StillHeld();

 private:
  DaemonLock(int fd, std::string path, std::string host, std::string job, std::string mark,
             Options options);
  absl::Status Write();
  void Beat();

  int fd_;
  const std::string path_, host_, job_, mark_;
  const Options options_;
  std::optional<LockHolder> replaced_;
  std::mutex lost_mu_;
  std::function<void(const std::optional<LockHolder>&)> lost_;
  bool lost_called_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread beat_;
};

}  // namespace hpo
