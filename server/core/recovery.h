#pragma once
// Recovery: the controller's memory rebuilt from the store when hpod starts.
//
// Every sweep comes back with its plan (a sweep whose spec no longer parses ends FAILED, saying
// why), its trials and the sampler's history. Each trial that had not ended is rebuilt from its
// reports (its row may lag one progress interval behind them) and handed to the backend to
// re-adopt: it may still run, or have ended while hpod was away. One the backend cannot find is
// LOST (and retried per the sweep's max_retries), unless it was only waiting to start: then it
// waits again. Stoppers get every stored point back, trial by trial; LOST trials whose retry was
// not created yet are queued again; a sweep that was ending still ends.
//
// Threads: the controller's thread, before the batch loop starts. All of it is one transaction.
// Errors: what the store returns (nothing is changed then).

#include "absl/status/status.h"
#include "backend/backend.h"
#include "common/clock.h"
#include "server/core/event_publisher.h"
#include "server/core/sweep_table.h"
#include "server/core/trial_lifecycle.h"
#include "server/store/store.h"

namespace hpo::server {

class Recovery {
 public:
  // `defaults`: the versions of the sweep-file defaults this hpod knows (Controller::Options).
  Recovery(SweepTable& table, Store& store, backend::Backend& backend, TrialLifecycle& lifecycle,
           EventPublisher& events, const Clock& clock, const std::vector<SpecDefaults>& defaults)
      : defaults_(defaults),
        table_(table),
        store_(store),
        backend_(backend),
        lifecycle_(lifecycle),
        events_(events),
        clock_(clock) {}

  [[nodiscard]] absl::Status Run();

 private:
  // A stored sweep with its trials; a sweep whose spec no longer plans is FAILED.
  [[nodiscard]] absl::StatusOr<Sweep*> LoadSweep(SweepRecord rec);
  // Rebuilds a trial's curve (and, for one that had not ended, its row) from its reports.
  [[nodiscard]] absl::Status Replay(Sweep& sweep, TrialRuntime& trial);
  // A trial that had not ended: re-adopted, waiting again, or LOST.
  void Adopt(Sweep& sweep, TrialRuntime& trial);
  // Tells the stopper of the sweep's ended trials, in the order they ended, as it was told
  // while they ran (once the curves are replayed).
  void TellEnded(Sweep& sweep);

  const std::vector<SpecDefaults>& defaults_;
  SweepTable& table_;
  Store& store_;
  backend::Backend& backend_;
  TrialLifecycle& lifecycle_;
  EventPublisher& events_;
  const Clock& clock_;
  int readopted_ = 0, resumed_ = 0, lost_ = 0;
};

}  // namespace hpo::server
