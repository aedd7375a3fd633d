// Reports a trial kept in its journal while hpod was away (common/report_journal.h): when the
// trial's command ends, hpod reads what is past the journal's cursor and stores each report it
// does not have, once, before it records the end.
#include "absl/strings/str_cat.h"
#include "common/report_journal.h"
#include "gtest/gtest.h"
#include "hpo/v1/states.h"
#include "server/core/controller.h"
#include "tests/fakes/test_daemon.h"

namespace hpo::server {
namespace {

using backend::LaunchSpec;
using backend::SimulatedFate;

class LateReportsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_.set_script([](const LaunchSpec&) {
      SimulatedFate f;
      f.run_time = absl::Seconds(10);
      return f;
    });
  }
  absl::StatusOr<v1::ReportResponse> Report(int64_t trial, int64_t id, int64_t step, double loss) {
    v1::ReportRequest req;
    req.set_trial_id(trial);
    req.set_report_id(id);
    req.set_step(step);
    (*req.mutable_metrics())["loss"] = loss;
    return daemon_.controller().Report(req, daemon_.TokenOf(trial));
  }
  JournalEntry Entry(int64_t id, std::optional<int64_t> step, double loss) {
    JournalEntry e;
    e.id = id;
    e.step = step;
    e.metrics = {{"loss", loss}};
    e.time = daemon_.clock().Now();
    return e;
  }
  fakes::TestDaemon daemon_;
};

TEST_F(LateReportsTest, AnEndingTrialsJournalCountsAndEachReportIsStoredOnce) {
  auto id = daemon_.Submit(
      "parameters: {x: {type: float, low: 0, high: 1}}\n"
      "objective: {metric: loss, direction: minimize}\n"
      "command: [train]\nbudget: {max_trials: 1}\n");
  ASSERT_TRUE(id.ok()) << id.status();
  daemon_.controller().RunOnce();
  v1::Trial t = daemon_.Trials(*id)[0];
  ASSERT_EQ(t.state(), v1::TRIAL_STATE_RUNNING);
  ASSERT_FALSE(t.trial_dir().empty());
  // Report 101 reached hpod, but its reply did not reach the trial: the journal's cursor stays
  // before it. 102 and 103 (no step) were made while hpod was away.
  ASSERT_TRUE(Report(t.id(), 101, 1, 0.9).ok());
  ReportJournal journal(t.trial_dir());
  JournalEntry delivered = Entry(101, 1, 0.9), late = Entry(102, 2, 0.5),
               stepless = Entry(103, std::nullopt, 0.4);
  daemon_.clock().Advance(absl::Seconds(2));
  ASSERT_TRUE(journal.Append(delivered).ok());
  ASSERT_TRUE(journal.Append(late).ok());
  ASSERT_TRUE(journal.Append(stepless).ok());
  daemon_.RunUntilEnded();
  t = daemon_.Trials(*id)[0];
  EXPECT_EQ(t.state(), v1::TRIAL_STATE_COMPLETED) << t.message();
  EXPECT_EQ(t.report_count(), 3);
  EXPECT_EQ(t.step(), 3);  // the report without a step came after step 2
  EXPECT_EQ(t.objective(), 0.4);
  EXPECT_EQ(daemon_.ReportRows(), 3);
}

// A backlog far longer than the recent ids hpod keeps in memory (a sender delivering what hpod
// already took from the journal during a long partition) is still stored once.
TEST_F(LateReportsTest, AnOldReportSentAgainLongAfterIsStoredOnce) {
  auto id = daemon_.Submit(
      "parameters: {x: {type: float, low: 0, high: 1}}\n"
      "objective: {metric: loss, direction: minimize}\n"
      "command: [train]\nbudget: {max_trials: 1}\n");
  ASSERT_TRUE(id.ok()) << id.status();
  daemon_.set_script([](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Hours(1);
    return f;
  });
  daemon_.controller().RunOnce();
  v1::Trial t = daemon_.Trials(*id)[0];
  ASSERT_EQ(t.state(), v1::TRIAL_STATE_RUNNING);
  for (int64_t s = 1; s <= 400; ++s) ASSERT_TRUE(Report(t.id(), 1000 + s, s, 1.0 / s).ok());
  for (int64_t s : {5, 6, 399}) {
    absl::StatusOr<v1::ReportResponse> again = Report(t.id(), 1000 + s, s, 1.0 / s);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->step(), s);
  }
  EXPECT_EQ(daemon_.Trials(*id)[0].report_count(), 400);
}

TEST_F(LateReportsTest, ALateReportNeverStopsATrialThatEndedAndABadOneIsSkipped) {
  // Median stopping from step 1 on: the second trial's late reports are worse than the first
  // trial's, but it ran to its end already.
  auto id = daemon_.Submit(
      "parameters: {x: {type: float, low: 0, high: 1}}\n"
      "objective: {metric: loss, direction: minimize}\n"
      "command: [train]\nbudget: {max_trials: 2, max_concurrent: 2}\n"
      "early_stopping: {name: median, grace_steps: 1, min_trials: 1}\n");
  ASSERT_TRUE(id.ok()) << id.status();
  daemon_.controller().RunOnce();
  std::vector<v1::Trial> trials = daemon_.Trials(*id);
  ASSERT_EQ(trials.size(), 2u);
  for (int64_t step = 1; step <= 3; ++step)
    ASSERT_TRUE(Report(trials[0].id(), step, step, 0.1).ok());
  ReportJournal journal(trials[1].trial_dir());
  for (int64_t step = 1; step <= 3; ++step) {
    JournalEntry e = Entry(100 + step, step, 5.0);
    ASSERT_TRUE(journal.Append(e).ok());
  }
  JournalEntry bad = Entry(200, 4, 1.0);
  bad.metrics = {{"hpo.runtime", 1.0}};  // a name hpod keeps for itself
  ASSERT_TRUE(journal.Append(bad).ok());
  daemon_.RunUntilEnded();
  trials = daemon_.Trials(*id);
  EXPECT_EQ(trials[1].state(), v1::TRIAL_STATE_COMPLETED) << trials[1].message();
  EXPECT_EQ(trials[1].report_count(), 3);
  EXPECT_EQ(trials[1].step(), 3);
}

}  // namespace
}  // namespace hpo::server
