#pragma once
// Store: durable state of the daemon — sweeps, trials, reports and the event log.
//
// Contract:
// - One writer: the controller's thread calls every method. Implementations need not be
//   thread-safe. Readers in other processes (sqlite3, benchmarks) may read concurrently, and so
//   may a reader of this process (OpenReader), on a thread of its own.
// - Writes between Begin() and Commit() are one transaction. A write the store took (it returned
//   OK) becomes durable with a Commit() that returns OK: this one, or a later one. When a commit
//   fails (disk full, read-only, I/O error) the store keeps what it was given, Health() turns
//   UNAVAILABLE, and the store writes it all again at later commits, about once a second, until
//   one succeeds; then Health() is OK again. Nothing is half-written meanwhile. Rollback()
//   drops the current transaction's writes.
// - Reads see what has been committed.
// - Insert* assign the new row's id (sweeps, trials) or sequence number (events) at once; it
//   stays the row's id whatever the commit does.
// - The store does its own upkeep: moving staged reports to their indexed table, WAL
//   checkpoints. Every report of a sweep that ended is in its indexed home once the sweep's end
//   is committed.
// - Errors: INTERNAL for a bug or a corrupt file, NOT_FOUND for an unknown id on update,
//   UNAVAILABLE from Commit (see above) and from reads when the disk refuses.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "algorithms/search_space.h"
#include "backend/resources.h"
#include "hpo/v1/hpo.pb.h"

namespace hpo::server {

// What `hpo extend` changed of the sweep file's budget: applied over it whenever the sweep is
// planned (at submit, at recovery).
struct BudgetChange {
  std::optional<int64_t> max_trials;
  std::optional<int64_t> max_concurrent;
  std::optional<absl::Duration> wall_time;  // counted from the sweep's creation, as the file's
  std::optional<double> gpu_hours;
  std::optional<double> node_hours;
  // The GPU-hours each user other than the owner added to the budget with their extends (what
  // an operator's cap, Caller::max_extend_gpu_hours, is held against).
  std::map<std::string, double> gpu_hours_added_by;
  bool empty() const {
    return !max_trials && !max_concurrent && !wall_time && !gpu_hours && !node_hours;
  }
};

// A node as one sweep has found it (SweepRecord::nodes).
struct NodeHealth {
  int failures = 0;  // since the sweep started, or since the user last allowed the node
  bool quarantined = false;
  absl::Time quarantined_at = absl::InfinitePast();  // when it was, while it is
  std::string last_failure;                          // the last such failure's message
  bool operator==(const NodeHealth&) const = default;
};

struct SweepRecord {
  int64_t id = 0;
  std::string name;
  std::string spec_yaml;
  std::string source;
  std::string base_dir;
  v1::SweepState state = v1::SWEEP_STATE_RUNNING;
  std::string message;
  absl::Time created_at;
  std::optional<absl::Time> ended_at;
  // Set while the sweep winds down (canceled, goal reached, ...): the final state it takes once
  // its last trial ended. UNSPECIFIED otherwise.
  v1::SweepState ending = v1::SWEEP_STATE_UNSPECIFIED;
  std::string owner;  // the user who submitted it (see server/auth.h)
  // Where its trials run ("local", "slurm"): resolved at submit. Empty in sweeps stored before
  // hpod served several backends: they run on the daemon's default.
  std::string backend;
  BudgetChange budget_change;
  // Configurations given to run first (the file's `enqueue:`, `hpo enqueue`) that are not
  // trials yet, in order.
  std::vector<algorithms::Params> queue;
  // The keys of the last changes applied (ExtendSweepRequest.request_id, EnqueueRequest's) with
  // a fingerprint of each request, oldest first: a retry is answered without applying it again.
  std::vector<std::pair<std::string, std::string>> applied;
  // The nodes where its trials failed by the infrastructure's fault (a failures rule matched),
  // by name: how many did, and whether the node is quarantined (SweepSpec failures).
  std::map<std::string, NodeHealth> nodes;
  // What the sweep was expected to cost when submitted (server/core/estimate.h's EstimateJson);
  // empty when no estimate could be made.
  std::string plan_json;
  // What the file's omissions mean (server/spec/sweep_spec.h, SpecDefaults): the version of the
  // defaults it was submitted under, for good; sweeps stored before versions were kept have 1,
  // the defaults they ran under. And the hpod that took it ("" before that was kept).
  int defaults_version = 1;
  std::string hpod_version;
};

// One run of a trial that an interruption ended: a resumable trial continues as its next
// segment, from its checkpoint (see SweepSpec::checkpoint).
struct SegmentRecord {
  int number = 1;
  absl::Time started_at;
  absl::Time ended_at;
  std::string backend_id;
  std::string gpus;
  double gpu_seconds = 0;  // its run time x the GPUs it held
  v1::Interruption interruption = v1::INTERRUPTION_UNSPECIFIED;
  std::string message;
};

// TrialRecord::origin of a trial made from an enqueued configuration.
inline constexpr char kEnqueued[] = "enqueued";
// ... of a completed trial of an earlier sweep (warm_start, hpo fork): in the history, not run.
inline constexpr char kWarmStart[] = "warm_start";

struct TrialRecord {
  int64_t id = 0;
  int64_t sweep_id = 0;
  int64_t number = 0;
  v1::TrialState state = v1::TRIAL_STATE_PENDING;
  algorithms::Params params;
  int64_t step = -1;
  std::map<std::string, double> last_metrics;
  std::optional<double> objective;
  absl::Time created_at;
  std::optional<absl::Time> started_at;
  std::optional<absl::Time> ended_at;
  int exit_code = 0;
  int term_signal = 0;
  std::string message;
  std::string backend_id;
  std::string trial_dir;
  int attempt = 1;
  int64_t retry_of = 0;
  std::string token;
  int64_t report_count = 0;
  std::string gpus;
  bool infra_failure = false;  // LOST or failed because of the infrastructure, not the config
  int64_t parent = -1;         // PBT: the trial (number) whose checkpoint this one started from
  int64_t lineage = -1;        // PBT: the population member it belongs to
  // Set once hpod decided to stop the trial (early stopping, a cancel, the sweep's end): the
  // state it ends in whatever its exit code, and why. UNSPECIFIED: no stop was decided.
  v1::TrialState stop_state = v1::TRIAL_STATE_UNSPECIFIED;
  std::string stop_reason;
  v1::Interruption interruption = v1::INTERRUPTION_UNSPECIFIED;  // LOST: what took it
  // Set before the trial is told to checkpoint (its allocation or time limit ends, or a
  // preemption): however its segment then exits, even while hpod is down, it continues as its
  // next segment. Cleared when a segment starts.
  v1::Interruption checkpoint_requested = v1::INTERRUPTION_UNSPECIFIED;
  // Resumable trials run in segments: the current one (1 until an interruption), when it
  // started, the GPU-seconds of the ended ones (of all once the trial ended), and those that
  // interruptions ended, oldest first.
  int segment = 1;
  std::optional<absl::Time> segment_started_at;
  double gpu_seconds = 0;
  std::vector<SegmentRecord> segments;
  // Where its parameters came from: "" the sampler (or, for a retry, its original);
  // "enqueued": given by the user.
  std::string origin;
};

// An allocation hpod held for a sweep (Slurm steps mode), for what it cost.
using AllocationRecord = backend::AllocationUsage;

struct ReportRecord {
  int64_t trial_id = 0;
  int64_t step = 0;
  std::map<std::string, double> metrics;
  absl::Time time;
  int64_t report_id = 0;  // the client's id for it (ReportRequest.report_id); 0: none
};

struct EventRecord {
  int64_t seq = 0;
  int64_t sweep_id = 0;
  int64_t trial_id = 0;
  std::string payload;  // a serialized hpo.v1.Event (without seq)
};

class Store {
 public:
  virtual ~Store() = default;

  [[nodiscard]] virtual absl::Status Begin() = 0;
  [[nodiscard]] virtual absl::Status Commit() = 0;
  virtual void Rollback() = 0;
  // OK while commits succeed; UNAVAILABLE with the cause from a failed commit until the writes
  // it kept have been committed.
  [[nodiscard]] virtual absl::Status Health() const = 0;

  [[nodiscard]] virtual absl::StatusOr<int64_t> InsertSweep(const SweepRecord& sweep) = 0;
  [[nodiscard]] virtual absl::Status UpdateSweep(const SweepRecord& sweep) = 0;
  // The sweep and everything of it: its trials, their reports, its events, its allocations.
  [[nodiscard]] virtual absl::Status DeleteSweep(int64_t sweep_id) = 0;
  [[nodiscard]] virtual absl::StatusOr<int64_t> InsertTrial(const TrialRecord& trial) = 0;
  [[nodiscard]] virtual absl::Status UpdateTrial(const TrialRecord& trial) = 0;
  [[nodiscard]] virtual absl::Status InsertReport(const ReportRecord& report) = 0;
  [[nodiscard]] virtual absl::StatusOr<int64_t> InsertEvent(const EventRecord& event) = 0;
  // Inserts the allocation, or replaces the one with its id.
  [[nodiscard]] virtual absl::Status WriteAllocation(const AllocationRecord& allocation) = 0;

  [[nodiscard]] virtual absl::StatusOr<std::vector<SweepRecord>> LoadSweeps() = 0;
  [[nodiscard]] virtual absl::StatusOr<std::vector<TrialRecord>> LoadTrials(int64_t sweep_id) = 0;
  [[nodiscard]] virtual absl::StatusOr<std::vector<ReportRecord>> LoadReports(int64_t trial_id) = 0;
  // Events of one trial, oldest first, at most `limit`.
  [[nodiscard]] virtual absl::StatusOr<std::vector<EventRecord>> LoadTrialEvents(int64_t trial_id,
                                                                                 int limit) = 0;
  // The allocations held for the sweep, oldest first.
  [[nodiscard]] virtual absl::StatusOr<std::vector<AllocationRecord>> LoadAllocations(
      int64_t sweep_id) = 0;
  // Events of one sweep with seq > after_seq, oldest first, at most `limit`.
  [[nodiscard]] virtual absl::StatusOr<std::vector<EventRecord>> LoadEvents(int64_t sweep_id,
                                                                            int64_t after_seq,
                                                                            int limit) = 0;
  virtual int SchemaVersion() const = 0;
  // A second connection to the same store that reads what this one has committed, for use on
  // another thread while this one writes (a watch's replay); only its Load* calls work.
  // UNIMPLEMENTED when there can be none (the store is held by its one connection).
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<Store>> OpenReader() const {
    return absl::UnimplementedError("this store has no second connection");
  }
};

}  // namespace hpo::server
