#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "hpo/v1/states.h"
#include "server/store/codec.h"
#include "server/store/row.h"
#include "server/store/sqlite_store.h"

// The records: sweeps, trials, events and allocations written and read back, each row through
// one Binder and one Row (row.h), the non-column parts through the codecs (codec.h).

namespace hpo::server {

using nlohmann::json;

absl::Status SqliteStore::WriteDeleteSweep(int64_t sweep_id) {
  for (const char* sql :
       {"DELETE FROM reports WHERE trial_id IN (SELECT id FROM trials WHERE sweep_id=?1)",
        "DELETE FROM report_log WHERE trial_id IN (SELECT id FROM trials WHERE sweep_id=?1)",
        "DELETE FROM events WHERE sweep_id=?1", "DELETE FROM allocations WHERE sweep_id=?1",
        "DELETE FROM trials WHERE sweep_id=?1", "DELETE FROM sweeps WHERE id=?1"}) {
    sqlite3_stmt* st = Prepare(sql);
    if (st == nullptr) return Error("preparing a sweep's removal");
    sqlite::Binder(st).Int64(sweep_id);
    if (sqlite3_step(st) != SQLITE_DONE) return Error(absl::StrCat("removing sweep ", sweep_id));
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::WriteSweep(const SweepRecord& s, bool insert) {
  if (insert) {
    sqlite3_stmt* st = Prepare(
        "INSERT INTO sweeps(id, name, spec_yaml, source, base_dir, state, message, created_at,"
        " ended_at, owner, backend, budget_json, queue_json, applied_json, nodes_json, plan_json,"
        " defaults_version, hpod_version) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    if (st == nullptr) return Error("preparing sweep insert");
    sqlite::Binder(st)
        .Int64(s.id)
        .Text(s.name)
        .Text(s.spec_yaml)
        .Text(s.source)
        .Text(s.base_dir)
        .Text(v1::SweepState_Name(s.state))
        .Text(s.message)
        .Time(s.created_at)
        .OptTime(s.ended_at)
        .Text(s.owner)
        .Text(s.backend)
        .Text(BudgetChangeJson(s.budget_change))
        .Text(QueueJson(s.queue))
        .Text(AppliedJson(s.applied))
        .Text(NodesJson(s.nodes))
        .Text(s.plan_json)
        .Int64(s.defaults_version)
        .Text(s.hpod_version);
    if (sqlite3_step(st) != SQLITE_DONE) return Error("inserting a sweep");
    return absl::OkStatus();
  }
  sqlite3_stmt* st = Prepare(
      "UPDATE sweeps SET name=?, state=?, message=?, ended_at=?, ending=?, budget_json=?, "
      "queue_json=?, applied_json=?, nodes_json=? WHERE id=?");
  if (st == nullptr) return Error("preparing sweep update");
  sqlite::Binder(st)
      .Text(s.name)
      .Text(v1::SweepState_Name(s.state))
      .Text(s.message)
      .OptTime(s.ended_at)
      .Text(s.ending == v1::SWEEP_STATE_UNSPECIFIED ? "" : v1::SweepState_Name(s.ending))
      .Text(BudgetChangeJson(s.budget_change))
      .Text(QueueJson(s.queue))
      .Text(AppliedJson(s.applied))
      .Text(NodesJson(s.nodes))
      .Int64(s.id);
  if (sqlite3_step(st) != SQLITE_DONE) return Error(absl::StrCat("updating sweep ", s.id));
  if (sqlite3_changes(db_) == 0) {
    return absl::NotFoundError(absl::StrCat("sweep ", s.id, " not in the store"));
  }
  // Every report of an ended sweep is in the indexed table once its end is committed.
  if (v1::IsFinal(s.state)) return FlushReportLog(0, 1);
  return absl::OkStatus();
}

void SqliteStore::BindTrial(sqlite3_stmt* st, const TrialRecord& t) {
  sqlite::Binder(st)
      .Int64(t.sweep_id)
      .Int64(t.number)
      .Text(v1::TrialState_Name(t.state))
      .Text(ParamsToJsonText(t.params))
      .Int64(t.step)
      .Text(json(t.last_metrics).dump())
      .OptReal(t.objective)
      .Time(t.created_at)
      .OptTime(t.started_at)
      .OptTime(t.ended_at)
      .Int(t.exit_code)
      .Int(t.term_signal)
      .Text(t.message)
      .Text(t.backend_id)
      .Text(t.trial_dir)
      .Int(t.attempt)
      .Int64(t.retry_of)
      .Text(t.token)
      .Int64(t.report_count)
      .Text(t.gpus)
      .Bool(t.infra_failure)
      .Int64(t.parent)
      .Int64(t.lineage)
      .Text(t.stop_state == v1::TRIAL_STATE_UNSPECIFIED ? "" : v1::TrialState_Name(t.stop_state))
      .Text(t.stop_reason)
      .Text(InterruptionText(t.interruption))
      .Int(t.segment)
      .OptTime(t.segment_started_at)
      .Real(t.gpu_seconds)
      .Text(SegmentsToJson(t.segments))
      .Text(t.origin)
      .Text(InterruptionText(t.checkpoint_requested))
      .Int64(t.id);
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

absl::Status SqliteStore::WriteEvent(const EventRecord& e) {
  sqlite3_stmt* st =
      Prepare("INSERT INTO events(seq, sweep_id, trial_id, payload) VALUES(?,?,?,?)");
  if (st == nullptr) return Error("preparing event insert");
  sqlite::Binder(st).Int64(e.seq).Int64(e.sweep_id).Int64(e.trial_id).Blob(e.payload);
  if (sqlite3_step(st) != SQLITE_DONE) return Error("appending an event");
  return absl::OkStatus();
}

absl::Status SqliteStore::UpsertAllocation(const AllocationRecord& a) {
  sqlite3_stmt* st = Prepare(
      "INSERT OR REPLACE INTO allocations(id, sweep_id, gpus, nodes, started_at, ended_at, "
      "ends_at) VALUES(?,?,?,?,?,?,?)");
  if (st == nullptr) return Error("preparing allocation write");
  sqlite::Binder(st)
      .Text(a.id)
      .Int64(a.sweep_id)
      .Int(a.gpus)
      .Int(a.nodes)
      .Time(a.started_at)
      .OptTime(a.ended_at)
      .OptTime(a.ends_at == absl::InfiniteFuture() ? std::nullopt
                                                   : std::optional<absl::Time>(a.ends_at));
  if (sqlite3_step(st) != SQLITE_DONE) {
    return Error(absl::StrCat("storing allocation ", a.id, " of sweep ", a.sweep_id));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SweepRecord>> SqliteStore::LoadSweeps() {
  sqlite3_stmt* st = Prepare(
      "SELECT id, name, spec_yaml, source, base_dir, state, message, created_at, ended_at, ending, "
      "owner, backend, budget_json, queue_json, applied_json, nodes_json, plan_json, "
      "defaults_version, hpod_version FROM sweeps ORDER BY id");
  if (st == nullptr) return Error("preparing sweep load");
  std::vector<SweepRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    sqlite::Row row(st);
    SweepRecord s;
    s.id = row.Int64();
    s.name = row.Text();
    s.spec_yaml = row.Text();
    s.source = row.Text();
    s.base_dir = row.Text();
    v1::SweepState_Parse(row.Text(), &s.state);
    s.message = row.Text();
    s.created_at = row.Time();
    s.ended_at = row.OptTime();
    if (std::string ending = row.Text(); !ending.empty()) v1::SweepState_Parse(ending, &s.ending);
    s.owner = row.Text();
    s.backend = row.Text();
    s.budget_change = BudgetChangeFromJson(row.Text());
    s.queue = QueueFromJson(row.Text());
    s.applied = AppliedFromJson(row.Text());
    s.nodes = NodesFromJson(row.Text());
    s.plan_json = row.Text();
    s.defaults_version = static_cast<int>(row.Int64());
    s.hpod_version = row.Text();
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
  sqlite::Binder(st).Int64(sweep_id);
  std::vector<TrialRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    sqlite::Row row(st);
    TrialRecord t;
    try {
      t.id = row.Int64();
      t.sweep_id = row.Int64();
      t.number = row.Int64();
      v1::TrialState_Parse(row.Text(), &t.state);
      t.params = ParamsFromJson(json::parse(row.Text()));
      t.step = row.Int64();
      t.last_metrics = json::parse(row.Text()).get<std::map<std::string, double>>();
      t.objective = row.OptReal();
      t.created_at = row.Time();
      t.started_at = row.OptTime();
      t.ended_at = row.OptTime();
      t.exit_code = row.Int();
      t.term_signal = row.Int();
      t.message = row.Text();
      t.backend_id = row.Text();
      t.trial_dir = row.Text();
      t.attempt = row.Int();
      t.retry_of = row.Int64();
      t.token = row.Text();
      t.report_count = row.Int64();
      t.gpus = row.Text();
      t.infra_failure = row.Bool();
      t.parent = row.Int64();
      t.lineage = row.Int64();
      if (std::string stop = row.Text(); !stop.empty()) v1::TrialState_Parse(stop, &t.stop_state);
      t.stop_reason = row.Text();
      t.interruption = InterruptionFromText(row.Text());
      t.segment = row.Int();
      t.segment_started_at = row.OptTime();
      t.gpu_seconds = row.Real();
      t.segments = SegmentsFromJson(json::parse(row.Text()));
      t.origin = row.Text();
      t.checkpoint_requested = InterruptionFromText(row.Text());
    } catch (const json::exception& e) {
      return absl::InternalError(
          absl::StrCat("trial ", t.id, " in ", path_, " is corrupt: ", e.what()));
    }
    out.push_back(std::move(t));
  }
  if (rc != SQLITE_DONE) return Error(absl::StrCat("loading the trials of sweep ", sweep_id));
  return out;
}

absl::StatusOr<std::vector<AllocationRecord>> SqliteStore::LoadAllocations(int64_t sweep_id) {
  sqlite3_stmt* st = Prepare(
      "SELECT id, gpus, nodes, started_at, ended_at, ends_at FROM allocations WHERE sweep_id=? "
      "ORDER BY started_at, id");
  if (st == nullptr) return Error("preparing allocation load");
  sqlite::Binder(st).Int64(sweep_id);
  std::vector<AllocationRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    sqlite::Row row(st);
    AllocationRecord a;
    a.id = row.Text();
    a.sweep_id = sweep_id;
    a.gpus = row.Int();
    a.nodes = row.Int();
    a.started_at = row.Time();
    a.ended_at = row.OptTime();
    if (std::optional<absl::Time> ends = row.OptTime()) a.ends_at = *ends;
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
  sqlite::Binder(st).Int64(sweep_id).Int64(after_seq).Int(limit);
  return ReadEvents(st, absl::StrCat("the events of sweep ", sweep_id));
}

absl::StatusOr<std::vector<EventRecord>> SqliteStore::LoadTrialEvents(int64_t trial_id, int limit) {
  sqlite3_stmt* st = Prepare(
      "SELECT seq, sweep_id, trial_id, payload FROM events WHERE trial_id=? ORDER BY seq LIMIT ?");
  if (st == nullptr) return Error("preparing event load");
  sqlite::Binder(st).Int64(trial_id).Int(limit);
  return ReadEvents(st, absl::StrCat("the events of trial ", trial_id));
}

absl::StatusOr<std::vector<EventRecord>> SqliteStore::ReadEvents(sqlite3_stmt* st,
                                                                 const std::string& what) {
  std::vector<EventRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    sqlite::Row row(st);
    EventRecord e;
    e.seq = row.Int64();
    e.sweep_id = row.Int64();
    e.trial_id = row.Int64();
    e.payload = row.Blob();
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return Error(absl::StrCat("loading ", what));
  return out;
}

}  // namespace hpo::server
