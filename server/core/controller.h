#pragma once
// Controller: the single writer. It owns every sweep's and trial's state and is the one door
// to it: the gRPC services (and tests, fuzzers and benchmarks) post work to it and read from it.
//
// It is made of parts, each one idea:
//   BatchLoop       the thread: queue, wake-up, one transaction per batch, commit, completer
//   ReportIntake    a trial's report, from validation to the stopper's verdict
//   TrialLifecycle  creation, launch, backend events, stops, retries, a sweep's end
//   EventPublisher  the event log and its watchers
//   Recovery        the state rebuilt from the store at start
//   SweepTable      the memory they share; views.h turns it into the API's messages
// The Controller wires them together and keeps the API's rules (access, refusals).
//
// Threading: Post() is thread-safe; every other method must run on the controller's thread,
// i.e. inside a posted function (or in RunOnce for tests in virtual time). A posted function's
// continuation runs after the batch it ran in has been committed (so an answered report is
// durable), with the commit's status.
//
// Errors: operations return INVALID_ARGUMENT (bad spec or request), NOT_FOUND (unknown id),
// PERMISSION_DENIED (another user's sweep), FAILED_PRECONDITION (illegal transition, report
// after the trial ended), UNAUTHENTICATED (wrong trial token), UNAVAILABLE (hpod cannot write
// its data now; retry later).

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "backend/backend.h"
#include "common/clock.h"
#include "common/data_dir.h"
#include "common/slots.h"
#include "common/work_queue.h"
#include "hpo/v1/hpo.pb.h"
#include "server/auth/auth.h"
#include "server/core/batch_loop.h"
#include "server/core/budget.h"
#include "server/core/estimate.h"
#include "server/core/event_publisher.h"
#include "server/core/reads.h"
#include "server/core/report_intake.h"
#include "server/core/sweep_table.h"
#include "server/core/telemetry.h"
#include "server/core/trial_files.h"
#include "server/core/trial_lifecycle.h"
#include "server/store/store.h"

namespace hpo::server {

// What the gate allowed: a caller, and what it may do on which sweep or trial. Only
// Controller::Allow makes one, after the gate (server/auth) ruled; every verb that changes a
// sweep takes one and acts only within it, so a front door that forgets the gate does not
// compile, and one that asked for another sweep than it acts on is refused.
class Allowed {
 public:
  const Caller& caller() const { return caller_; }
  const Need& need() const { return need_; }

 private:
  friend class Controller;
  Allowed(Caller caller, Need need, bool anything = false)
      : caller_(std::move(caller)), need_(need), anything_(anything) {}
  Caller caller_;
  Need need_;
  bool anything_;  // AllowedForTest: the owner, on every sweep
};

class Controller {
 public:
  // What trials get (data directory, endpoint, ...; TrialLifecycle::Options), and the tick.
  struct Options : TrialLifecycle::Options {
    absl::Duration tick = absl::Milliseconds(50);
    // What batches and reports are measured by (server/core/telemetry.h); null: nothing.
    Telemetry* telemetry = nullptr;
    // The versions of the sweep-file defaults this hpod knows, oldest first (empty: its own,
    // SpecDefaultVersions()): a new sweep takes the last, a stored one keeps its own.
    std::vector<SpecDefaults> spec_defaults;
  };
  using Done = BatchLoop::Done;
  using Work = BatchLoop::Work;

  Controller(Options options, Store& store, backend::Backend& backend, TrialFiles& files,
             const Clock& clock);
  ~Controller();

  // Loads every sweep from the store and re-adopts the trials that were running (Recovery).
  // Call once, before Start/RunOnce.
  [[nodiscard]] absl::Status Recover();
  void Start();
  // Finishes the current batch and joins the threads. Running trials are killed and marked LOST
  // ("hpod stopped"); their sweeps retry them when the daemon starts again. With `keep_trials`
  // they go on running instead, and the next start re-adopts them (as after a crash).
  void Shutdown(bool keep_trials = false);

  // Before Start: the endpoint trials report to (known once the server listens).
  void set_report_endpoint(std::string endpoint) {
    lifecycle_.set_report_endpoint(std::move(endpoint));
  }

  // Thread-safe: `work` runs on the controller's thread, in the next batch; its continuation
  // after that batch committed (a front door that answers asynchronously, as the gRPC
  // services do, answers from there).
  void Post(Work work) { loop_.Post(std::move(work)); }
  // Thread-safe, for a front door that blocks (the dashboard's HTTP threads): runs `fn` on the
  // controller's thread and waits for its answer, at most `deadline` (UNAVAILABLE then; the
  // answer, when it comes, goes nowhere). With `durable`, the answer waits for the batch's
  // commit too, and a failed commit is the answer. `fn` must hold copies of what it reads: the
  // request it answers may be gone by the time it runs.
  template <typename T>
  absl::StatusOr<T> Call(std::function<absl::StatusOr<T>()> fn, absl::Duration deadline,
                         bool durable = false) {
    auto promise = std::make_shared<std::promise<absl::StatusOr<T>>>();
    std::future<absl::StatusOr<T>> answer = promise->get_future();
    Post([promise, fn = std::move(fn), durable]() -> Done {
      absl::StatusOr<T> result = fn();
      if (!durable || !result.ok()) {
        promise->set_value(std::move(result));
        return nullptr;
      }
      return [promise, result = std::move(result)](const absl::Status& commit) {
        promise->set_value(commit.ok() ? result : absl::StatusOr<T>(commit));
      };
    });
    if (answer.wait_for(absl::ToChronoNanoseconds(deadline)) != std::future_status::ready) {
      return absl::UnavailableError(
          absl::StrCat("hpod did not answer within ", absl::FormatDuration(deadline)));
    }
    return answer.get();
  }
  // Tests in virtual time: runs the queued work and one tick on the calling thread.
  // When new trials took more than their slice of a batch (Options::suggest_slice), the
  // batches that make the rest follow at once, as they do in the daemon's loop.
  void RunOnce() {
    while (RunOneBatch()) {
    }
  }
  // One batch; true when it left trials to make in a batch to come at once (benchmarks that
  // time each batch).
  bool RunOneBatch() {
    loop_.RunOnce();
    return lifecycle_.LeftOver();
  }
  // Whether a sweep waits for proposals it asked of the suggester's thread
  // (Options::suggest_thread), and whether that thread is still making them (thread-safe): a
  // test or benchmark in virtual time waits for them, and runs a batch to take them, before the
  // clock moves on.
  bool Suggesting() const { return lifecycle_.Suggesting(); }
  bool SuggesterBusy() const { return lifecycle_.SuggesterBusy(); }

  // --- controller thread only ---
  // Every verb, reading or changing, takes what the gate allowed (Allow) and acts only within
  // it: another action, sweep or trial than the gate ruled on is refused (INTERNAL).
  //
  // Validate and Submit ask the backend what only the cluster can say (Backend::Vet), off this
  // thread, and answer through `reply` once it did: in this batch when the backend answered at
  // once (they return what `reply` returned: the batch's continuation), else in a later batch
  // (they return null). A sweep the backend refuses is not kept.
  template <typename T>
  using Reply = std::function<Done(absl::StatusOr<T>)>;
  Done Validate(const Allowed& allowed, const v1::ValidateSweepRequest& req,
                Reply<v1::ValidateSweepResponse> reply);
  // What the sweep file would cost (estimate.h), with the backend's guess of the queue wait.
  // The estimate's simulation runs on a thread of its own (plans' WorkQueue), never on this
  // one; each user may have kPlansPerUser plans being computed at once, and all together
  // kPlansInAll (RESOURCE_EXHAUSTED past either).
  Done Plan(const Allowed& allowed, const v1::PlanSweepRequest& req,
            Reply<v1::PlanSweepResponse> reply);
  static constexpr int kPlansPerUser = 2;
  static constexpr int kPlansInAll = 6;
  Slots& plan_slots() { return *plan_slots_; }
  // The sweep is the caller's (SweepRecord::owner).
  Done Submit(const Allowed& allowed, const v1::SubmitSweepRequest& req, Reply<v1::Sweep> reply);
  // The same, answered inline (tests, benchmarks): UNAVAILABLE when the backend's answer does not
  // come at once.
  [[nodiscard]] absl::StatusOr<v1::ValidateSweepResponse> Validate(
      const Allowed& allowed, const v1::ValidateSweepRequest& req);
  [[nodiscard]] absl::StatusOr<v1::Sweep> Submit(const Allowed& allowed,
                                                 const v1::SubmitSweepRequest& req);
  // (The simulation runs inline here.)
  [[nodiscard]] absl::StatusOr<v1::PlanSweepResponse> Plan(const Allowed& allowed,
                                                           const v1::PlanSweepRequest& req);
  [[nodiscard]] absl::StatusOr<v1::Sweep> GetSweep(const Allowed& allowed, int64_t sweep_id) const;
  // The sweeps the caller may view (a kUse ruling).
  [[nodiscard]] absl::StatusOr<std::vector<v1::Sweep>> ListSweeps(const Allowed& allowed,
                                                                  bool active_only) const;
  // The gate (server/auth.h) that every front door passes a call through before acting: OK,
  // NOT_FOUND for a sweep or trial that is not there, PERMISSION_DENIED saying why.
  [[nodiscard]] absl::Status Authorize(const Caller& caller, const Need& need) const;
  // The gate's ruling as what the changing verbs take: Authorize, and on OK the Allowed.
  [[nodiscard]] absl::StatusOr<Allowed> Allow(const Caller& caller, const Need& need) const;
  // The owner, on every sweep: for tests, fuzzers and benchmarks that drive the controller
  // without a front door. Never used by one.
  static Allowed AllowedForTest();
  // The changing verbs.
  [[nodiscard]] absl::StatusOr<v1::Sweep> Cancel(const Allowed& allowed, int64_t sweep_id);
  [[nodiscard]] absl::StatusOr<v1::Sweep> Pause(const Allowed& allowed, int64_t sweep_id);
  [[nodiscard]] absl::StatusOr<v1::Sweep> Resume(const Allowed& allowed, int64_t sweep_id);
  // Lets quarantined node `node` back into the sweep (its failure count starts again).
  [[nodiscard]] absl::StatusOr<v1::Sweep> AllowNode(const Allowed& allowed, int64_t sweep_id,
                                                    const std::string& node);
  // More budget (v1::ExtendSweepRequest): a COMPLETED or TIMED_OUT sweep reopens. INVALID_ARGUMENT
  // for a change that gives nothing more (fewer trials than it made, a GPU-hour budget below what
  // was used), FAILED_PRECONDITION for a sweep that cannot go on; nothing changes then.
  [[nodiscard]] absl::StatusOr<v1::Sweep> Extend(const Allowed& allowed,
                                                 const v1::ExtendSweepRequest& req);
  // Removes an ended sweep from the store and from memory; returns the directories of its trials
  // for the caller to remove once that is committed. FAILED_PRECONDITION for one not ended.
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> Remove(const Allowed& allowed,
                                                                int64_t sweep_id);
  // Configurations that run before anything the sampler proposes (v1::EnqueueRequest), checked
  // against the space; they count toward budget.max_trials, which grows if they need it. A sweep
  // that ran out of trials reopens. INVALID_ARGUMENT for a point outside the space.
  [[nodiscard]] absl::StatusOr<v1::Sweep> Enqueue(const Allowed& allowed,
                                                  const v1::EnqueueRequest& req);
  // Ask and tell (`backend: external`): TrialLifecycle::Ask and Tell.
  [[nodiscard]] absl::StatusOr<v1::AskResponse> Ask(const Allowed& allowed, int64_t sweep_id);
  [[nodiscard]] absl::StatusOr<v1::Trial> Tell(const Allowed& allowed, const v1::TellRequest& req);
  // The reading verbs: kView on the sweep or trial they read.
  [[nodiscard]] absl::StatusOr<std::vector<v1::Trial>> ListTrials(
      const Allowed& allowed, const v1::ListTrialsRequest& req) const;
  [[nodiscard]] absl::StatusOr<v1::GetTrialResponse> GetTrial(const Allowed& allowed,
                                                              const v1::GetTrialRequest& req);
  [[nodiscard]] absl::StatusOr<std::string> TrialDir(const Allowed& allowed,
                                                     int64_t trial_id) const;
  // A trial's reporting token, for in-process tools (the fuzzer); never served over the API.
  [[nodiscard]] absl::StatusOr<std::string> TrialTokenForTest(int64_t trial_id) const;
  // ReportIntake::Report.
  [[nodiscard]] absl::StatusOr<v1::ReportResponse> Report(const v1::ReportRequest& req,
                                                          absl::string_view token,
                                                          std::string* refusal_proof = nullptr) {
    return intake_.Report(req, token, refusal_proof);
  }
  // Sends the sweep's committed events after since_seq (none when it is negative), then live
  // ones until the sweep ends.
  [[nodiscard]] absl::Status Watch(const Allowed& allowed, int64_t sweep_id, int64_t since_seq,
                                   std::shared_ptr<EventSink> sink);
  // Returns once every watch that joined so far has replayed its past (see EventPublisher).
  void WaitForWatchReplays() { events_.WaitForReplays(); }
  // True when no sweep is RUNNING or PAUSED.
  bool AllSweepsEnded() const { return table_.AllEnded(); }
  // What readers outside the core see of it now (server/core/reads.h): the dashboard's views
  // of the sweep or trial the gate allowed viewing (kView), and /metrics (kMetrics), which
  // shows only the sweeps its caller may view.
  [[nodiscard]] absl::StatusOr<CoreReads> Read(const Allowed& allowed) const;

  // Thread-safe: what the front doors measure (a report's latency).
  Telemetry& telemetry() { return *telemetry_; }

 private:
  // OK when `allowed` covers `action` on the sweep (or trial); INTERNAL otherwise.
  [[nodiscard]] absl::Status Within(const Allowed& allowed, Action action, int64_t sweep_id,
                                    int64_t trial_id = 0) const;
  // After every commit: events go out, and a change in whether hpod can write is logged.
  void Committed(const absl::Status& commit);
  [[nodiscard]] absl::StatusOr<Sweep*> FindSweep(int64_t sweep_id) const;
  // The completed trials of sweep `from` that lie in `spec`'s space (its parameters, a new one
  // at its default), as trials of a new sweep: COMPLETED, origin warm_start, never run.
  // INVALID_ARGUMENT when the sweeps have no parameter or objective in common.
  // Backend::Vet for a sweep, with `then` run on this thread with the answer: inline (what it
  // returns is returned), or in a batch of its own (null is returned).
  Done Vetting(int64_t sweep_id, const SweepSpec& spec,
               std::function<Done(const absl::Status&)> then);
  // A backend's answer (`ask` gets the callback), with `then` run on this thread: inline (what it
  // returns is returned), or in a batch of its own (null is returned).
  template <typename T>
  Done Awaiting(const std::function<void(std::function<void(const T&)>)>& ask,
                std::function<Done(const T&)> then) {
    struct State {
      bool calling = true;
      std::optional<Done> done;
    };
    auto state = std::make_shared<State>();
    ask([this, state, then](const T& answer) {
      if (state->calling) {
        state->done = then(answer);
        return;
      }
      Post([then, answer]() -> Done { return then(answer); });
    });
    state->calling = false;
    return state->done ? std::move(*state->done) : nullptr;
  }
  // What an estimate of `spec` needs to know of a trial (estimate.h): from `req` (when given),
  // the file's `plan:`, the sweep it names as like (which `caller` must be able to view), or its
  // early stopping's max_resource.
  [[nodiscard]] absl::StatusOr<EstimateInputs> InputsFor(const Caller& caller,
                                                         const SweepSpec& spec, int64_t limit,
                                                         const v1::PlanSweepRequest& req) const;
  // The first and last report of each of `trials`' most recent finished ones, from the store.
  std::map<int64_t, ReportSpan> ReportSpans(const std::vector<const TrialRecord*>& trials) const;
  Done PlanOn(const Allowed& allowed, const v1::PlanSweepRequest& req,
              Reply<v1::PlanSweepResponse> reply, bool off_thread);
  // A plan's answer, with the backend's guess of when a trial of `r` would start.
  Done QueueWait(const backend::Resources& r, const backend::Placement& p,
                 v1::PlanSweepResponse resp, Reply<v1::PlanSweepResponse> reply);
  // A sweep the backend accepted: it joins the table and starts.
  absl::StatusOr<v1::Sweep> Admit(std::unique_ptr<Sweep> sweep, std::vector<TrialRecord> inherited);
  // An inline answer of an asynchronous verb (the sync Validate and Submit).
  template <typename T, typename Verb>
  static absl::StatusOr<T> Inline(Verb verb) {
    auto got = std::make_shared<std::optional<absl::StatusOr<T>>>();
    (void)verb([got](absl::StatusOr<T> r) -> Done {
      *got = std::move(r);
      return nullptr;
    });
    if (!got->has_value()) {
      return absl::UnavailableError("the backend answers later; call the form with a reply");
    }
    return std::move(**got);
  }
  [[nodiscard]] absl::StatusOr<std::vector<TrialRecord>> WarmStartTrials(const SweepSpec& spec,
                                                                         int64_t from) const;
  // FAILED_PRECONDITION unless the sweep may still be changed (`verb`: for the message).
  [[nodiscard]] absl::Status CheckChangeable(const Sweep& sweep, const char* verb) const;
  // What a change of the sweep's budget reads of it (budget.h), as of now.
  BudgetState BudgetStateOf(const Sweep& sweep) const;
  // A change whose key (`request_id`) the sweep applied before: the sweep as it is, or
  // INVALID_ARGUMENT when that key came with other values; nullopt: apply it
  // (Sweep::NoteApplied records the key with the change, in the same write).
  std::optional<absl::StatusOr<v1::Sweep>> Replayed(const Sweep& sweep, const std::string& key,
                                                    const std::string& fingerprint) const;
  // A new budget (`hpo extend`, `hpo enqueue`): applied and stored, and a sweep that had ended
  // reopens.
  void Change(Sweep& sweep, const BudgetChange& change, const std::string& message);
  v1::Sweep View(const Sweep& sweep, bool with_spec = false) const;

  // What a file's omissions mean for sweeps submitted now, and for stored ones (Options).
  std::vector<SpecDefaults> spec_defaults_;
  ParseOptions SubmitDefaults() const { return ParseOptions{&spec_defaults_.back(), false}; }
  Store& store_;
  backend::Backend& backend_;
  TrialFiles& files_;
  const Clock& clock_;
  Telemetry none_;  // when Options give no telemetry
  Telemetry* telemetry_;
  SweepTable table_;
  EventPublisher events_;
  TrialLifecycle lifecycle_;
  ReportIntake intake_;
  BatchLoop loop_;
  std::shared_ptr<Slots> plan_slots_ =
      Slots::Make("plans being computed", kPlansPerUser, kPlansInAll);
  // After loop_: joined before it goes. Plans are background work: reports go first.
  WorkQueue plans_{WorkQueue::Priority::kBackground};
  bool writable_ = true;  // as last logged
  bool stopped_ = false;
};

}  // namespace hpo::server
