#pragma once
// SqliteStore: the Store in one SQLite file, WAL mode, synchronous=FULL (a committed
// transaction survives power loss), schema versioned with PRAGMA user_version and migrated
// forward on open. A file written by a newer hpod is refused, not touched.
//
// Upkeep it does itself:
// - Reports are appended to an unindexed staging table and moved, sorted by trial, into the
//   indexed one within `report_flush_interval`, in eight slices (the trials with
//   trial_id % 8 equal to the slice), as part of the commits: under load each commit moves at
//   most one slice, so that no commit carries the whole move. The whole log moves when the
//   store opens, when a sweep's end is written, and when the store closes.
// - A background thread checkpoints the WAL (PASSIVE, on its own connection) about every 200 ms,
//   and restarts it past 8192 frames so that it does not grow without end.
// - Ids are assigned by the store (from the largest in the file), so a write kept across a
//   failed commit keeps its id. Every write of a transaction is also kept in memory until the
//   transaction commits; after a failed commit they are written again, once a second at most,
//   at the start of the next transaction (see Store).
//
// Thread safety: one thread (see Store).

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "server/store/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hpo::server {

class SqliteStore final : public Store {
 public:
  struct Options {
    bool durable = true;  // false: synchronous=NORMAL (tests, simulations)
    // Staged reports reach their indexed table within this long.
    absl::Duration report_flush_interval = absl::Milliseconds(50);
    // The time the upkeep runs by; null: the system clock.
    const Clock* clock = nullptr;
    // The SQLite VFS to open the file with; empty: SQLite's default. (Tests inject disk faults
    // through a VFS of their own.)
    std::string vfs;
    // For a store on a network file system (NFS, Lustre, GPFS): WAL without shared memory. The
    // file is held by this one connection for as long as it is open (locking_mode=EXCLUSIVE,
    // so a second opener gets "database is locked"), and checkpoints run on it after commits
    // (SQLite's autocheckpoint) instead of on a connection and thread of their own.
    bool exclusive = false;
    // Asked inside every write transaction, just before its COMMIT: false (this hpod no longer
    // holds its data directory: DaemonLock::StillHeld) and the transaction is rolled back, not
    // committed. Null: not asked.
    std::function<bool()> fence;
    // A reader of a store another connection writes (Store::ReadablePath): the file is opened
    // read-only as it is (it must exist); only the Load* calls work, and they see what the writer
    // has committed.
    bool read_only = false;
  };
  // Opens (creating) the database at `path` and migrates it to the current schema.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path,
                                                                         const Options& options);
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path) {
    return Open(path, Options());
  }
  // Moves the staged reports to their table (best effort) and closes the file.
  ~SqliteStore() override;

  // The schema version this build writes.
  static int CurrentSchemaVersion();

  [[nodiscard]] absl::Status Begin() override;
  [[nodiscard]] absl::Status Commit() override;
  void Rollback() override;
  [[nodiscard]] absl::Status Health() const override { return health_; }
  [[nodiscard]] absl::StatusOr<int64_t> InsertSweep(const SweepRecord& sweep) override;
  [[nodiscard]] absl::Status UpdateSweep(const SweepRecord& sweep) override;
  [[nodiscard]] absl::Status DeleteSweep(int64_t sweep_id) override;
  [[nodiscard]] absl::StatusOr<int64_t> InsertTrial(const TrialRecord& trial) override;
  [[nodiscard]] absl::Status UpdateTrial(const TrialRecord& trial) override;
  [[nodiscard]] absl::Status InsertReport(const ReportRecord& report) override;
  [[nodiscard]] absl::StatusOr<int64_t> InsertEvent(const EventRecord& event) override;
  [[nodiscard]] absl::Status WriteAllocation(const AllocationRecord& allocation) override;
  [[nodiscard]] absl::StatusOr<std::vector<SweepRecord>> LoadSweeps() override;
  [[nodiscard]] absl::StatusOr<std::vector<TrialRecord>> LoadTrials(int64_t sweep_id) override;
  [[nodiscard]] absl::StatusOr<std::vector<ReportRecord>> LoadReports(int64_t trial_id) override;
  [[nodiscard]] absl::StatusOr<std::vector<EventRecord>> LoadTrialEvents(int64_t trial_id,
                                                                         int limit) override;
  [[nodiscard]] absl::StatusOr<std::vector<AllocationRecord>> LoadAllocations(
      int64_t sweep_id) override;
  [[nodiscard]] absl::StatusOr<std::vector<EventRecord>> LoadEvents(int64_t sweep_id,
                                                                    int64_t after_seq,
                                                                    int limit) override;
  int SchemaVersion() const override { return schema_version_; }
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Store>> OpenReader() const override;

 private:
  // One write as it was handed over, kept until it commits.
  struct Write {
    enum class Kind {
      kInsertSweep,
      kUpdateSweep,
      kDeleteSweep,
      kInsertTrial,
      kUpdateTrial,
      kReport,
      kEvent,
      kAllocation
    };
    Kind kind;
    std::variant<SweepRecord, TrialRecord, ReportRecord, EventRecord, AllocationRecord> record;
  };

  SqliteStore(sqlite3* db, std::string path, const Options& options);
  void CheckpointLoop();
  [[nodiscard]] absl::Status Exec(const char* sql);
  [[nodiscard]] absl::Status Migrate();
  [[nodiscard]] absl::Status LoadNextIds();
  [[nodiscard]] absl::Status Error(absl::string_view op) const;
  sqlite3_stmt* Prepare(const char* sql);
  void BindTrial(sqlite3_stmt* st, const TrialRecord& t);
  // The rows of an event query (seq, sweep_id, trial_id, payload); `what` for the error.
  [[nodiscard]] absl::StatusOr<std::vector<EventRecord>> ReadEvents(sqlite3_stmt* st,
                                                                    const std::string& what);

  // Takes a write: runs it now when a transaction runs and nothing failed yet, and keeps it.
  [[nodiscard]] absl::Status Take(Write write);
  [[nodiscard]] absl::Status Execute(const Write& write);
  [[nodiscard]] absl::Status WriteSweep(const SweepRecord& s, bool insert);
  [[nodiscard]] absl::Status WriteDeleteSweep(int64_t sweep_id);
  [[nodiscard]] absl::Status WriteTrial(const TrialRecord& t, bool insert);
  [[nodiscard]] absl::Status WriteReport(const ReportRecord& r);
  [[nodiscard]] absl::Status WriteEvent(const EventRecord& e);
  [[nodiscard]] absl::Status UpsertAllocation(const AllocationRecord& a);
  // Moves the staged reports of one slice of the trials (slices 1: all of them).
  [[nodiscard]] absl::Status FlushReportLog(int slice, int slices);
  // The slices that are due, within the current transaction.
  [[nodiscard]] absl::Status MoveDueSlices();
  absl::Time Now() const;

  sqlite3* db_;
  std::string path_;
  Options options_;
  int schema_version_ = 0;
  std::map<std::string, sqlite3_stmt*> stmts_;

  int64_t next_sweep_id_ = 1, next_trial_id_ = 1, next_seq_ = 1;
  bool in_transaction_ = false;  // between Begin and Commit / Rollback
  bool in_sql_ = false;          // ... and SQLite's transaction is open
  absl::Status failure_;         // why this transaction cannot commit
  std::vector<Write> writes_;    // this transaction's
  std::vector<Write> kept_;      // of failed commits, written again first
  absl::Status health_;
  absl::Time next_retry_ = absl::InfinitePast();
  absl::Time next_flush_ = absl::InfinitePast();  // when the next slice of staged reports is due
  int flush_slice_ = 0;

  // WAL checkpoints run on their own connection and thread, so the writer's commits never wait
  // for the copy into the main file.
  sqlite3* checkpoint_db_ = nullptr;
  std::thread checkpointer_;
  std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  bool stopping_ ABSL_GUARDED_BY(checkpoint_mu_) = false;
};

}  // namespace hpo::server
