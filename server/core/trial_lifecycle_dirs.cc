// TrialLifecycle, trial directories: asked for ahead of their trials, and waited for.
#include <algorithm>
#include <deque>

#include "absl/strings/str_cat.h"
#include "common/layout.h"
#include "common/token.h"
#include "hpo/v1/states.h"
#include "server/core/budget.h"
#include "server/core/convert.h"
#include "server/core/objectives.h"
#include "server/core/trial_lifecycle.h"
#include "server/core/usage.h"
#include "server/core/views.h"
#include "server/store/codec.h"
#include "spdlog/spdlog.h"

namespace hpo::server {

void TrialLifecycle::RequestDir(Sweep& sweep, int64_t number) {
  std::string dir = options_.data_dir.trial_dir(sweep.rec.id, number);
  dir_requests_[dir] = {sweep.rec.id, number};
  files_.Prepare(std::move(dir));
}

void TrialLifecycle::RequestDirsAhead(Sweep& sweep) {
  int64_t next = static_cast<int64_t>(sweep.trials().size());
  int64_t until = next + std::min<int64_t>(kDirsAhead, sweep.spec().budget.max_concurrent);
  if (sweep.plan.limit > 0) {  // not past the sweep's last trial (retries take numbers too)
    until = std::min(
        until, std::max(sweep.plan.limit, next + static_cast<int64_t>(sweep.retries().size())));
  }
  auto [from, to] = sweep.RequestDirsUntil(until);
  for (int64_t number = from; number < to; ++number) RequestDir(sweep, number);
}

void TrialLifecycle::PollFiles() {
  for (const TrialFiles::Prepared& p : files_.Poll()) ApplyPrepared(p);
}

void TrialLifecycle::PrepareFiles(Sweep& sweep, TrialRuntime& trial) {
  if (trial.files != TrialRuntime::Files::kNone) return;
  if (External(sweep)) {  // it runs elsewhere: hpod makes no directory for it
    trial.files = TrialRuntime::Files::kReady;
    trial.rec.trial_dir.clear();
    return;
  }
  int64_t number = trial.rec.number;
  if (std::optional<absl::Status> made = sweep.TakeDirMadeAhead(number)) {
    trial.files = TrialRuntime::Files::kReady;
    if (!made->ok()) {
      EndTrial(sweep, trial, v1::TRIAL_STATE_FAILED,
               absl::StrCat("cannot make its directory: ", made->message()));
    }
    return;
  }
  trial.files = TrialRuntime::Files::kPreparing;
  sweep.PreparingStarted();
  if (number >= sweep.dirs_requested() || !dir_requests_.count(trial.rec.trial_dir)) {
    RequestDir(sweep, number);
  }
  PollFiles();  // a fast seam has it made already
}

void TrialLifecycle::ApplyPrepared(const TrialFiles::Prepared& p) {
  auto request = dir_requests_.find(p.dir);
  if (request == dir_requests_.end()) return;
  auto [sweep_id, number] = request->second;
  dir_requests_.erase(request);
  Sweep* sweep = table_.FindSweep(sweep_id);
  if (sweep == nullptr) return;
  if (number >= static_cast<int64_t>(sweep->trials().size())) {  // made ahead of its trial
    sweep->DirMadeAhead(number, p.status);
    return;
  }
  TrialRuntime& trial = sweep->trial(number);
  if (trial.files != TrialRuntime::Files::kPreparing) return;
  sweep->PreparingDone();
  trial.files = TrialRuntime::Files::kReady;
  if (v1::IsFinal(trial.rec.state) || p.status.ok()) return;
  EndTrial(*sweep, trial, v1::TRIAL_STATE_FAILED,
           absl::StrCat("cannot make its directory: ", p.status.message()));
}

}  // namespace hpo::server
