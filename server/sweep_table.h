#pragma once
// SweepTable: the controller's memory of every sweep and trial — the records as stored, plus
// what running them needs (the plan, the sampler's view of the history, curves, stop requests,
// launch queues).
//
// Owned by the Controller; its parts (trial lifecycle, report intake, recovery, views) read and
// change it on the controller's thread only. Nothing here does I/O.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "algorithms/sampler.h"
#include "server/store.h"
#include "server/sweep_plan.h"

namespace hpo::server {

// TrialRecord::origin of a trial made from an enqueued configuration.
inline constexpr char kEnqueued[] = "enqueued";
// ... of a completed trial of an earlier sweep (warm_start, hpo fork): in the history, not run.
inline constexpr char kWarmStart[] = "warm_start";

struct TrialRuntime {
  TrialRecord rec;
  bool progress_dirty = false;  // reported since last saved
  absl::Time last_saved = absl::InfinitePast();
  std::optional<absl::Time> enforce_stop_at;  // early stop: the backend acts if still running then
  std::vector<std::pair<int64_t, double>>
      curve;  // objective metric per step (SweepPlan::keeps_curves)
  // Pareto ranking with curves: per point of `curve`, every objective's value and the
  // constraint violation (algorithms::Curve::vectors).
  std::vector<double> vectors;
  // The last report stored. The same report again (the same client id, or without one the
  // same step and metrics) is a client's retry of a report whose reply it never got (the
  // daemon went away), and is not stored twice.
  std::optional<ReportRecord> last_report;
  // The trial's directory (TrialFiles::Prepare): a trial launches once it is ready.
  enum class Files { kNone, kPreparing, kReady };
  Files files = Files::kNone;

  bool stop_requested() const { return rec.stop_state != v1::TRIAL_STATE_UNSPECIFIED; }
};

struct SweepRuntime {
  SweepRecord rec;
  SweepPlan plan;
  std::vector<std::unique_ptr<TrialRuntime>> trials;  // creation order; index == number
  // What the sampler sees, index == number: kept in step with `trials` (an entry is finished,
  // with its objective, once its trial ended), so no suggestion copies the whole history.
  std::vector<algorithms::HistoryEntry> history;
  std::vector<double>
      objectives;               // history's objectives as one column (SuggestRequest::objectives)
  int64_t sampled = 0;          // trials proposed by the sampler (retries excluded)
  int64_t enqueued = 0;         // trials made from rec.queue (retries excluded)
  bool exhausted = false;       // the sampler has nothing more
  std::deque<int64_t> retries;  // numbers of LOST trials to run again
  std::deque<int64_t> pending;  // numbers of PENDING trials, launch order
  int64_t active = 0;           // trials PENDING, LAUNCHING or RUNNING
  int64_t preparing = 0;        // PENDING trials whose directory is being made
  // Trial directories asked for ahead of their trials (TrialFiles): every number below
  // `dirs_requested` was asked for; those made before their trial exists wait in `dirs_made`
  // with their outcome.
  int64_t dirs_requested = 0;
  std::map<int64_t, absl::Status> dirs_made;
  int64_t failed = 0;  // trials FAILED by their own fault
  // The longest run of a trial that completed in one segment: how long a trial that cannot
  // resume must be able to run where it starts. Zero until one completed.
  absl::Duration longest_completed = absl::ZeroDuration();
  int64_t best = -1;  // number of the best finished trial (one objective)
  // Pareto ranking: the numbers of the trials on the front (objectives.h), in completion order.
  std::vector<int64_t> front;
  // budget.gpu_hours or budget.node_hours was reached (its words, see usage.h): no trial starts
  // any more, the running ones finish.
  std::optional<std::string> budget_spent;
  // The allocations held for it (Slurm steps mode), by id: what they cost (usage.h).
  std::map<std::string, AllocationRecord> allocations;

  const SweepSpec& spec() const { return plan.spec; }
  bool Final() const;
  bool Ending() const { return rec.ending != v1::SWEEP_STATE_UNSPECIFIED; }
  // More trials to create: retries, enqueued configurations, or the sampler within the limit
  // (which enqueued trials count toward).
  bool MoreToCreate() const;
  // The trials that count toward plan.limit: the sampler's, and the enqueued ones when the
  // budget names a number of trials (a grid without one runs its points besides them).
  int64_t Counted() const { return sampled + (spec().budget.max_trials > 0 ? enqueued : 0); }
  TrialRuntime& trial(int64_t number) { return *trials[static_cast<size_t>(number)]; }
  // The GPUs a trial of this sweep holds while it runs (per node x nodes).
  int TrialGpus(const TrialRecord& trial) const;
  // A trial's GPU-seconds over its segments, the running one up to `now`.
  double GpuSeconds(const TrialRecord& trial, absl::Time now) const;
};

class SweepTable {
 public:
  SweepRuntime* FindSweep(int64_t id) const;
  std::pair<SweepRuntime*, TrialRuntime*> FindTrial(int64_t id) const;
  SweepRuntime& AddSweep(std::unique_ptr<SweepRuntime> sweep);
  // Forgets the sweep and its trials (`hpo rm`).
  void RemoveSweep(int64_t id);
  // Appends a trial (its record's number is the next one) and its history entry, finished with
  // its objective when its record is in a final state.
  TrialRuntime& AddTrial(SweepRuntime& sweep, std::unique_ptr<TrialRuntime> trial);
  // The trial ended: the sampler sees it finished, with its objective (and, ranked by Pareto,
  // its scores), and a completed trial's run time counts toward the sweep's longest.
  static void MarkFinished(SweepRuntime& sweep, const TrialRuntime& trial);
  const std::map<int64_t, std::unique_ptr<SweepRuntime>>& sweeps() const { return sweeps_; }
  // True when no sweep is RUNNING or PAUSED.
  bool AllEnded() const;

 private:
  static void NoteRunTime(SweepRuntime& sweep, const TrialRecord& rec);
  // A finished trial's scores in the sampler's history, and the front (Pareto ranking).
  static void NoteScores(SweepRuntime& sweep, const TrialRuntime& trial);
  std::map<int64_t, std::unique_ptr<SweepRuntime>> sweeps_;
  std::unordered_map<int64_t, std::pair<SweepRuntime*, TrialRuntime*>> trials_by_id_;
};

}  // namespace hpo::server
