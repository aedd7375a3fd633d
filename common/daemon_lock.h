#pragma once
// DaemonLock: one hpod per data directory, also when the directory is shared between hosts
// (hpod run as a Slurm job moves from node to node over a network file system).
//
// The lock file (DATA_DIR/hpod.lock) is held with flock while hpod runs, which keeps a second
// hpod of the same host out (and of other hosts where the file system carries flock across
// them). Since not every network file system does (Lustre without its flock mount option), the
// file also says who holds it, "<host> <pid> <job or -> <unix seconds>", and the holder writes
// the time again every kBeat. Another host's hpod takes the store only once that time is older
// than kStale, when the holder is surely gone; a clean exit empties the file at once. Clocks of
// the cluster's hosts are taken to agree within seconds (NTP).
//
// Thread safety: the beat runs on a thread of its own; the object is otherwise used from one.
// Errors: FAILED_PRECONDITION naming the holder when another hpod holds the lock; UNAVAILABLE
// when the file cannot be opened or written.

#include <condition_variable>
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
  std::string job;  // the Slurm job hpod runs as, or ""
  absl::Time seen;  // the holder's last beat
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

  // Takes the lock at `path` for this process (`host`: this host's name; `job`: its Slurm job,
  // or ""), and starts beating.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DaemonLock>> Acquire(const std::string& path,
                                                                           const std::string& host,
                                                                           const std::string& job);
  // Stops beating and empties the file: the lock is free at once.
  ~DaemonLock();
  DaemonLock(const DaemonLock&) = delete;
  DaemonLock& operator=(const DaemonLock&) = delete;

  // The holder this lock replaced after it went silent, if any (for the log).
  const std::optional<LockHolder>& replaced() const { return replaced_; }

 private:
  DaemonLock(int fd, std::string host, std::string job);
  absl::Status Write();
  void Beat();

  int fd_;
  std::string host_, job_;
  std::optional<LockHolder> replaced_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread beat_;
};

}  // namespace hpo
