#pragma once
// TrialFiles: what hpod does on the sweeps file system — making trial directories before their
// trials launch, and reading the end of a trial's logs. On a cluster that file system is often a
// shared one (Lustre, NFS) whose metadata operations can take seconds under load; behind this
// seam they run on a thread of their own, so a slow file system delays a launch or a log read,
// never the controller's batches (and so never a report). The controller asks for the
// directories of a sweep's next trials ahead of time, so that a trial usually finds its own
// made when it is created.
//
// Thread safety: Prepare, Poll and Health are called from the controller's thread; Tail from
// any thread; its callback runs on the seam's thread. SetWakeup's function is called from the
// seam's thread whenever Poll has news.
// Errors: a directory that cannot be made for lack of room or a read-only file system
// (UNAVAILABLE) is not reported: Health() says so, and the seam tries again every second until
// it succeeds. Any other failure comes back from Poll with the directory.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/report_journal.h"

namespace hpo::server {

class TrialFiles {
 public:
  struct Prepared {
    std::string dir;
    absl::Status status;  // OK: the directory exists
  };
  struct LogTail {
    std::string data;
    bool truncated = false;  // the file is longer than what was read
    bool missing = false;    // there is no such file (yet)
  };
  // The reports a trial left in its journal past the cursor (report_journal.h), read when it
  // ended: those hpod may not have yet.
  struct JournalRead {
    int64_t trial_id = 0;
    absl::StatusOr<std::vector<JournalEntry>> entries;
    // The last line the trial wrote to its standard error ("" when none): what a failure
    // usually says, read with the journal.
    std::string last_error_line;
    std::string error_tail;  // the last 16 KiB of its stderr (failure rules search it)
  };
  using TailDone = std::function<void(absl::StatusOr<LogTail>)>;
  using RemoveDone = std::function<void(absl::Status)>;

  virtual ~TrialFiles() = default;
  // Makes `dir` and its parents.
  virtual void Prepare(std::string dir) = 0;
  // The Prepare calls finished since the last call.
  virtual std::vector<Prepared> Poll() = 0;
  // OK, or UNAVAILABLE with the cause while a directory cannot be made (full, read-only).
  [[nodiscard]] virtual absl::Status Health() const = 0;
  // Reads at most `max_bytes` of the end of `path`, then calls `done`.
  virtual void Tail(std::string path, int64_t max_bytes, TailDone done) = 0;
  // Removes each directory with everything in it (`hpo rm`), then calls `done`.
  virtual void Remove(std::vector<std::string> dirs, RemoveDone done) = 0;
  // Reads the journal of trial `trial_id` in `trial_dir`; the outcome is in a later
  // PollJournals.
  virtual void ReadJournal(int64_t trial_id, std::string trial_dir) = 0;
  virtual std::vector<JournalRead> PollJournals() = 0;
  virtual void SetWakeup(std::function<void()> wake) = 0;
};

// The real seam: one thread of its own.
class ThreadedTrialFiles final : public TrialFiles {
 public:
  ThreadedTrialFiles();
  ~ThreadedTrialFiles() override;  // finishes what was asked, then joins the thread

  void Prepare(std::string dir) override;
  std::vector<Prepared> Poll() override;
  [[nodiscard]] absl::Status Health() const override;
  void Tail(std::string path, int64_t max_bytes, TailDone done) override;
  void Remove(std::vector<std::string> dirs, RemoveDone done) override;
  void ReadJournal(int64_t trial_id, std::string trial_dir) override;
  std::vector<JournalRead> PollJournals() override;
  void SetWakeup(std::function<void()> wake) override;

 private:
  struct Job {
    std::string dir;   // Prepare
    std::string path;  // Tail
    int64_t max_bytes = 0;
    TailDone done;
    std::vector<std::string> remove;  // Remove
    RemoveDone removed;
    int64_t journal_of = 0;  // ReadJournal: the trial (its directory in `dir`)
  };
  void Loop();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<Job> waiting_ ABSL_GUARDED_BY(mu_);  // Prepare jobs that met a full disk
  std::vector<Prepared> done_ ABSL_GUARDED_BY(mu_);
  std::vector<JournalRead> journals_ ABSL_GUARDED_BY(mu_);
  absl::Status health_ ABSL_GUARDED_BY(mu_);
  std::function<void()> wake_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// The work itself, shared by every TrialFiles: makes the directory and its parents.
[[nodiscard]] absl::Status PrepareTrialDir(const std::string& dir);
// Removes the directories and what is in them; one that is not there is no error.
[[nodiscard]] absl::Status RemoveTrees(const std::vector<std::string>& dirs);
// The reports past the cursor of the journal in `trial_dir` (none when it has no journal).
[[nodiscard]] absl::StatusOr<std::vector<JournalEntry>> ReadUnsentReports(
    const std::string& trial_dir);
// What a trial left when it ended: its journal's unsent reports and its stderr's last line.
[[nodiscard]] TrialFiles::JournalRead ReadTrialEnd(int64_t trial_id, const std::string& trial_dir);
// Reads the end of a log; a missing file is an empty tail with `missing` set.
[[nodiscard]] absl::StatusOr<TrialFiles::LogTail> ReadLogTail(const std::string& path,
                                                              int64_t max_bytes);

}  // namespace hpo::server
