#include "server/sqlite_store.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace hpo::server {
namespace {

std::string TempDb() {
  char tmpl[] = "/tmp/hpo-store-XXXXXX";
  return std::string(::mkdtemp(tmpl)) + "/hpod.db";
}

TEST(SqliteStore, RoundTripsEveryRecord) {
  std::string path = TempDb();
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->SchemaVersion(), SqliteStore::CurrentSchemaVersion());
  SweepRecord s;
  s.name = "n";
  s.spec_yaml = "yaml";
  s.source = "f.yaml";
  s.base_dir = "/b";
  s.created_at = absl::FromUnixSeconds(1000);
  auto sid = (*store)->InsertSweep(s);
  ASSERT_TRUE(sid.ok());
  TrialRecord t;
  t.sweep_id = *sid;
  t.number = 0;
  t.params = {{"lr", 0.5}, {"n", int64_t{3}}, {"act", std::string("relu")}, {"b", true}};
  t.token = "tok";
  t.created_at = absl::FromUnixSeconds(1001);
  auto tid = (*store)->InsertTrial(t);
  ASSERT_TRUE(tid.ok());
  t.id = *tid;
  t.state = v1::TRIAL_STATE_COMPLETED;
  t.objective = 0.25;
  t.last_metrics = {{"loss", 0.25}};
  t.ended_at = absl::FromUnixSeconds(1010);
  ASSERT_TRUE((*store)->UpdateTrial(t).ok());
  ASSERT_TRUE((*store)->Begin().ok());
  ASSERT_TRUE((*store)->InsertReport({t.id, 1, {{"loss", 0.5}, {"acc", 0.7}}, absl::FromUnixSeconds(1002), 77}).ok());
  ASSERT_TRUE((*store)->FlushReportLog().ok());  // one report in each table
  ASSERT_TRUE((*store)->InsertReport({t.id, 2, {{"loss", 0.25}}, absl::FromUnixSeconds(1003)}).ok());
  auto seq1 = (*store)->InsertEvent({0, *sid, t.id, "payload-1"});
  auto seq2 = (*store)->InsertEvent({0, *sid, 0, "payload-2"});
  ASSERT_TRUE((*store)->Commit().ok());
  EXPECT_LT(*seq1, *seq2);
  store->reset();

  auto again = SqliteStore::Open(path);
  ASSERT_TRUE(again.ok());
  auto sweeps = (*again)->LoadSweeps();
  ASSERT_EQ(sweeps->size(), 1u);
  EXPECT_EQ((*sweeps)[0].name, "n");
  auto trials = (*again)->LoadTrials(*sid);
  ASSERT_EQ(trials->size(), 1u);
  const TrialRecord& back = (*trials)[0];
  EXPECT_EQ(back.params, t.params);
  EXPECT_EQ(back.state, v1::TRIAL_STATE_COMPLETED);
  EXPECT_EQ(*back.objective, 0.25);
  EXPECT_EQ(back.last_metrics, t.last_metrics);
  EXPECT_EQ(*back.ended_at, *t.ended_at);
  auto reports = (*again)->LoadReports(t.id);
  ASSERT_EQ(reports->size(), 2u);
  EXPECT_EQ((*reports)[0].metrics.size(), 2u);
  EXPECT_EQ((*reports)[0].report_id, 77);  // moved to the indexed table with its id
  EXPECT_EQ((*reports)[1].step, 2);
  EXPECT_EQ((*reports)[1].report_id, 0);
  auto events = (*again)->LoadEvents(*sid, *seq1, 10);
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].payload, "payload-2");
}

TEST(SqliteStore, RollbackLeavesNothing) {
  auto store = SqliteStore::Open(TempDb());
  SweepRecord s;
  s.created_at = absl::Now();
  ASSERT_TRUE((*store)->Begin().ok());
  ASSERT_TRUE((*store)->InsertSweep(s).ok());
  (*store)->Rollback();
  EXPECT_TRUE((*store)->LoadSweeps()->empty());
  TrialRecord ghost;
  ghost.id = 99;
  EXPECT_TRUE(absl::IsNotFound((*store)->UpdateTrial(ghost)));
}

TEST(SqliteStore, UsesWalAndRefusesANewerSchema) {
  std::string path = TempDb();
  { ASSERT_TRUE(SqliteStore::Open(path).ok()); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  sqlite3_exec(db, "PRAGMA user_version=999", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto store = SqliteStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status()));
  EXPECT_NE(store.status().message().find("newer hpod"), std::string::npos);
}

TEST(SqliteStore, MigratesAnEmptyVersionZeroFile) {
  std::string path = TempDb();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "CREATE TABLE unrelated(x)", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->SchemaVersion(), SqliteStore::CurrentSchemaVersion());
}

// Rows in `reports` (indexed) and in `report_log` (staged), counted with a second connection.
std::pair<int64_t, int64_t> ReportRows(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  auto count = [&](const char* sql) {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, sql, -1, &st, nullptr);
    int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return n;
  };
  std::pair<int64_t, int64_t> out{count("SELECT COUNT(*) FROM reports"), count("SELECT COUNT(*) FROM report_log")};
  sqlite3_close(db);
  return out;
}

TEST(SqliteStore, SlicedFlushMovesOneSliceAndKeepsEveryTrialsOrder) {
  std::string path = TempDb();
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  SweepRecord s;
  s.created_at = absl::FromUnixSeconds(1000);
  auto sid = (*store)->InsertSweep(s);
  ASSERT_TRUE(sid.ok());
  std::vector<int64_t> ids;
  for (int n = 0; n < 4; ++n) {
    TrialRecord t;
    t.sweep_id = *sid;
    t.number = n;
    t.token = "tok";
    t.created_at = absl::FromUnixSeconds(1000);
    auto id = (*store)->InsertTrial(t);
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  auto report = [&](int64_t trial, int64_t step) {
    return (*store)->InsertReport({trial, step, {{"loss", 1.0 / static_cast<double>(step)}},
                                   absl::FromUnixSeconds(1000 + step)});
  };
  auto steps_of = [&](int64_t trial) {
    std::vector<int64_t> steps;
    absl::StatusOr<std::vector<ReportRecord>> reports = (*store)->LoadReports(trial);
    if (!reports.ok()) return steps;
    for (const ReportRecord& r : *reports) steps.push_back(r.step);
    return steps;
  };
  ASSERT_TRUE((*store)->Begin().ok());
  for (int64_t step = 1; step <= 3; ++step) {
    for (int64_t id : ids) ASSERT_TRUE(report(id, step).ok());
  }
  int slice = static_cast<int>(ids[0] % 2);
  ASSERT_TRUE((*store)->FlushReportLog(slice, 2).ok());
  ASSERT_TRUE((*store)->Commit().ok());
  // Half of the trials moved (3 reports each), the other half still staged.
  EXPECT_EQ(ReportRows(path), std::make_pair(int64_t{6}, int64_t{6}));

  // A moved trial reports again; the other slice moves; each trial still reads in step order.
  ASSERT_TRUE((*store)->Begin().ok());
  ASSERT_TRUE(report(ids[0], 4).ok());
  ASSERT_TRUE((*store)->FlushReportLog(1 - slice, 2).ok());
  ASSERT_TRUE((*store)->Commit().ok());
  EXPECT_EQ(ReportRows(path), std::make_pair(int64_t{12}, int64_t{1}));
  EXPECT_EQ(steps_of(ids[0]), (std::vector<int64_t>{1, 2, 3, 4}));
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_EQ(steps_of(ids[i]), (std::vector<int64_t>{1, 2, 3}));

  ASSERT_TRUE((*store)->Begin().ok());
  ASSERT_TRUE((*store)->FlushReportLog().ok());  // all slices
  ASSERT_TRUE((*store)->Commit().ok());
  EXPECT_EQ(ReportRows(path), std::make_pair(int64_t{13}, int64_t{0}));
  EXPECT_EQ(steps_of(ids[0]), (std::vector<int64_t>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace hpo::server
