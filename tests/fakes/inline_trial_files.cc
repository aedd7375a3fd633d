#include "tests/fakes/inline_trial_files.h"

namespace hpo::fakes {

void InlineTrialFiles::Prepare(int64_t trial_id, std::string dir, std::string params_json) {
  Run({trial_id, std::move(dir), std::move(params_json)});
}

void InlineTrialFiles::Run(Job job) {
  absl::Status s = server::PrepareTrialDir(job.dir, job.params_json);
  if (absl::IsUnavailable(s)) {
    health_ = s;
    waiting_.push_back(std::move(job));
    return;
  }
  if (s.ok()) ++prepared_;
  done_.push_back({job.trial_id, std::move(s)});
}

std::vector<server::TrialFiles::Prepared> InlineTrialFiles::Poll() {
  std::vector<Job> retry;
  retry.swap(waiting_);
  for (Job& job : retry) Run(std::move(job));
  if (waiting_.empty()) health_ = absl::OkStatus();
  std::vector<Prepared> out;
  out.swap(done_);
  return out;
}

void InlineTrialFiles::Tail(std::string path, int64_t max_bytes, TailDone done) {
  done(server::ReadLogTail(path, max_bytes));
}

}  // namespace hpo::fakes
