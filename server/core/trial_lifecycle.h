#pragma once
// TrialLifecycle: a trial's life from creation to its final state, and the scheduling of each
// sweep's trials. It creates trials (the sampler's suggestions, or retries of LOST ones), has
// their directories made (TrialFiles), launches them on the backend when they fit, turns
// backend events into transitions, requests and enforces stops, retries what the infrastructure
// lost, and ends sweeps (budget, wall time, goal, too many failures, cancel).
//
// Every transition is written to the store and the event log (EventPublisher) in the current
// batch. New work (trials created or launched) waits while the store or the sweeps file system
// cannot be written (their Health).
//
// One class, a file per concern: trial_lifecycle.cc (saves, events, progress),
// _schedule.cc (scheduling, backfill, new trials, hour budgets, launch specs), _dirs.cc (trial
// directories ahead), _ends.cc (backend events, ends, segments), _stops.cc (stops, a sweep's
// end, shutdown), _external.cc (ask and tell), each with its own tests
// (tests/unit/server/core/trial_lifecycle*_test.cc). The sweep's counts and queues change
// through its verbs (sweep.h).
//
// Threads: the controller's thread only (inside a batch).
// Errors: none returned; a backend or store refusal ends the trial (FAILED when it is the
// trial's fault, LOST when it is the infrastructure's) or is logged.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/time/time.h"
#include "backend/backend.h"
#include "common/clock.h"
#include "common/data_dir.h"
#include "server/core/event_publisher.h"
#include "server/core/suggester.h"
#include "server/core/sweep_table.h"
#include "server/core/trial_files.h"
#include "server/store/store.h"

namespace hpo::server {

class TrialLifecycle {
 public:
  struct Options {
    DataDir data_dir{""};
    std::string report_endpoint;  // HPO_ENDPOINT given to trials
    std::string tls_ca_pem;   // the CA trials trust (HPO_TLS_CA_DATA) when the endpoint serves TLS
    std::string hpo_bin_dir;  // put first on trials' PATH (where `hpo` is)
    unsigned umask = 077;     // HPO_UMASK for trials started elsewhere (layout.h)
    absl::Duration progress_interval = absl::Milliseconds(500);
    // New trials are suggested for at most this much CPU time per batch (at least one is); what
    // is left is made in the next batch, which the controller runs at once (its loop is woken),
    // so that reports waiting for the controller are taken in between however long suggestions
    // take.
    absl::Duration suggest_slice = absl::Milliseconds(20);
    // The sampler's proposals are made on a thread of their own (suggester.h), as many at once
    // as a sweep has free places; without, on the controller's thread, one at a time, within
    // the slice above (virtual time: reproducible).
    bool suggest_thread = false;
  };
  TrialLifecycle(Options options, SweepTable& table, Store& store, backend::Backend& backend,
                 TrialFiles& files, EventPublisher& events, const Clock& clock);

  void set_report_endpoint(std::string endpoint) { options_.report_endpoint = std::move(endpoint); }
  // Reports a trial left in its journal that hpod may not have: when a trial's command ends,
  // hpod reads its journal (off this thread, TrialFiles) and hands what is past the journal's
  // cursor to `late` before it records the end, so that reports made while hpod was away
  // count; so it does for a running trial the hang watchdog finds silent (`running`), before it
  // decides. (The controller gives ReportIntake::Late.)
  using LateReports =
      std::function<void(Sweep&, TrialRuntime&, const std::vector<JournalEntry>&, bool running)>;
  void set_late_reports(LateReports late) { late_reports_ = std::move(late); }
  // Asks for the next batch at once when a tick ran out of its suggestion slice.
  void set_more_to_schedule(std::function<void()> more) { more_ = std::move(more); }
  // Called from the suggester's thread when proposals came back.
  void set_suggestions_wakeup(std::function<void()> wake) { suggester_.SetWakeup(std::move(wake)); }
  // Whether a sweep waits for proposals it asked for (the controller's thread), and whether the
  // suggester's thread is making some (any thread).
  bool Suggesting() const;
  bool SuggesterBusy() const { return suggester_.Busy(); }
  // Whether the last tick left trials to make for lack of time.
  bool LeftOver() const { return resume_after_ != 0; }
  const Options& options() const { return options_; }
  // False while the store or the sweeps file system cannot be written.
  bool Writable() const;

  // One scheduling tick: backend events, finished directories, stops whose grace passed, every
  // running sweep's launches and end, and the progress saves that are due.
  void Tick();

  // --- sweeps
  // Launches what fits, creates trials up to the budget and concurrency, ends the sweep once
  // nothing is left to do.
  void Schedule(Sweep& sweep);
  // `backend: external` (ask and tell): a new trial, started at once, for something else to run;
  // FAILED_PRECONDITION for a sweep not external or not running, RESOURCE_EXHAUSTED when
  // max_concurrent trials are out, OUT_OF_RANGE when the budget has no trial left.
  [[nodiscard]] absl::StatusOr<TrialRuntime*> Ask(Sweep& sweep);
  // ... and how it ended: COMPLETED (or the stop state hpod decided), or FAILED.
  [[nodiscard]] absl::Status Tell(Sweep& sweep, TrialRuntime& trial, bool completed,
                                  const std::string& message);
  // The sweep winds down to `state`: no new trials, running ones are stopped (CANCELED for a
  // cancel, STOPPED otherwise); it takes `state` once its last trial ended.
  // With `override`, a sweep already winding down winds down to `state` instead.
  void BeginEnding(Sweep& sweep, v1::SweepState state, const std::string& message,
                   bool override = false);
  void SaveSweep(Sweep& sweep);
  // A new sweep's first event.
  void Announce(Sweep& sweep);

  // --- trials
  // Stops a trial now (cancel, sweep end), or with `after` set, tells it in its report reply
  // and has the backend stop it only if it is still running `after` from now (early stopping).
  void RequestStop(Sweep& sweep, TrialRuntime& trial, v1::TrialState state,
                   const std::string& reason, std::optional<absl::Duration> after = std::nullopt);
  void EndTrial(Sweep& sweep, TrialRuntime& trial, v1::TrialState state, std::string message);
  // After a restart: a re-adopted trial whose stop was decided before is stopped if it still
  // runs one grace period from now (it may have been told already, or not).
  void ResumeStop(Sweep& sweep, TrialRuntime& trial);
  // The trial reported: its row is saved within the progress interval.
  void MarkProgress(TrialRuntime& trial);
  void SaveTrial(Sweep& sweep, TrialRuntime& trial, v1::EventKind kind);
  // What the backend gets to start (or re-adopt) a trial.
  backend::LaunchSpec MakeLaunchSpec(const Sweep& sweep, const TrialRuntime& trial) const;
  // Daemon shutdown: every trial that has not ended is reclaimed and marked LOST ("hpod
  // stopped"), so that the next start retries it; a running resumable one continues from its
  // checkpoint at the next start instead.
  void EndAllLost();
  // A resumable trial may continue as its next segment after an interruption (the sweep goes
  // on and the trial has segments left).
  bool MayResume(const Sweep& sweep, const TrialRuntime& trial) const;
  // An interruption (`why`, at `at`) ended the trial's segment: it is recorded with its
  // GPU-seconds, and the trial waits, first in line, to continue from its checkpoint.
  void NextSegment(Sweep& sweep, TrialRuntime& trial, v1::Interruption why,
                   const std::string& message, absl::Time at);

 private:
  // How long the oldest waiting trial lets smaller ones start before it.
  // Proposals asked of the suggester's thread at once, at most: a sweep that opens many places
  // gets them in turns, so the others' requests come in between.
  static constexpr int64_t kProposalsPerRequest = 64;
  static constexpr absl::Duration kBackfillLimit = absl::Seconds(60);
  // Trial directories asked for ahead: up to this many of a sweep's next trials.
  static constexpr int64_t kDirsAhead = 16;
  // `journal_read`: an end whose journal was read already (else it waits for the read).
  void HandleBackendEvent(const backend::BackendEvent& e, bool journal_read = false);
  // Journals read since the last call: their late reports, then the ends that waited for them.
  // With `now`, reads those still waiting on this thread first (shutdown).
  void PollJournals(bool now = false);
  // The directories TrialFiles made since the last call.
  void PollFiles();
  void ApplyPrepared(const TrialFiles::Prepared& p);
  // `now`: its proposal is made at once on this thread (an ask, whose caller waits for it).
  bool CreateTrial(Sweep& sweep, bool now = false);
  // Asks for the directory of trial number `number` of the sweep.
  void RequestDir(Sweep& sweep, int64_t number);
  // Asks for the directories of the sweep's next trials.
  void RequestDirsAhead(Sweep& sweep);
  // A trial without its directory: takes one made ahead, or waits for it (asking if need be).
  void PrepareFiles(Sweep& sweep, TrialRuntime& trial);
  bool LaunchPending(Sweep& sweep, TrialRuntime& trial);
  // How long a trial of the sweep must be able to run where it starts (Resources::needs): twice
  // its checkpoint grace for a resumable one; else its time limit, or the longest a completed
  // trial of the sweep took (0 before one did).
  static absl::Duration Needs(const Sweep& sweep);
  // What the trial asks the backend for, with its needs.
  static backend::Resources TrialResources(const Sweep& sweep, const TrialRecord& rec);

  // budget.gpu_hours, budget.node_hours: once the sweep used one, no trial starts (see
  // Sweep::budget_spent and usage.h).
  void CheckBudgets(Sweep& sweep);
  // An allocation held for a sweep started, changed or ended: recorded, with a sweep event.
  void NoteAllocation(const backend::AllocationUsage& allocation);
  static bool External(const Sweep& sweep);
  // An external sweep's running trials not heard from within its timeout end LOST.
  void CheckSilence(Sweep& sweep);
  void EnforceStops();
  // The hang watchdog (SweepSpec::health), once a second: a running trial silent for longer than
  // its timeout gets the health signal and is stopped its grace later, as LOST with the
  // interruption `hung` (continued from its checkpoint instead, when its sweep is resumable).
  // Quarantines expire on the same round.
  void CatchHung();
  // hpod's own absence: a tick later than kAwayAfter after the last one means hpod did not run
  // (stopped, swapped out, a frozen host or file system), and silence before now is not counted.
  void NoteAway();
  static constexpr absl::Duration kAwayAfter = absl::Seconds(5);
  absl::Time last_tick_ = absl::InfinitePast();
  absl::Time hearing_since_;  // this hpod's start, or its return from being away
  struct Silence {
    absl::Duration silent;
    absl::Duration timeout;
  };
  // How long the trial has been silent, counting only time in which hpod could hear it, when
  // that is past its timeout.
  std::optional<Silence> SilentPastTimeout(const Sweep& sweep, TrialRuntime& trial, absl::Time now);
  // A silent trial's journal was read (`read`): what hpod had not heard is taken, and the trial
  // is caught when it is silent still.
  void HangReadDone(Sweep& sweep, TrialRuntime& trial, TrialFiles::JournalRead& read);
  std::set<int64_t> hang_reads_;  // trials silent past their timeout whose journal is being read
  void CaughtHung(Sweep& sweep, TrialRuntime& trial, absl::Duration silent, absl::Duration timeout);
  // A hung trial stopped by the watchdog (its stop ended it): true when it goes on from its
  // checkpoint as its next segment (instead of ending LOST, and retried).
  // A trial caught as hung whose end the backend says came first (BackendEvent::ended_first):
  // the catch is taken back, and its end judged as any other.
  void EndedBeforeCaught(TrialRuntime& trial);
  bool HungContinues(Sweep& sweep, TrialRuntime& trial, absl::Time at);
  absl::Time next_hang_check_ = absl::InfinitePast();
  // Trial `trial` failed in a way a failures rule (`rule`, described) says is the
  // infrastructure's: it continues from its checkpoint when it may, else it ends LOST (retried).
  void InfrastructureFailed(Sweep& sweep, TrialRuntime& trial, const std::string& rule,
                            absl::Time at);
  // ... and counts it against each node it ran on (SweepRecord::nodes), or only `culprit_node`
  // when that is one of them (where the task that failed first ran), quarantining a node that
  // reached failures.quarantine_after, unless that would take more than
  // failures.quarantine_max_share of the sweep's nodes.
  void CountNodeFailure(Sweep& sweep, const TrialRecord& trial, const std::string& why,
                        const std::string& culprit_node);
  // The nodes a trial runs on join the sweep's (SweepRecord::nodes), which the quarantine's
  // share counts.
  void NoteNodes(Sweep& sweep, const TrialRecord& trial);
  // A quarantine older than failures.quarantine_for ends, and the log says so.
  void ExpireQuarantines(Sweep& sweep, absl::Time now);
  // The sweep's trials (and segments) lost to the infrastructure: failures rules and hangs.
  static int InfrastructureLosses(const Sweep& sweep);
  // After such a loss (`trial`, `why`): the sweep pauses at every failures.max_infrastructure
  // of them.
  void CheckInfrastructureBudget(Sweep& sweep, const TrialRecord& trial, const std::string& why);
  // Fail-fast (SweepSpec::health): a trial of `sweep` ended; pauses the sweep when its first
  // trials to end all failed fast the same way.
  void CheckFailFast(Sweep& sweep, const TrialRuntime& trial);
  void FinishSweep(Sweep& sweep, v1::SweepState state, const std::string& message);
  // The sampler's next proposal for `sweep`, when one is there: made on this thread (without
  // a suggester's thread, or `now`), or one that came back from the suggester's (which is asked
  // for the sweep's free places when none is left nor under way).
  std::optional<Suggestion> NextSuggestion(Sweep& sweep, bool now);
  void PollSuggestions();
  void FlushProgress();
  void Emit(Sweep& sweep, v1::EventKind kind, const TrialRuntime* trial);

  Options options_;
  SweepTable& table_;
  Store& store_;
  backend::Backend& backend_;
  TrialFiles& files_;
  EventPublisher& events_;
  const Clock& clock_;
  Suggester suggester_;
  std::set<int64_t> dirty_;      // ids of trials with unsaved progress
  std::set<int64_t> stops_due_;  // ids of trials told to stop whose deadline may pass
  std::map<std::string, std::pair<int64_t, int64_t>> dir_requests_;  // dir -> (sweep, number)
  std::map<int64_t, backend::BackendEvent> journal_waits_;  // ends waiting for their journal
  LateReports late_reports_;
  std::function<void()> more_;
  absl::Duration suggesting_;  // CPU time spent suggesting since this batch's tick began
  int suggested_ = 0;          // ... and how many suggestions
  int64_t resume_after_ = 0;   // the sweep whose suggestions ran out of the slice last
};

}  // namespace hpo::server
