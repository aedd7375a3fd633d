#include <sqlite3.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/store/row.h"
#include "server/store/sqlite_store.h"

// The report log: reports are appended to an unindexed staging table (report_log) and moved,
// sorted by trial, into the indexed one (reports) in slices as part of the commits.

namespace hpo::server {

absl::Status SqliteStore::WriteReport(const ReportRecord& r) {
  sqlite3_stmt* st = Prepare(
      "INSERT INTO report_log(trial_id, step, metric, value, time, report_id) VALUES(?,?,?,?,?,?)");
  if (st == nullptr) return Error("preparing report insert");
  for (const auto& [metric, value] : r.metrics) {
    sqlite3_reset(st);
    sqlite::Binder(st)
        .Int64(r.trial_id)
        .Int64(r.step)
        .Text(metric)
        .Real(value)
        .Time(r.time)
        .Int64(r.report_id);
    if (sqlite3_step(st) != SQLITE_DONE) {
      return Error(absl::StrCat("storing a report of trial ", r.trial_id));
    }
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
  sqlite::Binder(move).Int(slices).Int(slice % slices);
  if (sqlite3_step(move) != SQLITE_DONE) return Error("moving the report log");
  sqlite3_stmt* clear = Prepare("DELETE FROM report_log WHERE trial_id % ?1 = ?2");
  if (clear == nullptr) return Error("preparing the report log clear");
  sqlite::Binder(clear).Int(slices).Int(slice % slices);
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

absl::StatusOr<std::vector<ReportRecord>> SqliteStore::LoadReports(int64_t trial_id) {
  sqlite3_stmt* st = Prepare(
      "SELECT step, metric, value, time, report_id FROM ("
      " SELECT 0 AS part, rowid AS r, step, metric, value, time, report_id FROM reports WHERE "
      "trial_id=?1"
      " UNION ALL"
      " SELECT 1, rowid, step, metric, value, time, report_id FROM report_log WHERE trial_id=?1)"
      " ORDER BY part, r");
  if (st == nullptr) return Error("preparing report load");
  sqlite::Binder(st).Int64(trial_id);
  std::vector<ReportRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    sqlite::Row row(st);
    int64_t step = row.Int64();
    std::string metric = row.Text();
    double value = row.Real();
    double time = row.Real();
    int64_t report_id = row.Int64();
    // Rows of one report share step, time and id; fold them back into one record.
    if (out.empty() || out.back().step != step || UnixSeconds(out.back().time) != time ||
        out.back().report_id != report_id) {
      ReportRecord r;
      r.trial_id = trial_id;
      r.step = step;
      r.time = sqlite::FromUnix(time);
      r.report_id = report_id;
      out.push_back(std::move(r));
    }
    out.back().metrics[metric] = value;
  }
  if (rc != SQLITE_DONE) return Error(absl::StrCat("loading the reports of trial ", trial_id));
  return out;
}

}  // namespace hpo::server
