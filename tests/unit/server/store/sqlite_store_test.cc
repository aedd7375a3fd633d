// SqliteStore against real files in a temp dir: every record round-trips, schemas migrate from
// every earlier release (fixtures in tests/fixtures/schema), the staged reports move on their
// own, and a full disk loses nothing (a VFS that refuses writes, tests/fakes/faulty_vfs.h).
#include "server/store/sqlite_store.h"

#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/fakes/faulty_vfs.h"

namespace hpo::server {
namespace {

// A temp dir for one test's database, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = std::filesystem::temp_directory_path() / "hpo-store-XXXXXX";
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Db() const { return path_ + "/hpod.db"; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

SweepRecord Sweep() {
  SweepRecord s;
  s.name = "n";
  s.spec_yaml = "yaml";
  s.source = "f.yaml";
  s.base_dir = "/b";
  s.created_at = absl::FromUnixSeconds(1000);
  return s;
}

TrialRecord Trial(int64_t sweep_id, int64_t number) {
  TrialRecord t;
  t.sweep_id = sweep_id;
  t.number = number;
  t.token = "tok";
  t.created_at = absl::FromUnixSeconds(1000);
  return t;
}

TEST(SqliteStore, RoundTripsEveryRecord) {
  TempDir dir;
  std::string path = dir.Db();
  FakeClock clock;
  SqliteStore::Options options;
  options.clock = &clock;
  auto store = SqliteStore::Open(path, options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->SchemaVersion(), SqliteStore::CurrentSchemaVersion());
  SweepRecord s;
  s.name = "n";
  s.spec_yaml = "yaml";
  s.source = "f.yaml";
  s.base_dir = "/b";
  s.created_at = absl::FromUnixSeconds(1000);
  s.plan_json = "{\"trials\": [1, 2, 3]}";  // written once, at submit
  auto sid = (*store)->InsertSweep(s);
  ASSERT_TRUE(sid.ok());
  s.id = *sid;
  s.nodes["n2"] = {2, true, absl::FromUnixMillis(1'700'000'000'123),
                   "the infrastructure failed it (stderr /ECC/)"};
  s.nodes["n1"] = {1, false, absl::InfinitePast(), ""};
  ASSERT_TRUE((*store)->UpdateSweep(s).ok());
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
  ASSERT_TRUE(
      (*store)
          ->InsertReport({t.id, 1, {{"loss", 0.5}, {"acc", 0.7}}, absl::FromUnixSeconds(1002), 77})
          .ok());
  ASSERT_TRUE((*store)->Commit().ok());
  clock.Advance(absl::Seconds(1));  // the staged report moves at the next commit
  ASSERT_TRUE((*store)->Begin().ok());
  ASSERT_TRUE(
      (*store)->InsertReport({t.id, 2, {{"loss", 0.25}}, absl::FromUnixSeconds(1003)}).ok());
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
  EXPECT_EQ((*sweeps)[0].nodes, s.nodes);
  EXPECT_EQ((*sweeps)[0].plan_json, s.plan_json);
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

// An allocation's record is replaced as it changes (its end), kept per sweep, and goes with it.
TEST(SqliteStore, AllocationsAreReplacedByIdAndGoWithTheirSweep) {
  TempDir dir;
  auto store = SqliteStore::Open(dir.Db());
  ASSERT_TRUE(store.ok()) << store.status();
  int64_t one = *(*store)->InsertSweep(Sweep());
  int64_t two = *(*store)->InsertSweep(Sweep());
  AllocationRecord a;
  a.id = "slurm:100";
  a.sweep_id = one;
  a.gpus = 8;
  a.nodes = 2;
  a.started_at = absl::FromUnixSeconds(2000);
  a.ends_at = absl::FromUnixSeconds(5600);
  ASSERT_TRUE((*store)->WriteAllocation(a).ok());
  AllocationRecord b = a;
  b.id = "slurm:7@1999";
  b.sweep_id = two;
  b.ends_at = absl::InfiniteFuture();
  ASSERT_TRUE((*store)->WriteAllocation(b).ok());
  a.ended_at = absl::FromUnixSeconds(2500);
  ASSERT_TRUE((*store)->WriteAllocation(a).ok());
  auto loaded = (*store)->LoadAllocations(one);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 1u);
  EXPECT_EQ((*loaded)[0].gpus, 8);
  EXPECT_EQ((*loaded)[0].nodes, 2);
  EXPECT_EQ((*loaded)[0].started_at, absl::FromUnixSeconds(2000));
  EXPECT_EQ((*loaded)[0].ended_at, absl::FromUnixSeconds(2500));
  EXPECT_EQ((*loaded)[0].ends_at, absl::FromUnixSeconds(5600));
  loaded = (*store)->LoadAllocations(two);
  ASSERT_EQ(loaded->size(), 1u);
  EXPECT_FALSE((*loaded)[0].ended_at);
  EXPECT_EQ((*loaded)[0].ends_at, absl::InfiniteFuture());
  ASSERT_TRUE((*store)->DeleteSweep(one).ok());
  EXPECT_TRUE((*store)->LoadAllocations(one)->empty());
  EXPECT_EQ((*store)->LoadAllocations(two)->size(), 1u);
}

TEST(SqliteStore, RollbackLeavesNothing) {
  TempDir dir;
  auto store = SqliteStore::Open(dir.Db());
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
  TempDir dir;
  std::string path = dir.Db();
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

TEST(SqliteStore, HeldAloneItUsesNoSharedMemoryAndKeepsOthersOut) {
  // A store on a network file system: WAL without its shared-memory index, one connection.
  TempDir dir;
  SqliteStore::Options exclusive;
  exclusive.exclusive = true;
  {
    auto store = SqliteStore::Open(dir.Db(), exclusive);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_FALSE(std::filesystem::exists(dir.Db() + "-shm"));
    ASSERT_TRUE((*store)->Begin().ok());
    int64_t sweep = *(*store)->InsertSweep(Sweep());
    ASSERT_TRUE((*store)->InsertTrial(Trial(sweep, 0)).ok());
    ASSERT_TRUE((*store)->Commit().ok());
    // Nobody else opens it meanwhile, in either mode, and at once.
    absl::Time before = absl::Now();
    auto other = SqliteStore::Open(dir.Db(), exclusive);
    EXPECT_TRUE(absl::IsUnavailable(other.status())) << other.status();
    EXPECT_LT(absl::Now() - before, absl::Seconds(2));
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir.Db().c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, "SELECT COUNT(*) FROM trials", nullptr, nullptr, nullptr),
              SQLITE_BUSY);
    sqlite3_close(db);
    // Its own commits checkpoint the WAL as they go.
    for (int i = 1; i < 400; ++i) {
      ASSERT_TRUE((*store)->Begin().ok());
      ASSERT_TRUE((*store)->InsertTrial(Trial(sweep, i)).ok());
      ASSERT_TRUE((*store)->Commit().ok());
    }
  }
  // Closed, it is free again, with everything in it.
  auto reopened = SqliteStore::Open(dir.Db(), exclusive);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->LoadTrials(1)->size(), 400u);
}

TEST(SqliteStore, AReaderSeesWhatIsCommittedOnAThreadOfItsOwn) {
  TempDir dir;
  auto store = SqliteStore::Open(dir.Db());
  ASSERT_TRUE(store.ok()) << store.status();
  auto event = [](int64_t sweep) {
    EventRecord e;
    e.sweep_id = sweep;
    e.payload = "p";
    return e;
  };
  ASSERT_TRUE((*store)->Begin().ok());
  int64_t sweep = *(*store)->InsertSweep(Sweep());
  int64_t first = *(*store)->InsertEvent(event(sweep));
  ASSERT_TRUE((*store)->Commit().ok());
  absl::StatusOr<std::unique_ptr<Store>> reader = (*store)->OpenReader();
  ASSERT_TRUE(reader.ok()) << reader.status();
  // An event of a transaction still open is not seen; once committed, it is.
  ASSERT_TRUE((*store)->Begin().ok());
  int64_t second = *(*store)->InsertEvent(event(sweep));
  std::vector<EventRecord> seen;
  std::thread([&] { seen = *(*reader)->LoadEvents(sweep, 0, 10); }).join();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].seq, first);
  ASSERT_TRUE((*store)->Commit().ok());
  std::thread([&] { seen = *(*reader)->LoadEvents(sweep, first, 10); }).join();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].seq, second);
  // Closing it leaves the writer's file as it was.
  reader->reset();
  EXPECT_EQ((*store)->LoadEvents(sweep, 0, 10)->size(), 2u);
  // A store held by its one connection has no reader.
  TempDir alone;
  SqliteStore::Options exclusive;
  exclusive.exclusive = true;
  auto held = SqliteStore::Open(alone.Db(), exclusive);
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(absl::IsUnimplemented((*held)->OpenReader().status()));
}

TEST(SqliteStore, MigratesAnEmptyVersionZeroFile) {
  TempDir dir;
  std::string path = dir.Db();
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
  std::pair<int64_t, int64_t> out{count("SELECT COUNT(*) FROM reports"),
                                  count("SELECT COUNT(*) FROM report_log")};
  sqlite3_close(db);
  return out;
}

// The staged reports move by themselves, slice by slice, within the flush interval, and all at
// once when a sweep's end is written; each trial's reports read back in order all along.
TEST(SqliteStore, StagedReportsMoveWithinTheFlushIntervalAndAtASweepsEnd) {
  TempDir dir;
  std::string path = dir.Db();
  FakeClock clock;
  SqliteStore::Options options;
  options.clock = &clock;
  options.report_flush_interval = absl::Milliseconds(80);  // 8 slices of 10 ms
  auto store = SqliteStore::Open(path, options);
  ASSERT_TRUE(store.ok()) << store.status();
  SweepRecord sweep = Sweep();
  sweep.id = *(*store)->InsertSweep(sweep);
  std::vector<int64_t> ids;
  for (int n = 0; n < 8; ++n) ids.push_back(*(*store)->InsertTrial(Trial(sweep.id, n)));
  auto steps_of = [&](int64_t trial) {
    std::vector<int64_t> steps;
    absl::StatusOr<std::vector<ReportRecord>> reports = (*store)->LoadReports(trial);
    if (reports.ok()) {
      for (const ReportRecord& r : *reports) steps.push_back(r.step);
    }
    return steps;
  };
  std::vector<int64_t> expected;
  for (int64_t step = 1; step <= 6; ++step) {
    ASSERT_TRUE((*store)->Begin().ok());
    for (int64_t id : ids) {
      ASSERT_TRUE((*store)
                      ->InsertReport({id,
                                      step,
                                      {{"loss", 1.0 / static_cast<double>(step)}},
                                      absl::FromUnixSeconds(1000 + step)})
                      .ok());
    }
    ASSERT_TRUE((*store)->Commit().ok());
    expected.push_back(step);
    auto [indexed, staged] = ReportRows(path);
    EXPECT_EQ(indexed + staged, 8 * step);
    EXPECT_GT(staged, 0) << "this commit's reports are staged";
    if (step > 1) {
      EXPECT_LT(staged, 8 * step) << "earlier ones moved";
    }
    for (int64_t id : ids) EXPECT_EQ(steps_of(id), expected);
    clock.Advance(absl::Milliseconds(10));  // one slice
  }
  clock.Advance(absl::Milliseconds(80));
  ASSERT_TRUE((*store)->Begin().ok());
  ASSERT_TRUE((*store)->Commit().ok());
  EXPECT_EQ(ReportRows(path), std::make_pair(int64_t{48}, int64_t{0}));

  ASSERT_TRUE((*store)->Begin().ok());
  ASSERT_TRUE(
      (*store)->InsertReport({ids[0], 7, {{"loss", 0.1}}, absl::FromUnixSeconds(1007)}).ok());
  sweep.state = v1::SWEEP_STATE_COMPLETED;
  ASSERT_TRUE((*store)->UpdateSweep(sweep).ok());
  ASSERT_TRUE((*store)->Commit().ok());
  EXPECT_EQ(ReportRows(path), std::make_pair(int64_t{49}, int64_t{0}))
      << "an ended sweep's are indexed";
}

// Every schema an earlier release wrote migrates to the current one, its data intact.
TEST(SqliteStore, MigratesEveryEarlierSchema) {
  for (int version = 1; version < SqliteStore::CurrentSchemaVersion(); ++version) {
    SCOPED_TRACE(version);
    TempDir dir;
    std::string fixture = absl::StrCat(HPO_SCHEMA_FIXTURES, "/schema_v", version, ".db");
    ASSERT_TRUE(std::filesystem::exists(fixture)) << fixture << ": run make_fixtures.py";
    std::filesystem::copy_file(fixture, dir.Db());
    auto store = SqliteStore::Open(dir.Db());
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->SchemaVersion(), SqliteStore::CurrentSchemaVersion());
    auto sweeps = (*store)->LoadSweeps();
    ASSERT_TRUE(sweeps.ok()) << sweeps.status();
    ASSERT_EQ(sweeps->size(), 1u);
    EXPECT_EQ((*sweeps)[0].name, "old");
    EXPECT_EQ((*sweeps)[0].state, v1::SWEEP_STATE_COMPLETED);
    EXPECT_EQ((*sweeps)[0].owner, version >= 3 ? "alice" : "");
    auto trials = (*store)->LoadTrials(1);
    ASSERT_TRUE(trials.ok()) << trials.status();
    ASSERT_EQ(trials->size(), 2u);
    EXPECT_EQ(std::get<int64_t>((*trials)[1].params.at("x")), 2);
    EXPECT_EQ(*(*trials)[1].objective, 0.25);
    EXPECT_EQ((*trials)[1].parent, version >= 2 ? 0 : -1);
    EXPECT_EQ((*trials)[1].stop_reason, version >= 5 ? "asha" : "");
    EXPECT_EQ((*trials)[1].segment, 1);
    EXPECT_TRUE((*trials)[1].segments.empty());
    EXPECT_EQ((*trials)[1].gpu_seconds, version >= 6 ? 96.0 : 0.0);
    EXPECT_EQ((*sweeps)[0].backend, "") << "the daemon's default";
    EXPECT_EQ((*sweeps)[0].budget_change.max_trials,
              version >= 7 ? std::optional<int64_t>(4) : std::nullopt);
    EXPECT_EQ((*trials)[0].origin, version >= 7 ? "enqueued" : "");
    EXPECT_EQ((*sweeps)[0].applied.size(), version >= 10 ? 1u : 0u);
    EXPECT_EQ((*sweeps)[0].nodes.size(), version >= 11 ? 1u : 0u);
    EXPECT_EQ((*sweeps)[0].plan_json, version >= 12 ? "{\"trials\": 2}" : "");
    // Pinned to the defaults they ran under; which hpod took them is not known.
    EXPECT_EQ((*sweeps)[0].defaults_version, 1);
    EXPECT_EQ((*sweeps)[0].hpod_version, "");
    EXPECT_EQ((*store)->LoadAllocations(1)->size(), version >= 8 ? 1u : 0u);
    EXPECT_EQ((*store)->LoadTrialEvents(0, 10)->size(), 2u) << "sweep events have trial 0";
    for (int64_t trial : {1, 2}) {  // one trial's reports were indexed, the other's staged
      auto reports = (*store)->LoadReports(trial);
      ASSERT_TRUE(reports.ok());
      ASSERT_EQ(reports->size(), 2u);
      EXPECT_EQ((*reports)[1].step, 2);
      EXPECT_EQ((*reports)[1].report_id, version >= 4 ? trial * 100 + 2 : 0);
    }
    EXPECT_EQ(ReportRows(dir.Db()).second, 0) << "staged reports move at open";
    EXPECT_EQ((*store)->LoadEvents(1, 0, 10)->size(), 2u);
    // New rows get ids past the old ones.
    EXPECT_EQ(*(*store)->InsertTrial(Trial(1, 2)), 3);
  }
}

// A full disk: commits fail, the store says so and keeps every write, and once there is room
// again they are all committed at a later commit, each with the id it was given.
TEST(SqliteStore, AFailedCommitKeepsItsWritesAndCommitsThemLater) {
  fakes::FaultyVfs& disk = fakes::FaultyVfs::Get();
  TempDir dir;
  FakeClock clock;
  SqliteStore::Options options;
  options.clock = &clock;
  options.vfs = fakes::FaultyVfs::kName;
  auto store = SqliteStore::Open(dir.Db(), options);
  ASSERT_TRUE(store.ok()) << store.status();
  SweepRecord sweep = Sweep();
  sweep.id = *(*store)->InsertSweep(sweep);

  disk.set_full(true);
  ASSERT_TRUE((*store)->Begin().ok());
  auto trial = (*store)->InsertTrial(Trial(sweep.id, 0));
  ASSERT_TRUE(trial.ok());
  ASSERT_TRUE(
      (*store)->InsertReport({*trial, 1, {{"loss", 0.5}}, absl::FromUnixSeconds(1001), 9}).ok());
  auto seq = (*store)->InsertEvent({0, sweep.id, *trial, "created"});
  ASSERT_TRUE(seq.ok());
  absl::Status commit = (*store)->Commit();
  EXPECT_TRUE(absl::IsUnavailable(commit)) << commit;
  EXPECT_TRUE(absl::IsUnavailable((*store)->Health()));
  EXPECT_GT(disk.refused(), 0);

  // Within the second, the store does not touch the disk: writes are kept, commits fail.
  ASSERT_TRUE((*store)->Begin().ok());
  TrialRecord updated = Trial(sweep.id, 0);
  updated.id = *trial;
  updated.state = v1::TRIAL_STATE_RUNNING;
  ASSERT_TRUE((*store)->UpdateTrial(updated).ok());
  auto second = (*store)->InsertTrial(Trial(sweep.id, 1));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, *trial + 1) << "ids are not given twice";
  EXPECT_FALSE((*store)->Commit().ok());

  // A second later, still full: tried again, still kept.
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE((*store)->Begin().ok());
  EXPECT_FALSE((*store)->Commit().ok());

  // Room again: the next try commits everything kept.
  disk.set_full(false);
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE((*store)->Begin().ok());
  ASSERT_TRUE((*store)->Commit().ok());
  EXPECT_TRUE((*store)->Health().ok());
  auto trials = (*store)->LoadTrials(sweep.id);
  ASSERT_EQ(trials->size(), 2u);
  EXPECT_EQ((*trials)[0].id, *trial);
  EXPECT_EQ((*trials)[0].state, v1::TRIAL_STATE_RUNNING);
  EXPECT_EQ((*trials)[1].id, *second);
  auto reports = (*store)->LoadReports(*trial);
  ASSERT_EQ(reports->size(), 1u);
  EXPECT_EQ((*reports)[0].report_id, 9);
  auto events = (*store)->LoadEvents(sweep.id, 0, 10);
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].seq, *seq);
  store->reset();
  // And it all survives a reopen.
  auto again = SqliteStore::Open(dir.Db());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->LoadTrials(sweep.id)->size(), 2u);
}

}  // namespace
}  // namespace hpo::server
