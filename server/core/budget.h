#pragma once
// Budgets: a sweep's trials, wall time, GPU-hours and node-hours as the file and `hpo extend`
// or `hpo enqueue` set them, and what each says now. The one place their arithmetic lives; the
// sweep (sweep.h) and the controller's changes call it, and it reads no state of its own.
//
// Usage (usage.h) measures what a sweep used; this file judges it against the budgets.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hpo/v1/hpo.pb.h"
#include "server/core/sweep_plan.h"
#include "server/core/usage.h"

namespace hpo::server {

// The plan's budget with `change` applied, and its trial limit computed again.
void ApplyBudgetChange(SweepPlan& plan, const BudgetChange& change);

// budget.wall_time ran out for a sweep created at `created` (counted from then).
bool WallTimeRanOut(const Budget& budget, absl::Time created, absl::Time now);
// The hour budget that `usage` reached, in words for the sweep's message ("budget.gpu_hours
// (10)"), or nullopt while neither is reached.
std::optional<std::string> BudgetReached(const Budget& budget, const Usage& usage);
// How long the hour budgets last at the rate of what is held now (the sooner of the two), in
// seconds; nullopt without a budget, or with nothing held.
std::optional<double> BudgetSecondsLeft(const Budget& budget, const Usage& usage);

// What a change of the budget reads of the sweep.
struct BudgetState {
  int64_t sweep_id = 0;
  Budget budget;              // as it stands: the file's, with the earlier changes applied
  BudgetChange change;        // the earlier changes
  int64_t limit = 0;          // the trial limit now (SweepPlan::limit; 0: none)
  int64_t made = 0;           // trials that count toward it (Sweep::Counted)
  int64_t queued = 0;         // enqueued configurations not made into trials yet
  int64_t retrying = 0;       // LOST trials waiting to run again
  bool sampler_done = false;  // the sampler has nothing more to propose
  std::string sampler;        // its name, and the trials it made, for the message
  int64_t sampled = 0;
  absl::Time created;  // the sweep's creation, which wall time counts from
  absl::Time now;
  Usage usage;  // what it used by now
};

// `hpo extend`: the change the request makes (every earlier change kept), with what it says
// in words ("trials 40", "GPU-hours 12"). INVALID_ARGUMENT, saying why, for a request that
// gives the sweep nothing more: negative amounts, an amount given both ways, fewer trials than
// it made, an hour budget at or below what it used, or a budget that stopped it left as it was.
struct Extension {
  BudgetChange change;
  std::vector<std::string> said;
};
absl::StatusOr<Extension> ExtendBudget(const v1::ExtendSweepRequest& req, const BudgetState& state);

// `hpo enqueue` of `more` configurations: the change that lets them run (the trial limit
// raised when the budget names a number of trials and they would pass it; `said` then tells
// so), or INVALID_ARGUMENT when the wall time or an hour budget has run out.
absl::StatusOr<Extension> EnqueueBudget(int64_t more, const BudgetState& state);

}  // namespace hpo::server
