#pragma once
// InlineTrialFiles: the TrialFiles seam doing its work on the caller's thread, at once, for
// tests and benchmarks in virtual time (no thread, no wall clock). Prepare makes the directory
// before it returns; its outcome is in the next Poll. A directory that cannot be made for lack
// of room is tried again at every Poll, as the real seam does once a second.

#include <vector>

#include "server/core/trial_files.h"

namespace hpo::fakes {

class InlineTrialFiles final : public server::TrialFiles {
 public:
  void Prepare(std::string dir) override;
  std::vector<Prepared> Poll() override;
  [[nodiscard]] absl::Status Health() const override { return health_; }
  void Tail(std::string path, int64_t max_bytes, TailDone done) override;
  void Remove(std::vector<std::string> dirs, RemoveDone done) override {
    done(server::RemoveTrees(dirs));
  }
  void ReadJournal(int64_t trial_id, std::string trial_dir) override {
    journals_.push_back(server::ReadTrialEnd(trial_id, trial_dir));
  }
  std::vector<JournalRead> PollJournals() override {
    std::vector<JournalRead> out;
    out.swap(journals_);
    return out;
  }
  void SetWakeup(std::function<void()>) override {}

  int prepared() const { return prepared_; }  // directories made

 private:
  void Run(std::string dir);
  std::vector<std::string> waiting_;
  std::vector<Prepared> done_;
  std::vector<JournalRead> journals_;
  absl::Status health_;
  int prepared_ = 0;
};

}  // namespace hpo::fakes
