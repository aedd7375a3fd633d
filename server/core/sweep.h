#pragma once
// Sweep and TrialRuntime: one sweep's state in memory, and its trials'.
//
// A Sweep owns what running it counts and queues — trials made by the sampler and from
// enqueued configurations, trials active, waiting to launch, waiting to be retried, failed by
// their own fault, directories asked for ahead — and what its finished trials add up to (the
// sampler's history, the best trial, the Pareto front, the longest completed run, the budget
// spent, its allocations). Those change only through the verbs below, each of which keeps the
// invariants written beside the field:
//   active    == the trials not in a final state (PENDING, LAUNCHING, RUNNING)
//   pending   ⊆ the active trials, each at most once
//   history[i], objectives[i]: trial i as the sampler sees it, finished once it ended
//   best, front: over the finished trials (objectives.h has the ranking)
// The record (`rec`) and the plan are the stored sweep and its parsed file; the lifecycle
// writes the record's state as the sweep runs and ends, and the store takes it from there.
//
// Controller thread only; no I/O.

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "algorithms/sampler.h"
#include "server/core/suggester.h"
#include "server/core/sweep_plan.h"
#include "server/store/store.h"

namespace hpo::server {

// The last N values added (the oldest overwritten), in no particular order. It holds no memory
// until the first and after Release (a std::deque holds a block even empty, and 100,000 ended
// trials would keep one each).
template <typename T, size_t N>
class Recent {
 public:
  void Add(T value) {
    if (values_.size() < N) {
      values_.push_back(std::move(value));
    } else {
      values_[next_] = std::move(value);
      next_ = (next_ + 1) % N;
    }
  }
  const std::vector<T>& values() const { return values_; }
  void Release() {
    std::vector<T>().swap(values_);
    next_ = 0;
  }

 private:
  std::vector<T> values_;
  size_t next_ = 0;  // where the next value goes once full
};

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
  // The ids of the trial's last reports and the steps they were stored under (at most
  // kRecentReports): a report sent again from a trial's journal whose cursor fell behind (it
  // could not be written) is known by its id, and stored no second time.
  static constexpr size_t kRecentReports = 256;
  Recent<std::pair<int64_t, int64_t>, kRecentReports> recent_reports;
  void NoteReport(int64_t report_id, int64_t step) {
    if (report_id != 0) recent_reports.Add({report_id, step});
  }
  // The step a report with this id was stored under, if it is among the recent ones.
  std::optional<int64_t> StoredStep(int64_t report_id) const {
    if (report_id == 0) return std::nullopt;
    for (const auto& [id, step] : recent_reports.values()) {
      if (id == report_id) return step;
    }
    return std::nullopt;
  }
  // The pace of its reports, for the hang watchdog (TrialLifecycle::CatchHung): when the latest
  // was made, and the intervals between the latest ones.
  struct Pace {
    static constexpr size_t kGaps = 32;
    absl::Time last = absl::InfinitePast();
    Recent<absl::Duration, kGaps> gaps;
    void Note(absl::Time at) {
      if (at <= last) return;  // an older report, forwarded late
      if (last != absl::InfinitePast()) gaps.Add(at - last);
      last = at;
    }
    // The median interval, or nullopt before the second report.
    std::optional<absl::Duration> Median() const {
      if (gaps.values().empty()) return std::nullopt;
      std::vector<absl::Duration> sorted = gaps.values();
      std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
      return sorted[sorted.size() / 2];
    }
  };
  Pace pace;
  // The last line it wrote to its standard error, read when it ended (fail-fast compares them).
  std::string last_error_line;
  std::string error_tail;  // the end of its stderr, until its end is recorded
  // Since when this run of hpod watches it (a restarted hpod gives every trial its whole
  // timeout again).
  absl::Time watched_since = absl::InfinitePast();
  // The trial's directory (TrialFiles::Prepare): a trial launches once it is ready.
  enum class Files { kNone, kPreparing, kReady };
  Files files = Files::kNone;

  bool stop_requested() const { return rec.stop_state != v1::TRIAL_STATE_UNSPECIFIED; }
};

class Sweep {
 public:
  SweepRecord rec;
  SweepPlan plan;

  // --- Reads
  const SweepSpec& spec() const { return plan.spec; }
  bool Final() const;
  bool Ending() const { return rec.ending != v1::SWEEP_STATE_UNSPECIFIED; }
  // More trials to create: retries, enqueued configurations, or the sampler within the limit
  // (which enqueued trials count toward), unless a GPU- or node-hour budget was spent.
  bool MoreToCreate() const;
  // The trials that count toward plan.limit: the sampler's, and the enqueued ones when the
  // budget names a number of trials (a grid without one runs its points besides them).
  int64_t Counted() const { return sampled_ + (spec().budget.max_trials > 0 ? enqueued_ : 0); }
  // Creation order; index == number. The trials' records change as they run; the list only
  // through Add.
  const std::vector<std::unique_ptr<TrialRuntime>>& trials() const { return trials_; }
  TrialRuntime& trial(int64_t number) const { return *trials_[static_cast<size_t>(number)]; }
  int64_t sampled() const { return sampled_; }    // proposed by the sampler (retries excluded)
  int64_t enqueued() const { return enqueued_; }  // made from rec.queue (retries excluded)
  bool exhausted() const { return exhausted_; }   // the sampler has nothing more
  int64_t active() const { return active_; }
  int64_t preparing() const { return preparing_; }  // PENDING trials whose directory is on the way
  int64_t failed() const { return failed_; }        // FAILED by their own fault
  // Fail-fast (health.fail_fast): how the sweep's first trials to end failed, while they all
  // failed fast and the same way; `over` once one ended otherwise (or the rule acted).
  struct FailFast {
    int count = 0;
    int exit_code = 0;
    int term_signal = 0;
    std::string line;
    bool over = false;
  };
  FailFast fail_fast;
  // Its side of the Suggester: the proposals under way and those that came back.
  SweepSuggestions suggestions;
  const std::deque<int64_t>& pending() const { return pending_; }  // waiting to launch, in order
  const std::deque<int64_t>& retries() const { return retries_; }  // LOST, to run again
  // Trial directories asked for ahead of their trials: every number below this one.
  int64_t dirs_requested() const { return dirs_requested_; }
  int64_t best() const { return best_; }  // number of the best finished trial (one objective)
  // Pareto ranking: the numbers of the trials on the front (objectives.h), in completion order.
  const std::vector<int64_t>& front() const { return front_; }
  // The longest run of a trial that completed in one segment: how long a trial that cannot
  // resume must be able to run where it starts. Zero until one completed.
  absl::Duration longest_completed() const { return longest_completed_; }
  // budget.gpu_hours or budget.node_hours was reached (its words, see usage.h): no trial starts
  // any more, the running ones finish.
  const std::optional<std::string>& budget_spent() const { return budget_spent_; }
  // The allocations held for it (Slurm steps mode), by id: what they cost (usage.h).
  const std::map<std::string, AllocationRecord>& allocations() const { return allocations_; }
  // What the sampler sees (SuggestRequest::history, ::objectives), index == number.
  const std::vector<algorithms::HistoryEntry>& history() const { return history_; }
  const std::vector<double>& objectives() const { return objectives_; }
  // Every trial's Pareto rank (0: on the front), -1 for trials not ranked, by number.
  std::vector<int> ParetoRanks() const;
  // What the sampler is asked for the sweep's next sampled trial (no output set).
  algorithms::SuggestRequest NextRequest() const;
  // What `auto` chose for the sampler and the stopper and does now, in words (their Choice());
  // empty for ones the file named.
  std::pair<std::string, std::string> Choices() const;
  // Whether Choices() changed since the last call (which notes them): the sweep's watchers hear.
  bool ChoicesChanged();

  // --- GPU time: the one place it is reckoned (usage.h adds it up per sweep).
  // The GPUs a trial of this sweep holds while it runs (per node x nodes).
  int TrialGpus(const TrialRecord& trial) const;
  // A trial's GPU-seconds over its segments, the running one up to `now`.
  double GpuSeconds(const TrialRecord& trial, absl::Time now) const;
  // The GPU-seconds of one segment of a trial, from `start` to `end`.
  double SegmentGpuSeconds(const TrialRecord& trial, absl::Time start, absl::Time end) const;

  // --- Verbs: the sweep's own state (rec.state, ending, message, ended_at). A RUNNING sweep
  // may pause and run again; it winds down (ending) to a final state, and a change of its budget
  // may reopen it.
  void Pause(std::string message);
  void Resume(std::string message);
  // Starts winding down to `state` (its trials are stopped by the caller) and drops the
  // retries; false when it ended, or was winding down already and `override` is not set (a
  // cancel overrides any other ending; so does the ending taken up again after a restart).
  bool BeginEnding(v1::SweepState state, std::string message, bool override = false);
  void Finish(v1::SweepState state, std::string message, absl::Time at);
  // A change of the budget: an ended sweep runs again, one winding down goes on. True when it
  // had ended or was winding down.
  bool Reopen(std::string message);
  // Configurations to run before anything the sampler proposes (rec.queue).
  void Enqueue(std::vector<algorithms::Params> points);
  // A change with key `key` (a request_id) was applied: kept with its fingerprint, the last 64,
  // so that a retried request applies once.
  void NoteApplied(const std::string& key, const std::string& fingerprint);
  // Its quarantined nodes (rec.nodes).
  std::set<std::string> QuarantinedNodes() const;

  // --- Verbs: its trials, counts and budgets.
  // A trial joins, made now or loaded at start: counted by its origin (sampled, enqueued), as
  // active until it ends, as failed when it ended by its own fault; its history entry is added,
  // finished (with its scores, the best and the front) when it ended.
  TrialRuntime& Add(std::unique_ptr<TrialRuntime> trial);
  // The trial ended (its record is final): no longer active or waiting; its history entry is
  // finished; the best, the front and the longest run take it in; a LOST one is queued to run
  // again under the retry policy, a FAILED one counts toward budget.max_failed.
  struct Ended {
    bool retried = false;         // queued for a retry
    bool max_failed_hit = false;  // budget.max_failed reached with this one
  };
  Ended TrialEnded(const TrialRuntime& trial);
  // The next source of a new trial: a LOST trial to run again (its number), then an enqueued
  // configuration (taken off rec.queue; the caller stores the record).
  std::optional<int64_t> TakeRetry();
  std::optional<algorithms::Params> TakeQueued();
  void QueueRetry(int64_t number);  // at start, for a LOST trial not retried yet
  void DropRetries();               // ending, or out of budget: no retry is made
  void SamplerExhausted() { exhausted_ = true; }
  // Launch order: an active trial not waiting yet waits at the back, or at the front (a resumed
  // segment keeps its place); TakeWaiting hands the whole line over for a pass, which puts back
  // what still waits.
  void Wait(int64_t number, bool first = false);
  std::deque<int64_t> TakeWaiting() { return std::exchange(pending_, {}); }
  // A waiting trial's directory is on the way, then there.
  void PreparingStarted() { ++preparing_; }
  void PreparingDone() { --preparing_; }
  // Directories ahead of their trials: the numbers to ask for now to have every one below
  // `until` asked for (none when they were), and those made before their trial existed.
  std::pair<int64_t, int64_t> RequestDirsUntil(int64_t until);
  void DirMadeAhead(int64_t number, absl::Status status);
  std::optional<absl::Status> TakeDirMadeAhead(int64_t number);
  // The GPU- and node-hour budgets against what the sweep used by `now` (usage.h): the budget
  // reached, in words, when it was not before (retries are dropped then); nullopt otherwise.
  std::optional<std::string> CheckHourBudgets(absl::Time now);
  // `hpo extend` or `hpo enqueue` changed the budget: applied to the plan, and the hour budgets
  // are judged again.
  void ChangeBudget(const BudgetChange& change);
  // An allocation's use as the backend reports it: false when nothing changed (one that ended
  // stays ended).
  bool NoteAllocation(const AllocationRecord& allocation);

 private:
  void NoteFinished(const TrialRuntime& trial);
  void NoteScores(const TrialRuntime& trial);
  void UpdateBest(const TrialRuntime& trial);

  std::vector<std::unique_ptr<TrialRuntime>> trials_;
  std::vector<algorithms::HistoryEntry> history_;
  std::vector<double> objectives_;  // history's objectives as one column
  int64_t sampled_ = 0;
  int64_t enqueued_ = 0;
  bool exhausted_ = false;
  std::deque<int64_t> retries_;
  std::deque<int64_t> pending_;
  int64_t active_ = 0;
  int64_t preparing_ = 0;
  int64_t dirs_requested_ = 0;
  std::map<int64_t, absl::Status> dirs_made_;
  int64_t failed_ = 0;
  absl::Duration longest_completed_ = absl::ZeroDuration();
  int64_t best_ = -1;
  std::vector<int64_t> front_;
  std::optional<std::string> budget_spent_;
  std::map<std::string, AllocationRecord> allocations_;
  std::pair<std::string, std::string> choices_;  // as of the last ChoicesChanged
};

}  // namespace hpo::server
