#pragma once
// SqliteStore: the Store in one SQLite file, WAL mode, synchronous=FULL (a committed
// transaction survives power loss), schema versioned with PRAGMA user_version and migrated
// forward on open. A file written by a newer hpod is refused, not touched. A background thread
// checkpoints the WAL (PASSIVE, on its own connection) about every 200 ms.
//
// Thread safety: one thread (see Store).

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <string>

#include "absl/strings/string_view.h"
#include "server/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hpo::server {

class SqliteStore final : public Store {
 public:
  struct Options {
    bool durable = true;  // false: synchronous=NORMAL (tests, simulations)
  };
  // Opens (creating) the database at `path` and migrates it to the current schema.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path,
                                                           const Options& options);
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path) {
    return Open(path, Options());
  }
  ~SqliteStore() override;

  // The schema version this build writes.
  static int CurrentSchemaVersion();

  absl::Status Begin() override;
  absl::Status Commit() override;
  void Rollback() override;
  absl::StatusOr<int64_t> InsertSweep(const SweepRecord& sweep) override;
  absl::Status UpdateSweep(const SweepRecord& sweep) override;
  absl::StatusOr<int64_t> InsertTrial(const TrialRecord& trial) override;
  absl::Status UpdateTrial(const TrialRecord& trial) override;
  absl::Status InsertReport(const ReportRecord& report) override;
  absl::Status FlushReportLog(int slice = 0, int slices = 1) override;
  absl::StatusOr<int64_t> InsertEvent(const EventRecord& event) override;
  absl::StatusOr<std::vector<SweepRecord>> LoadSweeps() override;
  absl::StatusOr<std::vector<TrialRecord>> LoadTrials(int64_t sweep_id) override;
  absl::StatusOr<std::vector<ReportRecord>> LoadReports(int64_t trial_id) override;
  absl::StatusOr<std::vector<EventRecord>> LoadEvents(int64_t sweep_id, int64_t after_seq,
                                                      int limit) override;
  int SchemaVersion() const override { return schema_version_; }

 private:
  class Stmt;
  explicit SqliteStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  void CheckpointLoop();
  absl::Status Exec(const char* sql);
  absl::Status Migrate();
  absl::Status Error(absl::string_view op) const;
  sqlite3_stmt* Prepare(const char* sql);
  absl::Status BindTrial(sqlite3_stmt* st, const TrialRecord& t);

  sqlite3* db_;
  std::string path_;
  int schema_version_ = 0;
  std::map<std::string, sqlite3_stmt*> stmts_;

  // WAL checkpoints run on their own connection and thread, so the writer's commits never wait
  // for the copy into the main file.
  sqlite3* checkpoint_db_ = nullptr;
  std::thread checkpointer_;
  std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  bool stopping_ = false;  // guarded by checkpoint_mu_
};

}  // namespace hpo::server
