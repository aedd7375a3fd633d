#include "server/core/trial_files.h"

#include <pthread.h>

#include <chrono>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/layout.h"
#include "common/task_output.h"

namespace hpo::server {

absl::Status PrepareTrialDir(const std::string& dir) { return MakeDirs(dir, 0755); }

absl::StatusOr<std::vector<JournalEntry>> ReadUnsentReports(const std::string& trial_dir) {
  return ReportJournal(trial_dir).Unsent();
}

TrialFiles::JournalRead ReadTrialEnd(int64_t trial_id, const std::string& trial_dir) {
  TrialFiles::JournalRead read;
  read.trial_id = trial_id;
  read.entries = ReadUnsentReports(trial_dir);
  bool truncated = false;
  absl::StatusOr<std::string> tail = TailFile(trial_dir + "/" + layout::kStderr, 16384, &truncated);
  if (!tail.ok()) return read;
  read.error_tail = *tail;
  // The trial's own last word: Slurm's lines (srun's and slurmstepd's, which follow it in a
  // step's stderr, under a task's label too) are not, and a first line the tail cut is not
  // whole. In a step of several tasks whose output interleaves, the last word of the task that
  // failed first, when srun said which (common/task_output.h).
  auto own_line = [](absl::string_view line) {
    absl::string_view own = StripTaskLabel(line);
    return !line.empty() && !absl::StartsWith(own, "srun: ") &&
           !absl::StartsWith(own, "slurmstepd: ") && !absl::StartsWith(own, "slurmstepd-");
  };
  std::vector<absl::string_view> lines = absl::StrSplit(*tail, '\n');
  size_t first = truncated ? 1 : 0;
  TaskOutput by_task = SplitTaskOutput(*tail);
  std::string culprit_label;
  if (!by_task.culprit.empty() && by_task.tasks.count(*by_task.culprit.begin())) {
    culprit_label = absl::StrCat(*by_task.culprit.begin(), ": ");
  }
  for (size_t i = lines.size(); i-- > first;) {
    absl::string_view line = absl::StripAsciiWhitespace(lines[i]);
    if (!own_line(line)) continue;
    if (!culprit_label.empty() && !absl::StartsWith(line, culprit_label)) continue;
    read.last_error_line = std::string(line.substr(0, 500));
    break;
  }
  return read;
}

absl::StatusOr<TrialFiles::LogTail> ReadLogTail(const std::string& path, int64_t max_bytes) {
  TrialFiles::LogTail tail;
  absl::StatusOr<std::string> data = TailFile(path, max_bytes, &tail.truncated);
  if (absl::IsNotFound(data.status())) {
    tail.missing = true;
    return tail;
  }
  if (!data.ok()) return data.status();
  tail.data = std::move(*data);
  return tail;
}

ThreadedTrialFiles::ThreadedTrialFiles() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hpod-files");
    Loop();
  });
}

ThreadedTrialFiles::~ThreadedTrialFiles() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ThreadedTrialFiles::Prepare(std::string dir) {
  {
    std::lock_guard lock(mu_);
    Job job;
    job.dir = std::move(dir);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

std::vector<TrialFiles::Prepared> ThreadedTrialFiles::Poll() {
  std::lock_guard lock(mu_);
  std::vector<Prepared> out;
  out.swap(done_);
  return out;
}

absl::Status ThreadedTrialFiles::Health() const {
  std::lock_guard lock(mu_);
  return health_;
}

void ThreadedTrialFiles::Tail(std::string path, int64_t max_bytes, TailDone done) {
  {
    std::lock_guard lock(mu_);
    Job job;
    job.path = std::move(path);
    job.max_bytes = max_bytes;
    job.done = std::move(done);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void ThreadedTrialFiles::Remove(std::vector<std::string> dirs, RemoveDone done) {
  {
    std::lock_guard lock(mu_);
    Job job;
    job.remove = std::move(dirs);
    job.removed = std::move(done);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void ThreadedTrialFiles::ReadJournal(int64_t trial_id, std::string trial_dir) {
  {
    std::lock_guard lock(mu_);
    Job job;
    job.dir = std::move(trial_dir);
    job.journal_of = trial_id;
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

std::vector<TrialFiles::JournalRead> ThreadedTrialFiles::PollJournals() {
  std::lock_guard lock(mu_);
  std::vector<JournalRead> out;
  out.swap(journals_);
  return out;
}

void ThreadedTrialFiles::SetWakeup(std::function<void()> wake) {
  std::lock_guard lock(mu_);
  wake_ = std::move(wake);
}

void ThreadedTrialFiles::Loop() {
  std::unique_lock lock(mu_);
  auto next_retry = std::chrono::steady_clock::time_point::max();
  while (true) {
    // While a directory cannot be made for lack of room, the waiting ones are tried again
    // once a second.
    cv_.wait_until(lock,
                   waiting_.empty() ? std::chrono::steady_clock::time_point::max() : next_retry,
                   [&] { return stopping_ || !jobs_.empty(); });
    if (stopping_ && jobs_.empty()) return;
    if (!waiting_.empty() && std::chrono::steady_clock::now() >= next_retry) {
      for (Job& job : waiting_) jobs_.push_back(std::move(job));
      waiting_.clear();
    }
    bool news = false;
    while (!jobs_.empty()) {
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      if (job.done) {
        job.done(ReadLogTail(job.path, job.max_bytes));
        lock.lock();
        continue;
      }
      if (job.journal_of != 0) {
        JournalRead read = ReadTrialEnd(job.journal_of, job.dir);
        lock.lock();
        journals_.push_back(std::move(read));
        news = true;
        continue;
      }
      if (job.removed) {
        job.removed(RemoveTrees(job.remove));
        lock.lock();
        continue;
      }
      absl::Status s = PrepareTrialDir(job.dir);
      lock.lock();
      if (absl::IsUnavailable(s)) {
        health_ = s;
        if (waiting_.empty())
          next_retry = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        waiting_.push_back(std::move(job));
        continue;
      }
      if (s.ok() && waiting_.empty()) health_ = absl::OkStatus();
      done_.push_back({std::move(job.dir), std::move(s)});
      news = true;
    }
    if (news && wake_) wake_();
  }
}

absl::Status RemoveTrees(const std::vector<std::string>& dirs) {
  for (const std::string& dir : dirs) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (ec) return absl::UnavailableError(absl::StrCat("cannot remove ", dir, ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace hpo::server
