#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "server/store/sqlite_store.h"

// The schema and its migrations: the file's layout, versioned with PRAGMA user_version.

namespace hpo::server {
namespace {

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
    // v11: nodes_json: the nodes where the sweep's trials failed by the infrastructure's fault,
    // {node: {failures, quarantined, last_failure}}.
    "ALTER TABLE sweeps ADD COLUMN nodes_json TEXT NOT NULL DEFAULT '{}';",
    // v12: plan_json: what the sweep was expected to cost when it was submitted ('' none).
    "ALTER TABLE sweeps ADD COLUMN plan_json TEXT NOT NULL DEFAULT '';",
    // v13: sweeps keep their meaning. defaults_version: the version of the sweep-file defaults
    // the sweep runs with (SpecDefaults); the sweeps stored before get 1, the defaults they were
    // submitted and ran under. hpod_version: the hpod that took it ('' before this).
    R"sql(
    ALTER TABLE sweeps ADD COLUMN defaults_version INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE sweeps ADD COLUMN hpod_version TEXT NOT NULL DEFAULT '';
    )sql",
};

}  // namespace

int SqliteStore::CurrentSchemaVersion() { return static_cast<int>(kMigrations.size()); }

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

}  // namespace hpo::server
