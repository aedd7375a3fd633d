#pragma once
// Controller: the single writer. It owns every sweep's and trial's state, runs the samplers and
// stoppers, drives the backend and writes the store.
//
// Threading: one thread (Start) runs batches: it takes all posted work, runs it inside one
// store transaction, runs a scheduling tick when one is due, commits, publishes the batch's
// events to watchers and only then completes the work's continuations (so an answered report is
// durable). Post() is thread-safe; every other method must run on the controller's thread,
// i.e. inside a posted function (or in RunOnce for tests in virtual time).
//
// Errors: operations return INVALID_ARGUMENT (bad spec or request), NOT_FOUND (unknown id),
// FAILED_PRECONDITION (illegal transition, report after the trial ended), UNAUTHENTICATED
// (wrong trial token), UNAVAILABLE (store refused a write).

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "common/data_dir.h"
#include "hpo/v1/hpo.pb.h"
#include "server/auth.h"
#include "server/store.h"
#include "server/sweep_spec.h"
#include "slurm_backend/backend.h"

namespace hpo::server {

// Receives one sweep's events (the gRPC watch stream). Called on the controller's thread;
// implementations must not block.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void Push(const v1::Event& event) = 0;
  // No more events: the sweep ended (OK) or the sink fell behind.
  virtual void Close(const absl::Status& status) = 0;
  // True once the client went away; the controller then forgets the sink.
  virtual bool Gone() const = 0;
};

class Controller {
 public:
  struct Options {
    DataDir data_dir{""};
    std::string report_endpoint;  // HPO_ENDPOINT given to trials
    std::string tls_ca;           // HPO_TLS_CA given to trials when the endpoint serves TLS
    std::string hpo_bin_dir;      // put first on trials' PATH (where `hpo` is)
    absl::Duration tick = absl::Milliseconds(50);
    absl::Duration progress_interval = absl::Milliseconds(500);
    absl::Duration report_flush_interval = absl::Milliseconds(50);  // see Store::FlushReportLog
  };
  // Runs after the batch it ran in has been committed, with the commit's status.
  using Done = std::function<void(const absl::Status& commit)>;
  using Work = std::function<Done()>;

  Controller(Options options, Store& store, backend::Backend& backend, const Clock& clock);
  ~Controller();

  // Loads every sweep from the store. Trials that were running when the daemon last stopped are
  // marked LOST (and retried per the sweep's max_retries). Call once, before Start/RunOnce.
  absl::Status Recover();
  void Start();
  // Finishes the current batch and joins the thread. Running trials are killed and marked LOST
  // ("hpod stopped"); their sweeps retry them when the daemon starts again. With `keep_trials`
  // they go on running instead, and the next start re-adopts them (as after a crash).
  void Shutdown(bool keep_trials = false);

  // Before Start: the endpoint trials report to (known once the server listens).
  void set_report_endpoint(std::string endpoint) { options_.report_endpoint = std::move(endpoint); }

  // Thread-safe.
  void Post(Work work);
  // Tests in virtual time: runs the queued work and one tick on the calling thread.
  void RunOnce();

  // --- controller thread only ---
  v1::ValidateSweepResponse Validate(const v1::ValidateSweepRequest& req) const;
  absl::StatusOr<v1::Sweep> Submit(const v1::SubmitSweepRequest& req, const std::string& owner = "");
  absl::StatusOr<v1::Sweep> GetSweep(int64_t sweep_id) const;
  // Every sweep, or with `caller` set only those the caller may see.
  std::vector<v1::Sweep> ListSweeps(bool active_only, const Caller* caller = nullptr) const;
  // OK when `caller` may see and act on the sweep (or the trial's sweep); NOT_FOUND when there
  // is none, PERMISSION_DENIED when it is another user's.
  absl::Status CheckSweepAccess(int64_t sweep_id, const Caller& caller) const;
  absl::Status CheckTrialAccess(int64_t trial_id, const Caller& caller) const;
  absl::StatusOr<v1::Sweep> Cancel(int64_t sweep_id);
  absl::StatusOr<v1::Sweep> Pause(int64_t sweep_id);
  absl::StatusOr<v1::Sweep> Resume(int64_t sweep_id);
  absl::StatusOr<std::vector<v1::Trial>> ListTrials(const v1::ListTrialsRequest& req) const;
  absl::StatusOr<v1::GetTrialResponse> GetTrial(const v1::GetTrialRequest& req);
  absl::StatusOr<std::string> TrialDir(int64_t trial_id) const;
  // A trial's reporting token, for in-process tools (the fuzzer); never served over the API.
  absl::StatusOr<std::string> TrialToken(int64_t trial_id) const;
  absl::StatusOr<v1::ReportResponse> Report(const v1::ReportRequest& req, absl::string_view token);
  // Sends the sweep's committed events after since_seq, then live ones until the sweep ends.
  absl::Status Watch(int64_t sweep_id, int64_t since_seq, std::shared_ptr<EventSink> sink);
  // True when no sweep is RUNNING or PAUSED.
  bool AllSweepsEnded() const;

 private:
  struct TrialRt {
    TrialRecord rec;
    bool progress_dirty = false;     // reported since last saved
    absl::Time last_saved = absl::InfinitePast();
    v1::TrialState stop_state = v1::TRIAL_STATE_UNSPECIFIED;  // set once a stop was requested
    std::string stop_reason;
    std::optional<absl::Time> enforce_stop_at;  // early stop: the backend acts if still running then
    std::vector<std::pair<int64_t, double>> curve;  // objective metric per step
    // The last report stored. The same report again (the same client id, or without one the
    // same step and metrics) is a client's retry of a report whose reply it never got (the
    // daemon went away), and is not stored twice.
    std::optional<ReportRecord> last_report;
  };
  struct SweepRt {
    SweepRecord rec;
    SweepSpec spec;
    std::unique_ptr<algorithms::Sampler> sampler;
    std::unique_ptr<algorithms::Stopper> stopper;
    bool stopper_is_none = true;  // skip building the other curves for the no-op stopper
    std::vector<std::unique_ptr<TrialRt>> trials;  // creation order; index == number
    // What the sampler sees, index == number: kept in step with `trials` (an entry is finished,
    // with its objective, once its trial ended), so no suggestion copies the whole history.
    std::vector<algorithms::HistoryEntry> history;
    std::vector<double> objectives;  // history's objectives as one column (SuggestRequest::objectives)
    int64_t sampled = 0;         // trials proposed by the sampler (retries excluded)
    int64_t limit = 0;           // SweepSpec::TrialLimit; 0: unbounded
    bool exhausted = false;      // the sampler has nothing more
    std::deque<int64_t> retries; // numbers of LOST trials to run again
    std::deque<int64_t> pending; // numbers of PENDING trials, launch order
    int64_t active = 0;          // trials PENDING, LAUNCHING or RUNNING
    int64_t failed = 0;          // trials FAILED by their own fault
    int64_t best = -1;           // number of the best finished trial
    std::vector<std::shared_ptr<EventSink>> sinks;
    bool Final() const;
  };

  void Loop();
  void CompleterLoop();
  void RunBatch(std::vector<Work>& batch, bool tick);
  void Tick();
  // Thread-safe: runs a tick as soon as the loop is free (the backend calls it).
  void Wake();
  // How long the oldest waiting trial lets smaller ones start before it.
  static constexpr absl::Duration kBackfillLimit = absl::Seconds(60);
  void HandleBackendEvent(const backend::BackendEvent& e);
  void Schedule(SweepRt& sweep);
  bool CreateTrial(SweepRt& sweep);
  bool LaunchPending(SweepRt& sweep, TrialRt& trial);
  // What the backend gets to start (or re-adopt) a trial; `checkpoint_in` is set when it has one.
  backend::LaunchSpec MakeLaunchSpec(const SweepRt& sweep, const TrialRt& trial) const;
  void EndTrial(SweepRt& sweep, TrialRt& trial, v1::TrialState state, std::string message);
  // Stops a trial now (cancel, sweep end), or with `after` set, tells it in its report reply
  // and has the backend stop it only if it is still running `after` from now (early stopping).
  void RequestStop(TrialRt& trial, v1::TrialState state, const std::string& reason,
                   std::optional<absl::Duration> after = std::nullopt);
  void EnforceStops();
  void BeginEnding(SweepRt& sweep, v1::SweepState state, const std::string& message);
  void FinishSweep(SweepRt& sweep, v1::SweepState state, const std::string& message);
  void FlushProgress();
  void SaveTrial(SweepRt& sweep, TrialRt& trial, v1::EventKind kind);
  void SaveSweep(SweepRt& sweep);
  void Emit(SweepRt& sweep, v1::EventKind kind, const TrialRt* trial);
  absl::StatusOr<std::unique_ptr<SweepRt>> BuildSweep(SweepRecord rec) const;
  void UpdateBest(SweepRt& sweep, TrialRt& trial);

  v1::Sweep SweepProto(const SweepRt& sweep, bool with_spec) const;
  v1::Trial TrialProto(const TrialRt& trial) const;
  SweepRt* FindSweep(int64_t id) const;
  std::pair<SweepRt*, TrialRt*> FindTrial(int64_t id) const;

  Options options_;
  Store& store_;
  backend::Backend& backend_;
  const Clock& clock_;

  std::map<int64_t, std::unique_ptr<SweepRt>> sweeps_;
  std::unordered_map<int64_t, std::pair<SweepRt*, TrialRt*>> trials_by_id_;
  std::vector<std::pair<int64_t, v1::Event>> unpublished_;  // (sweep, event) of this batch
  int64_t committed_seq_ = 0;
  std::set<int64_t> dirty_;  // ids of trials with unsaved progress
  std::set<int64_t> stops_due_;  // ids of trials told to stop whose deadline may pass
  absl::Time next_report_flush_ = absl::InfinitePast();  // when the next slice is due
  int report_flush_slice_ = 0;  // the slice of trials whose staged reports move next
  // Storage faults (disk full, read-only, I/O errors). While storage_error_ is set, hpod refuses
  // new work (submits, trial launches) and reports (clients retry them), and once a second
  // writes every sweep and trial again, and probes the sweeps directory: when that commits, it
  // carries on. A failed batch changes nothing in the store; the rewrite brings the store up to
  // what the controller knows.
  std::string storage_error_;
  absl::Time next_storage_probe_ = absl::InfinitePast();
  std::vector<int64_t> batch_reports_;  // trials whose last_report this batch set
  void StorageFailed(const absl::Status& s);
  bool ProbeStorage();  // rewrites all; false when the sweeps directory cannot be written
  absl::Time next_tick_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Work> queue_;  // guarded by mu_
  bool stopping_ = false;    // guarded by mu_
  bool tick_requested_ = false;  // guarded by mu_: the backend has news (Wake)
  bool waiting_ = false;     // guarded by mu_: the loop sleeps on cv_
  std::thread thread_;

  // Continuations of committed batches, run in order on the completer thread.
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  std::vector<std::pair<std::vector<Done>, absl::Status>> done_queue_;  // guarded by done_mu_
  bool done_stopping_ = false;                                          // guarded by done_mu_
  std::thread completer_;
};

// True for the states a trial / sweep never leaves.
bool IsFinal(v1::TrialState s);
bool IsFinal(v1::SweepState s);
std::string TrialStateName(v1::TrialState s);  // "RUNNING"
std::string SweepStateName(v1::SweepState s);  // "COMPLETED"

}  // namespace hpo::server
