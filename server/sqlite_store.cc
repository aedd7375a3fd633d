#include "server/sqlite_store.h"

#include <sqlite3.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "hpo/v1/states.h"
#include "nlohmann/json.hpp"
#include "server/convert.h"
#include "spdlog/spdlog.h"

namespace hpo::server {
namespace {

using nlohmann::json;

// Each entry moves the schema from version i to i + 1. Never edit a released entry: add one.
const std::vector<const char*> kMigrations = {
    // 0 -> 1: the first schema.
    R"sql(
    CREATE TABLE sweeps (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      name TEXT NOT NULL,
      spec_yaml TEXT NOT NULL,
      source TEXT NOT NULL,
      base_dir TEXT NOT NULL,
      state TEXT NOT NULL,
      message TEXT NOT NULL DEFAULT '',
      created_at REAL NOT NULL,
      ended_at REAL,
      ending TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE trials (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
      number INTEGER NOT NULL,
      state TEXT NOT NULL,
      params_json TEXT NOT NULL,
      step INTEGER NOT NULL DEFAULT -1,
      last_metrics_json TEXT NOT NULL DEFAULT '{}',
      objective REAL,
      created_at REAL NOT NULL,
      started_at REAL,
      ended_at REAL,
      exit_code INTEGER NOT NULL DEFAULT 0,
      term_signal INTEGER NOT NULL DEFAULT 0,
      message TEXT NOT NULL DEFAULT '',
      backend_id TEXT NOT NULL DEFAULT '',
      trial_dir TEXT NOT NULL DEFAULT '',
      attempt INTEGER NOT NULL DEFAULT 1,
      retry_of INTEGER NOT NULL DEFAULT 0,
      token TEXT NOT NULL,
      report_count INTEGER NOT NULL DEFAULT 0,
      gpus TEXT NOT NULL DEFAULT '',
      infra_failure INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX trials_by_sweep ON trials(sweep_id, number);
    CREATE TABLE reports (
      trial_id INTEGER NOT NULL REFERENCES trials(id),
      step INTEGER NOT NULL,
      metric TEXT NOT NULL,
      value REAL NOT NULL,
      time REAL NOT NULL
    );
    CREATE INDEX reports_by_trial ON reports(trial_id, step);
    -- New reports land here (append-only, no index: each commit writes a page or two) and move
    -- to `reports`, sorted by trial, once per controller tick (FlushReportLog).
    CREATE TABLE report_log (
      trial_id INTEGER NOT NULL,
      step INTEGER NOT NULL,
      metric TEXT NOT NULL,
      value REAL NOT NULL,
      time REAL NOT NULL
    );
    CREATE TABLE events (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      sweep_id INTEGER NOT NULL,
      trial_id INTEGER NOT NULL DEFAULT 0,
      payload BLOB NOT NULL
    );
    CREATE INDEX events_by_sweep ON events(sweep_id, seq);
    )sql",
    // 1 -> 2: PBT. parent: the trial (number) whose checkpoint this one started from; lineage:
    // the population member it belongs to. -1: none.
    R"sql(
    ALTER TABLE trials ADD COLUMN parent INTEGER NOT NULL DEFAULT -1;
    ALTER TABLE trials ADD COLUMN lineage INTEGER NOT NULL DEFAULT -1;
    )sql",
    // 2 -> 3: users. owner: the name of the user whose token submitted the sweep ("" before).
    R"sql(
    ALTER TABLE sweeps ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    )sql",
    // 3 -> 4: report ids. report_id: the client's id for the report, kept with each of its rows,
    // so that a retry after a restart is recognized (0: the client gave none).
    R"sql(
    ALTER TABLE reports ADD COLUMN report_id INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE report_log ADD COLUMN report_id INTEGER NOT NULL DEFAULT 0;
    )sql",
    // 4 -> 5: stop decisions and interruptions. stop_state: the state a trial hpod decided to
    // stop ends in (a TrialState name; '' for none), stop_reason: why; durable before the trial
    // is signaled, so that a trial being stopped when hpod died ends in that state after a
    // restart. interruption: what the infrastructure did to a LOST trial (an Interruption name;
    // '' for none).
    R"sql(
    ALTER TABLE trials ADD COLUMN stop_state TEXT NOT NULL DEFAULT '';
    ALTER TABLE trials ADD COLUMN stop_reason TEXT NOT NULL DEFAULT '';
    ALTER TABLE trials ADD COLUMN interruption TEXT NOT NULL DEFAULT '';
    )sql",
    // v6: segments of resumable trials. segment: the current one (from 1); segment_started_at;
    // gpu_seconds: GPUs held times running time over the ended segments (and retries count
    // their own); segments_json: the segments interruptions ended, [{number, started_at,
    // ended_at, backend_id, gpus, gpu_seconds, interruption, message}].
    R"sql(
    ALTER TABLE trials ADD COLUMN segment INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE trials ADD COLUMN segment_started_at REAL;
    ALTER TABLE trials ADD COLUMN gpu_seconds REAL NOT NULL DEFAULT 0;
    ALTER TABLE trials ADD COLUMN segments_json TEXT NOT NULL DEFAULT '[]';
    )sql",
    // v7: one daemon, several backends, and sweeps changed after submit. backend: where the
    // sweep's trials run ('' before: the daemon's default); budget_json: what `hpo extend`
    // changed of the file's budget ({max_trials, max_concurrent, wall_time_s, gpu_hours}, and
    // node_hours from v8 on); queue_json: configurations enqueued and not yet made trials
    // ([{name: value}]); a trial's origin: '' sampled, 'enqueued'.
    R"sql(
    ALTER TABLE sweeps ADD COLUMN backend TEXT NOT NULL DEFAULT '';
    ALTER TABLE sweeps ADD COLUMN budget_json TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE sweeps ADD COLUMN queue_json TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE trials ADD COLUMN origin TEXT NOT NULL DEFAULT '';
    )sql",
    // v8: the allocations hpod held for each sweep (Slurm steps mode), for what they cost. id:
    // the backend's ("slurm:1234"); gpus and nodes over the whole allocation; ended_at NULL
    // while held; ends_at: while held, when its time limit ends it (NULL: none known).
    R"sql(
    CREATE TABLE allocations (
      id TEXT PRIMARY KEY,
      sweep_id INTEGER NOT NULL,
      gpus INTEGER NOT NULL,
      nodes INTEGER NOT NULL,
      started_at REAL NOT NULL,
      ended_at REAL,
      ends_at REAL
    );
    CREATE INDEX allocations_by_sweep ON allocations(sweep_id);
    )sql",
    // v9: a trial's events, for its history (the dashboard's trial page).
    "CREATE INDEX events_by_trial ON events(trial_id, seq);",
    // v10: crash windows closed. applied_json: the keys of the last changes applied to a sweep
    // with their requests' fingerprints ([[key, fingerprint]]), so that a retried extend or
    // enqueue applies once; checkpoint_requested: the Interruption a trial was told to
    // checkpoint for, stored before the signal ('' none).
    R"sql(
    ALTER TABLE sweeps ADD COLUMN applied_json TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE trials ADD COLUMN checkpoint_requested TEXT NOT NULL DEFAULT '';
    )sql",
};

absl::Time FromUnix(double s) { return absl::UnixEpoch() + absl::Seconds(s); }

algorithms::Params ParamsFromJson(const json& j) {
  algorithms::Params out;
  for (const auto& [k, v] : j.items()) {
    if (v.is_boolean())
      out[k] = v.get<bool>();
    else if (v.is_number_integer())
      out[k] = v.get<int64_t>();
    else if (v.is_number())
      out[k] = v.get<double>();
    else if (v.is_string())
      out[k] = v.get<std::string>();
  }
  return out;
}

std::string InterruptionText(v1::Interruption i) {
  return i == v1::INTERRUPTION_UNSPECIFIED ? "" : v1::Interruption_Name(i);
}

v1::Interruption InterruptionFromText(const std::string& text) {
  v1::Interruption i = v1::INTERRUPTION_UNSPECIFIED;
  if (!text.empty()) v1::Interruption_Parse(text, &i);
  return i;
}

std::string SegmentsToJson(const std::vector<SegmentRecord>& segments) {
  if (segments.empty()) return "[]";
  json out = json::array();
  for (const SegmentRecord& s : segments) {
    out.push_back({{"number", s.number},
                   {"started_at", UnixSeconds(s.started_at)},
                   {"ended_at", UnixSeconds(s.ended_at)},
                   {"backend_id", s.backend_id},
                   {"gpus", s.gpus},
                   {"gpu_seconds", s.gpu_seconds},
                   {"interruption", InterruptionText(s.interruption)},
                   {"message", s.message}});
  }
  return out.dump();
}

std::vector<SegmentRecord> SegmentsFromJson(const json& j) {
  std::vector<SegmentRecord> out;
  for (const json& e : j) {
    SegmentRecord s;
    s.number = e.value("number", 1);
    s.started_at = FromUnix(e.value("started_at", 0.0));
    s.ended_at = FromUnix(e.value("ended_at", 0.0));
    s.backend_id = e.value("backend_id", "");
    s.gpus = e.value("gpus", "");
    s.gpu_seconds = e.value("gpu_seconds", 0.0);
    s.interruption = InterruptionFromText(e.value("interruption", ""));
    s.message = e.value("message", "");
    out.push_back(std::move(s));
  }
  return out;
}

std::string Text(sqlite3_stmt* st, int col) {
  const unsigned char* p = sqlite3_column_text(st, col);
  return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p));
}

std::optional<double> OptReal(sqlite3_stmt* st, int col) {
  if (sqlite3_column_type(st, col) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(st, col);
}

void BindOptTime(sqlite3_stmt* st, int idx, const std::optional<absl::Time>& t) {
  if (t)
    sqlite3_bind_double(st, idx, UnixSeconds(*t));
  else
    sqlite3_bind_null(st, idx);
}

void BindText(sqlite3_stmt* st, int idx, const std::string& s) {
  sqlite3_bind_text(st, idx, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
}

}  // namespace

int SqliteStore::CurrentSchemaVersion() { return static_cast<int>(kMigrations.size()); }

SqliteStore::SqliteStore(sqlite3* db, std::string path, const Options& options)
    : db_(db), path_(std::move(path)), options_(options) {}

absl::Time SqliteStore::Now() const {
  return options_.clock != nullptr ? options_.clock->Now() : SystemClock::Get().Now();
}

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path,
                                                               const Options& options) {
  const char* vfs = options.vfs.empty() ? nullptr : options.vfs.c_str();
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, vfs);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("cannot open the store ", path, ": ", msg));
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(db, path, options));
  sqlite3_busy_timeout(db, 5000);
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA foreign_keys=ON",
        options.durable ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"}) {
    if (absl::Status s = store->Exec(pragma); !s.ok()) return s;
  }
  if (absl::Status s = store->Migrate(); !s.ok()) return s;
  for (const char* pragma : {"PRAGMA wal_autocheckpoint=0", "PRAGMA journal_size_limit=67108864"}) {
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

absl::Status SqliteStore::LoadNextIds() {
  // The largest id ever given (sqlite_sequence remembers those of deleted rows too).
  struct Counter {
    const char* sql;
    int64_t* next;
  };
  for (Counter c : {Counter{"SELECT MAX(x) FROM (SELECT MAX(id) AS x FROM sweeps UNION ALL "
                            "SELECT seq FROM sqlite_sequence WHERE name='sweeps')",
                            &next_sweep_id_},
                    Counter{"SELECT MAX(x) FROM (SELECT MAX(id) AS x FROM trials UNION ALL "
                            "SELECT seq FROM sqlite_sequence WHERE name='trials')",
                            &next_trial_id_},
                    Counter{"SELECT MAX(x) FROM (SELECT MAX(seq) AS x FROM events UNION ALL "
                            "SELECT seq FROM sqlite_sequence WHERE name='events')",
                            &next_seq_}}) {
    sqlite3_stmt* st = Prepare(c.sql);
    if (st == nullptr) return Error("preparing the id query");
    if (sqlite3_step(st) != SQLITE_ROW) return Error("reading the largest ids");
    *c.next = sqlite3_column_int64(st, 0) + 1;
    sqlite3_reset(st);
  }
  return absl::OkStatus();
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

SqliteStore::~SqliteStore() {
  if (in_transaction_) Rollback();
  // Writes a failed commit kept get one last try, and the staged reports move.
  next_retry_ = absl::InfinitePast();
  if (Begin().ok()) {
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

absl::Status SqliteStore::Migrate() {
  sqlite3_stmt* st = Prepare("PRAGMA user_version");
  if (st == nullptr) return Error("reading the schema version");
  int version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
  sqlite3_reset(st);
  if (version > CurrentSchemaVersion()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, " has schema version ", version, " but this hpod knows up to ",
                     CurrentSchemaVersion(), ": it was written by a newer hpod; upgrade hpod"));
  }
  while (version < CurrentSchemaVersion()) {
    if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    absl::Status s = Exec(kMigrations[static_cast<size_t>(version)]);
    if (s.ok()) s = Exec(absl::StrCat("PRAGMA user_version=", version + 1).c_str());
    if (!s.ok()) {
      Rollback();
      return absl::Status(s.code(),
                          absl::StrCat("migrating to schema ", version + 1, ": ", s.message()));
    }
    if (absl::Status c = Exec("COMMIT"); !c.ok()) return c;
    ++version;
  }
  schema_version_ = version;
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
    failure_ = Exec("COMMIT");
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

absl::Status SqliteStore::WriteDeleteSweep(int64_t sweep_id) {
  for (const char* sql :
       {"DELETE FROM reports WHERE trial_id IN (SELECT id FROM trials WHERE sweep_id=?1)",
        "DELETE FROM report_log WHERE trial_id IN (SELECT id FROM trials WHERE sweep_id=?1)",
        "DELETE FROM events WHERE sweep_id=?1", "DELETE FROM allocations WHERE sweep_id=?1",
        "DELETE FROM trials WHERE sweep_id=?1", "DELETE FROM sweeps WHERE id=?1"}) {
    sqlite3_stmt* st = Prepare(sql);
    if (st == nullptr) return Error("preparing a sweep's removal");
    sqlite3_bind_int64(st, 1, sweep_id);
    if (sqlite3_step(st) != SQLITE_DONE) return Error(absl::StrCat("removing sweep ", sweep_id));
  }
  return absl::OkStatus();
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

namespace {

std::string BudgetChangeJson(const BudgetChange& c) {
  json j = json::object();
  if (c.max_trials) j["max_trials"] = *c.max_trials;
  if (c.max_concurrent) j["max_concurrent"] = *c.max_concurrent;
  if (c.wall_time) j["wall_time_s"] = absl::ToDoubleSeconds(*c.wall_time);
  if (c.gpu_hours) j["gpu_hours"] = *c.gpu_hours;
  if (c.node_hours) j["node_hours"] = *c.node_hours;
  return j.dump();
}

BudgetChange BudgetChangeFromJson(const std::string& text) {
  BudgetChange c;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return c;
  if (j.contains("max_trials")) c.max_trials = j["max_trials"].get<int64_t>();
  if (j.contains("max_concurrent")) c.max_concurrent = j["max_concurrent"].get<int64_t>();
  if (j.contains("wall_time_s")) c.wall_time = absl::Seconds(j["wall_time_s"].get<double>());
  if (j.contains("gpu_hours")) c.gpu_hours = j["gpu_hours"].get<double>();
  if (j.contains("node_hours")) c.node_hours = j["node_hours"].get<double>();
  return c;
}

std::string QueueJson(const std::vector<algorithms::Params>& queue) {
  json j = json::array();
  for (const auto& p : queue) j.push_back(json::parse(ParamsToJsonText(p)));
  return j.dump();
}

std::vector<std::pair<std::string, std::string>> AppliedFromJson(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return out;
  for (const json& e : j) {
    if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      out.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    }
  }
  return out;
}

}  // namespace

absl::Status SqliteStore::WriteSweep(const SweepRecord& s, bool insert) {
  if (insert) {
    sqlite3_stmt* st = Prepare(
        "INSERT INTO sweeps(id, name, spec_yaml, source, base_dir, state, message, created_at,"
        " ended_at, owner, backend, budget_json, queue_json, applied_json)"
        " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    if (st == nullptr) return Error("preparing sweep insert");
    sqlite3_bind_int64(st, 1, s.id);
    BindText(st, 2, s.name);
    BindText(st, 3, s.spec_yaml);
    BindText(st, 4, s.source);
    BindText(st, 5, s.base_dir);
    BindText(st, 6, v1::SweepState_Name(s.state));
    BindText(st, 7, s.message);
    sqlite3_bind_double(st, 8, UnixSeconds(s.created_at));
    BindOptTime(st, 9, s.ended_at);
    BindText(st, 10, s.owner);
    BindText(st, 11, s.backend);
    BindText(st, 12, BudgetChangeJson(s.budget_change));
    BindText(st, 13, QueueJson(s.queue));
    BindText(st, 14, json(s.applied).dump());
    if (sqlite3_step(st) != SQLITE_DONE) return Error("inserting a sweep");
    return absl::OkStatus();
  }
  sqlite3_stmt* st = Prepare(
      "UPDATE sweeps SET name=?, state=?, message=?, ended_at=?, ending=?, budget_json=?, "
      "queue_json=?, applied_json=? WHERE id=?");
  if (st == nullptr) return Error("preparing sweep update");
  BindText(st, 1, s.name);
  BindText(st, 2, v1::SweepState_Name(s.state));
  BindText(st, 3, s.message);
  BindOptTime(st, 4, s.ended_at);
  BindText(st, 5, s.ending == v1::SWEEP_STATE_UNSPECIFIED ? "" : v1::SweepState_Name(s.ending));
  BindText(st, 6, BudgetChangeJson(s.budget_change));
  BindText(st, 7, QueueJson(s.queue));
  BindText(st, 8, json(s.applied).dump());
  sqlite3_bind_int64(st, 9, s.id);
  if (sqlite3_step(st) != SQLITE_DONE) return Error(absl::StrCat("updating sweep ", s.id));
  if (sqlite3_changes(db_) == 0) {
    return absl::NotFoundError(absl::StrCat("sweep ", s.id, " not in the store"));
  }
  // Every report of an ended sweep is in the indexed table once its end is committed.
  if (v1::IsFinal(s.state)) return FlushReportLog(0, 1);
  return absl::OkStatus();
}

void SqliteStore::BindTrial(sqlite3_stmt* st, const TrialRecord& t) {
  sqlite3_bind_int64(st, 1, t.sweep_id);
  sqlite3_bind_int64(st, 2, t.number);
  BindText(st, 3, v1::TrialState_Name(t.state));
  BindText(st, 4, ParamsToJsonText(t.params));
  sqlite3_bind_int64(st, 5, t.step);
  BindText(st, 6, json(t.last_metrics).dump());
  if (t.objective)
    sqlite3_bind_double(st, 7, *t.objective);
  else
    sqlite3_bind_null(st, 7);
  sqlite3_bind_double(st, 8, UnixSeconds(t.created_at));
  BindOptTime(st, 9, t.started_at);
  BindOptTime(st, 10, t.ended_at);
  sqlite3_bind_int(st, 11, t.exit_code);
  sqlite3_bind_int(st, 12, t.term_signal);
  BindText(st, 13, t.message);
  BindText(st, 14, t.backend_id);
  BindText(st, 15, t.trial_dir);
  sqlite3_bind_int(st, 16, t.attempt);
  sqlite3_bind_int64(st, 17, t.retry_of);
  BindText(st, 18, t.token);
  sqlite3_bind_int64(st, 19, t.report_count);
  BindText(st, 20, t.gpus);
  sqlite3_bind_int(st, 21, t.infra_failure ? 1 : 0);
  sqlite3_bind_int64(st, 22, t.parent);
  sqlite3_bind_int64(st, 23, t.lineage);
  BindText(st, 24,
           t.stop_state == v1::TRIAL_STATE_UNSPECIFIED ? "" : v1::TrialState_Name(t.stop_state));
  BindText(st, 25, t.stop_reason);
  BindText(st, 26, InterruptionText(t.interruption));
  sqlite3_bind_int(st, 27, t.segment);
  BindOptTime(st, 28, t.segment_started_at);
  sqlite3_bind_double(st, 29, t.gpu_seconds);
  BindText(st, 30, SegmentsToJson(t.segments));
  BindText(st, 31, t.origin);
  BindText(st, 32, InterruptionText(t.checkpoint_requested));
  sqlite3_bind_int64(st, 33, t.id);
}

absl::Status SqliteStore::WriteTrial(const TrialRecord& t, bool insert) {
  sqlite3_stmt* st = Prepare(
      insert ? "INSERT INTO trials(sweep_id, number, state, params_json, step, last_metrics_json,"
               " objective, created_at, started_at, ended_at, exit_code, term_signal, message,"
               " backend_id, trial_dir, attempt, retry_of, token, report_count, gpus,"
               " infra_failure, parent, lineage, stop_state, stop_reason, interruption, segment,"
               " segment_started_at, gpu_seconds, segments_json, origin, checkpoint_requested, id)"
               " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
             : "UPDATE trials SET sweep_id=?, number=?, state=?, params_json=?, step=?,"
               " last_metrics_json=?, objective=?, created_at=?, started_at=?, ended_at=?,"
               " exit_code=?, term_signal=?, message=?, backend_id=?, trial_dir=?, attempt=?,"
               " retry_of=?, token=?, report_count=?, gpus=?, infra_failure=?, parent=?,"
               " lineage=?, stop_state=?, stop_reason=?, interruption=?, segment=?,"
               " segment_started_at=?, gpu_seconds=?, segments_json=?, origin=?,"
               " checkpoint_requested=? WHERE id=?");
  if (st == nullptr) return Error(insert ? "preparing trial insert" : "preparing trial update");
  BindTrial(st, t);
  if (sqlite3_step(st) != SQLITE_DONE) {
    return Error(insert ? std::string("inserting a trial") : absl::StrCat("updating trial ", t.id));
  }
  if (!insert && sqlite3_changes(db_) == 0) {
    return absl::NotFoundError(absl::StrCat("trial ", t.id, " not in the store"));
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::WriteReport(const ReportRecord& r) {
  sqlite3_stmt* st = Prepare(
      "INSERT INTO report_log(trial_id, step, metric, value, time, report_id) VALUES(?,?,?,?,?,?)");
  if (st == nullptr) return Error("preparing report insert");
  for (const auto& [metric, value] : r.metrics) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, r.trial_id);
    sqlite3_bind_int64(st, 2, r.step);
    BindText(st, 3, metric);
    sqlite3_bind_double(st, 4, value);
    sqlite3_bind_double(st, 5, UnixSeconds(r.time));
    sqlite3_bind_int64(st, 6, r.report_id);
    if (sqlite3_step(st) != SQLITE_DONE) {
      return Error(absl::StrCat("storing a report of trial ", r.trial_id));
    }
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::WriteEvent(const EventRecord& e) {
  sqlite3_stmt* st =
      Prepare("INSERT INTO events(seq, sweep_id, trial_id, payload) VALUES(?,?,?,?)");
  if (st == nullptr) return Error("preparing event insert");
  sqlite3_bind_int64(st, 1, e.seq);
  sqlite3_bind_int64(st, 2, e.sweep_id);
  sqlite3_bind_int64(st, 3, e.trial_id);
  sqlite3_bind_blob(st, 4, e.payload.data(), static_cast<int>(e.payload.size()), SQLITE_TRANSIENT);
  if (sqlite3_step(st) != SQLITE_DONE) return Error("appending an event");
  return absl::OkStatus();
}

absl::Status SqliteStore::UpsertAllocation(const AllocationRecord& a) {
  sqlite3_stmt* st = Prepare(
      "INSERT OR REPLACE INTO allocations(id, sweep_id, gpus, nodes, started_at, ended_at, "
      "ends_at) VALUES(?,?,?,?,?,?,?)");
  if (st == nullptr) return Error("preparing allocation write");
  BindText(st, 1, a.id);
  sqlite3_bind_int64(st, 2, a.sweep_id);
  sqlite3_bind_int(st, 3, a.gpus);
  sqlite3_bind_int(st, 4, a.nodes);
  sqlite3_bind_double(st, 5, UnixSeconds(a.started_at));
  BindOptTime(st, 6, a.ended_at);
  BindOptTime(
      st, 7,
      a.ends_at == absl::InfiniteFuture() ? std::nullopt : std::optional<absl::Time>(a.ends_at));
  if (sqlite3_step(st) != SQLITE_DONE) {
    return Error(absl::StrCat("storing allocation ", a.id, " of sweep ", a.sweep_id));
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::FlushReportLog(int slice, int slices) {
  // The trials of one slice (slices 1: all of them). The log is small (one flush interval of
  // reports), so scanning it costs less than the index writes it saves; sorted by trial, the
  // moved rows touch each trial's index page once.
  slices = std::max(slices, 1);
  sqlite3_stmt* move = Prepare(
      "INSERT INTO reports(trial_id, step, metric, value, time, report_id) "
      "SELECT trial_id, step, metric, value, time, report_id FROM report_log WHERE trial_id % ?1 = "
      "?2 "
      "ORDER BY trial_id, rowid");
  if (move == nullptr) return Error("preparing the report log move");
  sqlite3_bind_int(move, 1, slices);
  sqlite3_bind_int(move, 2, slice % slices);
  if (sqlite3_step(move) != SQLITE_DONE) return Error("moving the report log");
  sqlite3_stmt* clear = Prepare("DELETE FROM report_log WHERE trial_id % ?1 = ?2");
  if (clear == nullptr) return Error("preparing the report log clear");
  sqlite3_bind_int(clear, 1, slices);
  sqlite3_bind_int(clear, 2, slice % slices);
  if (sqlite3_step(clear) != SQLITE_DONE) return Error("clearing the report log");
  return absl::OkStatus();
}

namespace {
// The staged-report move runs in this many steps per flush interval.
constexpr int kReportFlushSlices = 8;
}  // namespace

absl::Status SqliteStore::MoveDueSlices() {
  // Under load (a commit every millisecond or so) each commit moves at most one slice: each
  // step touches one index page per trial in its slice, and no commit carries the whole move
  // (that made a 2-5 ms stall every interval, the largest part of the report latency's tail).
  // When commits are rarer, one commit moves every slice that is due.
  absl::Duration interval = options_.report_flush_interval;
  absl::Duration step = interval / kReportFlushSlices;
  absl::Time now = Now();
  for (int i = 0; i < kReportFlushSlices && now >= next_flush_; ++i) {
    if (absl::Status s = FlushReportLog(flush_slice_, kReportFlushSlices); !s.ok()) return s;
    flush_slice_ = (flush_slice_ + 1) % kReportFlushSlices;
    next_flush_ = std::max(next_flush_ + step, now - interval);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SweepRecord>> SqliteStore::LoadSweeps() {
  sqlite3_stmt* st = Prepare(
      "SELECT id, name, spec_yaml, source, base_dir, state, message, created_at, ended_at, ending, "
      "owner, backend, budget_json, queue_json, applied_json "
      "FROM sweeps ORDER BY id");
  if (st == nullptr) return Error("preparing sweep load");
  std::vector<SweepRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    SweepRecord s;
    s.id = sqlite3_column_int64(st, 0);
    s.name = Text(st, 1);
    s.spec_yaml = Text(st, 2);
    s.source = Text(st, 3);
    s.base_dir = Text(st, 4);
    v1::SweepState_Parse(Text(st, 5), &s.state);
    s.message = Text(st, 6);
    s.created_at = FromUnix(sqlite3_column_double(st, 7));
    if (auto e = OptReal(st, 8)) s.ended_at = FromUnix(*e);
    if (std::string ending = Text(st, 9); !ending.empty()) v1::SweepState_Parse(ending, &s.ending);
    s.owner = Text(st, 10);
    s.backend = Text(st, 11);
    s.budget_change = BudgetChangeFromJson(Text(st, 12));
    json queue = json::parse(Text(st, 13), nullptr, /*allow_exceptions=*/false);
    if (queue.is_array()) {
      for (const json& p : queue) s.queue.push_back(ParamsFromJson(p));
    }
    s.applied = AppliedFromJson(Text(st, 14));
    out.push_back(std::move(s));
  }
  if (rc != SQLITE_DONE) return Error("loading sweeps");
  return out;
}

absl::StatusOr<std::vector<TrialRecord>> SqliteStore::LoadTrials(int64_t sweep_id) {
  sqlite3_stmt* st = Prepare(
      "SELECT id, sweep_id, number, state, params_json, step, last_metrics_json, objective,"
      " created_at, started_at, ended_at, exit_code, term_signal, message, backend_id, trial_dir,"
      " attempt, retry_of, token, report_count, gpus, infra_failure, parent, lineage,"
      " stop_state, stop_reason, interruption, segment, segment_started_at, gpu_seconds,"
      " segments_json, origin, checkpoint_requested FROM trials"
      " WHERE sweep_id=?"
      " ORDER BY id");
  if (st == nullptr) return Error("preparing trial load");
  sqlite3_bind_int64(st, 1, sweep_id);
  std::vector<TrialRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    TrialRecord t;
    t.id = sqlite3_column_int64(st, 0);
    t.sweep_id = sqlite3_column_int64(st, 1);
    t.number = sqlite3_column_int64(st, 2);
    v1::TrialState_Parse(Text(st, 3), &t.state);
    try {
      t.params = ParamsFromJson(json::parse(Text(st, 4)));
      t.last_metrics = json::parse(Text(st, 6)).get<std::map<std::string, double>>();
      t.segments = SegmentsFromJson(json::parse(Text(st, 30)));
    } catch (const json::exception& e) {
      return absl::InternalError(
          absl::StrCat("trial ", t.id, " in ", path_, " is corrupt: ", e.what()));
    }
    t.step = sqlite3_column_int64(st, 5);
    t.objective = OptReal(st, 7);
    t.created_at = FromUnix(sqlite3_column_double(st, 8));
    if (auto v = OptReal(st, 9)) t.started_at = FromUnix(*v);
    if (auto v = OptReal(st, 10)) t.ended_at = FromUnix(*v);
    t.exit_code = sqlite3_column_int(st, 11);
    t.term_signal = sqlite3_column_int(st, 12);
    t.message = Text(st, 13);
    t.backend_id = Text(st, 14);
    t.trial_dir = Text(st, 15);
    t.attempt = sqlite3_column_int(st, 16);
    t.retry_of = sqlite3_column_int64(st, 17);
    t.token = Text(st, 18);
    t.report_count = sqlite3_column_int64(st, 19);
    t.gpus = Text(st, 20);
    t.infra_failure = sqlite3_column_int(st, 21) != 0;
    t.parent = sqlite3_column_int64(st, 22);
    t.lineage = sqlite3_column_int64(st, 23);
    if (std::string stop = Text(st, 24); !stop.empty()) v1::TrialState_Parse(stop, &t.stop_state);
    t.stop_reason = Text(st, 25);
    t.interruption = InterruptionFromText(Text(st, 26));
    t.segment = sqlite3_column_int(st, 27);
    if (auto v = OptReal(st, 28)) t.segment_started_at = FromUnix(*v);
    t.gpu_seconds = sqlite3_column_double(st, 29);
    t.origin = Text(st, 31);
    t.checkpoint_requested = InterruptionFromText(Text(st, 32));
    out.push_back(std::move(t));
  }
  if (rc != SQLITE_DONE) return Error(absl::StrCat("loading the trials of sweep ", sweep_id));
  return out;
}

absl::StatusOr<std::vector<ReportRecord>> SqliteStore::LoadReports(int64_t trial_id) {
  sqlite3_stmt* st = Prepare(
      "SELECT step, metric, value, time, report_id FROM ("
      " SELECT 0 AS part, rowid AS r, step, metric, value, time, report_id FROM reports WHERE "
      "trial_id=?1"
      " UNION ALL"
      " SELECT 1, rowid, step, metric, value, time, report_id FROM report_log WHERE trial_id=?1)"
      " ORDER BY part, r");
  if (st == nullptr) return Error("preparing report load");
  sqlite3_bind_int64(st, 1, trial_id);
  std::vector<ReportRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t step = sqlite3_column_int64(st, 0);
    double time = sqlite3_column_double(st, 3);
    int64_t report_id = sqlite3_column_int64(st, 4);
    // Rows of one report share step, time and id; fold them back into one record.
    if (out.empty() || out.back().step != step || UnixSeconds(out.back().time) != time ||
        out.back().report_id != report_id) {
      ReportRecord r;
      r.trial_id = trial_id;
      r.step = step;
      r.time = FromUnix(time);
      r.report_id = report_id;
      out.push_back(std::move(r));
    }
    out.back().metrics[Text(st, 1)] = sqlite3_column_double(st, 2);
  }
  if (rc != SQLITE_DONE) return Error(absl::StrCat("loading the reports of trial ", trial_id));
  return out;
}

absl::StatusOr<std::vector<AllocationRecord>> SqliteStore::LoadAllocations(int64_t sweep_id) {
  sqlite3_stmt* st = Prepare(
      "SELECT id, gpus, nodes, started_at, ended_at, ends_at FROM allocations WHERE sweep_id=? "
      "ORDER BY started_at, id");
  if (st == nullptr) return Error("preparing allocation load");
  sqlite3_bind_int64(st, 1, sweep_id);
  std::vector<AllocationRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    AllocationRecord a;
    a.id = Text(st, 0);
    a.sweep_id = sweep_id;
    a.gpus = sqlite3_column_int(st, 1);
    a.nodes = sqlite3_column_int(st, 2);
    a.started_at = FromUnix(sqlite3_column_double(st, 3));
    if (auto v = OptReal(st, 4)) a.ended_at = FromUnix(*v);
    if (auto v = OptReal(st, 5)) a.ends_at = FromUnix(*v);
    out.push_back(std::move(a));
  }
  if (rc != SQLITE_DONE) return Error(absl::StrCat("loading the allocations of sweep ", sweep_id));
  return out;
}

absl::StatusOr<std::vector<EventRecord>> SqliteStore::LoadEvents(int64_t sweep_id,
                                                                 int64_t after_seq, int limit) {
  sqlite3_stmt* st = Prepare(
      "SELECT seq, sweep_id, trial_id, payload FROM events WHERE sweep_id=? AND seq>? ORDER BY seq "
      "LIMIT ?");
  if (st == nullptr) return Error("preparing event load");
  sqlite3_bind_int64(st, 1, sweep_id);
  sqlite3_bind_int64(st, 2, after_seq);
  sqlite3_bind_int(st, 3, limit);
  return ReadEvents(st, absl::StrCat("the events of sweep ", sweep_id));
}

absl::StatusOr<std::vector<EventRecord>> SqliteStore::LoadTrialEvents(int64_t trial_id, int limit) {
  sqlite3_stmt* st = Prepare(
      "SELECT seq, sweep_id, trial_id, payload FROM events WHERE trial_id=? ORDER BY seq LIMIT ?");
  if (st == nullptr) return Error("preparing event load");
  sqlite3_bind_int64(st, 1, trial_id);
  sqlite3_bind_int(st, 2, limit);
  return ReadEvents(st, absl::StrCat("the events of trial ", trial_id));
}

absl::StatusOr<std::vector<EventRecord>> SqliteStore::ReadEvents(sqlite3_stmt* st,
                                                                 const std::string& what) {
  std::vector<EventRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    EventRecord e;
    e.seq = sqlite3_column_int64(st, 0);
    e.sweep_id = sqlite3_column_int64(st, 1);
    e.trial_id = sqlite3_column_int64(st, 2);
    const void* blob = sqlite3_column_blob(st, 3);
    e.payload.assign(static_cast<const char*>(blob),
                     static_cast<size_t>(sqlite3_column_bytes(st, 3)));
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return Error(absl::StrCat("loading ", what));
  return out;
}

}  // namespace hpo::server
