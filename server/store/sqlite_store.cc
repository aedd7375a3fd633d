#include "server/store/sqlite_store.h"

#include <sqlite3.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace hpo::server {

SqliteStore::SqliteStore(sqlite3* db, std::string path, const Options& options)
    : db_(db), path_(std::move(path)), options_(options) {}

absl::Time SqliteStore::Now() const {
  return options_.clock != nullptr ? options_.clock->Now() : SystemClock::Get().Now();
}

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path,
                                                               const Options& options) {
  const char* vfs = options.vfs.empty() ? nullptr : options.vfs.c_str();
  sqlite3* db = nullptr;
  int flags = options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, vfs);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("cannot open the store ", path, ": ", msg));
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(db, path, options));
  // Held alone, nobody else ever has the file: waiting for it would only delay the error.
  sqlite3_busy_timeout(db, options.exclusive ? 0 : 5000);
  // A reader takes the file as its writer keeps it (in WAL mode), and reads it lazily.
  if (options.read_only) return store;
  // Before WAL is entered: then SQLite keeps the WAL's index in this process's memory.
  if (options.exclusive) {
    if (absl::Status s = store->Exec("PRAGMA locking_mode=EXCLUSIVE"); !s.ok()) return s;
  }
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA foreign_keys=ON",
        options.durable ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"}) {
    if (absl::Status s = store->Exec(pragma); !s.ok()) return s;
  }
  if (absl::Status s = store->Migrate(); !s.ok()) return s;
  // Held alone, the store checkpoints on its own connection, after commits; with the shared
  // index, a thread of its own does it (below).
  for (const char* pragma :
       {options.exclusive ? "PRAGMA wal_autocheckpoint=1000" : "PRAGMA wal_autocheckpoint=0",
        "PRAGMA journal_size_limit=67108864"}) {
    if (absl::Status s = store->Exec(pragma); !s.ok()) return s;
  }
  if (absl::Status s = store->LoadNextIds(); !s.ok()) return s;
  // Reports an earlier run left staged go to their table now.
  if (absl::Status s = store->Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  absl::Status flushed = store->FlushReportLog(0, 1);
  if (flushed.ok()) flushed = store->Exec("COMMIT");
  if (!flushed.ok()) {
    store->Exec("ROLLBACK").IgnoreError();
    return flushed;
  }
  // Held alone: the writes above took the file's lock, which this connection keeps until it
  // closes.
  if (options.exclusive) return store;
  if (sqlite3_open_v2(path.c_str(), &store->checkpoint_db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, vfs) != SQLITE_OK) {
    return absl::UnavailableError(absl::StrCat("cannot open ", path, " for checkpoints"));
  }
  sqlite3_busy_timeout(store->checkpoint_db_, 1000);
  // A connection opens its file lazily; until it has read it, it does not know the file is in WAL
  // mode, and its checkpoints silently do nothing (the WAL then grew without end under load).
  if (sqlite3_exec(store->checkpoint_db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr) !=
      SQLITE_OK) {
    return absl::UnavailableError(absl::StrCat(
        "cannot open ", path, " for checkpoints: ", sqlite3_errmsg(store->checkpoint_db_)));
  }
  SqliteStore* raw = store.get();
  store->checkpointer_ = std::thread([raw] { raw->CheckpointLoop(); });
  return store;
}

namespace {
constexpr int kWalRestartFrames = 8192;  // 32 MiB of 4 KiB pages
}  // namespace

void SqliteStore::CheckpointLoop() {
  std::unique_lock lock(checkpoint_mu_);
  while (
      !checkpoint_cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stopping_; })) {
    lock.unlock();
    int log_frames = 0, done_frames = 0;
    sqlite3_wal_checkpoint_v2(checkpoint_db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log_frames,
                              &done_frames);
    // Under steady writes a passive checkpoint never finds the WAL idle, so the WAL never starts
    // over and keeps growing (and its index with it, in memory). Past kWalRestartFrames, a
    // RESTART checkpoint briefly holds writers off (the passive one copied nearly everything)
    // so that the next commit writes the WAL from its start; journal_size_limit then trims it.
    if (log_frames > kWalRestartFrames) {
      sqlite3_wal_checkpoint_v2(checkpoint_db_, nullptr, SQLITE_CHECKPOINT_RESTART, &log_frames,
                                &done_frames);
    }
    lock.lock();
  }
}

absl::StatusOr<std::unique_ptr<Store>> SqliteStore::OpenReader() const {
  // Held alone, the file has no room for another connection.
  if (options_.exclusive) {
    return absl::UnimplementedError(
        absl::StrCat("the store ", path_, " is held by its one connection"));
  }
  Options options = options_;
  options.read_only = true;
  options.fence = nullptr;
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteStore> reader, Open(path_, options));
  return std::unique_ptr<Store>(std::move(reader));
}

SqliteStore::~SqliteStore() {
  if (in_transaction_) Rollback();
  // Writes a failed commit kept get one last try, and the staged reports move.
  next_retry_ = absl::InfinitePast();
  if (!options_.read_only && Begin().ok()) {
    if (in_sql_ && failure_.ok()) failure_ = FlushReportLog(0, 1);
    if (absl::Status s = Commit(); !s.ok()) spdlog::error("store: on closing: {}", s.ToString());
  }
  {
    std::lock_guard lock(checkpoint_mu_);
    stopping_ = true;
  }
  checkpoint_cv_.notify_all();
  if (checkpointer_.joinable()) checkpointer_.join();
  if (checkpoint_db_ != nullptr) sqlite3_close(checkpoint_db_);
  for (auto& [sql, st] : stmts_) sqlite3_finalize(st);
  sqlite3_close(db_);
}

absl::Status SqliteStore::Error(absl::string_view op) const {
  int code = sqlite3_errcode(db_);
  std::string msg = absl::StrCat(op, " in ", path_, ": ", sqlite3_errmsg(db_));
  int primary = code & 0xff;
  if (primary == SQLITE_FULL || primary == SQLITE_READONLY || primary == SQLITE_IOERR ||
      primary == SQLITE_BUSY || primary == SQLITE_LOCKED || primary == SQLITE_CANTOPEN) {
    return absl::UnavailableError(msg);
  }
  return absl::InternalError(msg);
}

absl::Status SqliteStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    sqlite3_free(err);
    return Error(absl::StrCat("'", absl::string_view(sql).substr(0, 40), "'"));
  }
  return absl::OkStatus();
}

sqlite3_stmt* SqliteStore::Prepare(const char* sql) {
  auto it = stmts_.find(sql);
  if (it != stmts_.end()) {
    sqlite3_reset(it->second);
    sqlite3_clear_bindings(it->second);
    return it->second;
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, sql, -1, &st, nullptr) != SQLITE_OK) return nullptr;
  stmts_[sql] = st;
  return st;
}

absl::Status SqliteStore::Begin() {
  if (in_transaction_) return absl::InternalError("store: Begin inside a transaction");
  in_transaction_ = true;
  in_sql_ = false;
  failure_ = absl::OkStatus();
  writes_.clear();
  absl::Time now = Now();
  if (!health_.ok() && now < next_retry_) {
    failure_ = health_;  // too soon to try the disk again: this transaction's writes are kept
    return absl::OkStatus();
  }
  if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) {
    failure_ = s;
    return absl::OkStatus();
  }
  in_sql_ = true;
  for (const Write& w : kept_) {
    if (absl::Status s = Execute(w); !s.ok()) {
      failure_ = s;
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::Commit() {
  if (!in_transaction_) return absl::InternalError("store: Commit outside a transaction");
  in_transaction_ = false;
  if (in_sql_ && failure_.ok()) failure_ = MoveDueSlices();
  if (in_sql_ && failure_.ok()) {
    // A cached statement stepped to a row and left there keeps a read transaction open after
    // the commit, and an open reader stops the checkpointer: the WAL would grow without end.
    for (auto& [sql, st] : stmts_) sqlite3_reset(st);
    // The fence: a write of an hpod that lost its data directory is never committed.
    if (options_.fence && !options_.fence()) {
      failure_ = absl::AbortedError("this hpod no longer holds its data directory");
    } else {
      failure_ = Exec("COMMIT");
    }
  }
  if (failure_.ok()) {
    in_sql_ = false;
    writes_.clear();
    if (!kept_.empty() || !health_.ok()) {
      spdlog::info("store: {} write(s) kept since a failed commit are now durable", kept_.size());
    }
    kept_.clear();
    health_ = absl::OkStatus();
    return absl::OkStatus();
  }
  if (in_sql_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  bool tried = in_sql_;
  in_sql_ = false;
  kept_.insert(kept_.end(), std::make_move_iterator(writes_.begin()),
               std::make_move_iterator(writes_.end()));
  writes_.clear();
  if (tried) {
    health_ = absl::UnavailableError(absl::StrCat("cannot commit to ", path_, " (",
                                                  failure_.message(), "); ", kept_.size(),
                                                  " write(s) kept, retried every second"));
    next_retry_ = Now() + absl::Seconds(1);
  }
  return health_;
}

void SqliteStore::Rollback() {
  if (in_sql_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  in_sql_ = false;
  in_transaction_ = false;
  writes_.clear();
}

absl::Status SqliteStore::Take(Write write) {
  if (!in_transaction_) {  // a write on its own is a transaction of its own
    if (absl::Status s = Begin(); !s.ok()) return s;
    absl::Status taken = Take(std::move(write));
    if (!taken.ok()) {
      Rollback();
      return taken;
    }
    return Commit();
  }
  if (in_sql_ && failure_.ok()) {
    absl::Status s = Execute(write);
    if (!s.ok() && !absl::IsUnavailable(s)) return s;  // refused (unknown id, ...): not taken
    failure_ = s;
  }
  writes_.push_back(std::move(write));
  return absl::OkStatus();
}

absl::Status SqliteStore::Execute(const Write& w) {
  switch (w.kind) {
    case Write::Kind::kInsertSweep:
    case Write::Kind::kUpdateSweep:
      return WriteSweep(std::get<SweepRecord>(w.record), w.kind == Write::Kind::kInsertSweep);
    case Write::Kind::kDeleteSweep:
      return WriteDeleteSweep(std::get<SweepRecord>(w.record).id);
    case Write::Kind::kInsertTrial:
    case Write::Kind::kUpdateTrial:
      return WriteTrial(std::get<TrialRecord>(w.record), w.kind == Write::Kind::kInsertTrial);
    case Write::Kind::kReport:
      return WriteReport(std::get<ReportRecord>(w.record));
    case Write::Kind::kEvent:
      return WriteEvent(std::get<EventRecord>(w.record));
    case Write::Kind::kAllocation:
      return UpsertAllocation(std::get<AllocationRecord>(w.record));
  }
  return absl::InternalError("store: unknown write");
}

absl::StatusOr<int64_t> SqliteStore::InsertSweep(const SweepRecord& s) {
  SweepRecord rec = s;
  rec.id = next_sweep_id_;
  if (absl::Status t = Take({Write::Kind::kInsertSweep, std::move(rec)}); !t.ok()) return t;
  return next_sweep_id_++;
}

absl::Status SqliteStore::UpdateSweep(const SweepRecord& s) {
  return Take({Write::Kind::kUpdateSweep, s});
}

absl::Status SqliteStore::DeleteSweep(int64_t sweep_id) {
  SweepRecord rec;
  rec.id = sweep_id;
  return Take({Write::Kind::kDeleteSweep, std::move(rec)});
}

absl::StatusOr<int64_t> SqliteStore::InsertTrial(const TrialRecord& t) {
  TrialRecord rec = t;
  rec.id = next_trial_id_;
  if (absl::Status s = Take({Write::Kind::kInsertTrial, std::move(rec)}); !s.ok()) return s;
  return next_trial_id_++;
}

absl::Status SqliteStore::UpdateTrial(const TrialRecord& t) {
  return Take({Write::Kind::kUpdateTrial, t});
}

absl::Status SqliteStore::InsertReport(const ReportRecord& r) {
  return Take({Write::Kind::kReport, r});
}

absl::StatusOr<int64_t> SqliteStore::InsertEvent(const EventRecord& e) {
  EventRecord rec = e;
  rec.seq = next_seq_;
  if (absl::Status s = Take({Write::Kind::kEvent, std::move(rec)}); !s.ok()) return s;
  return next_seq_++;
}

absl::Status SqliteStore::WriteAllocation(const AllocationRecord& a) {
  return Take({Write::Kind::kAllocation, a});
}

}  // namespace hpo::server
