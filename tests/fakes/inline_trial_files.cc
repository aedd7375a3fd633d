#include "tests/fakes/inline_trial_files.h"

namespace hpo::fakes {

void InlineTrialFiles::Prepare(std::string dir) { Run(std::move(dir)); }

void InlineTrialFiles::Run(std::string dir) {
  absl::Status s = server::PrepareTrialDir(dir);
  if (absl::IsUnavailable(s)) {
    health_ = s;
    waiting_.push_back(std::move(dir));
    return;
  }
  if (s.ok()) ++prepared_;
  done_.push_back({std::move(dir), std::move(s)});
}

std::vector<server::TrialFiles::Prepared> InlineTrialFiles::Poll() {
  std::vector<std::string> retry;
  retry.swap(waiting_);
  for (std::string& dir : retry) Run(std::move(dir));
  if (waiting_.empty()) health_ = absl::OkStatus();
  std::vector<Prepared> out;
  out.swap(done_);
  return out;
}

void InlineTrialFiles::Tail(std::string path, int64_t max_bytes, TailDone done) {
  done(server::ReadLogTail(path, max_bytes));
}

}  // namespace hpo::fakes
