// The controller in virtual time, as a whole: tests/fakes/test_daemon.h (the simulated backend,
// a FakeClock, a real SqliteStore in a temp dir). The failure paths it handles are in
// controller_faults_test.cc.
#include "server/core/controller.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hpo/v1/states.h"
#include "tests/fakes/test_daemon.h"

namespace hpo::server {
namespace {

using backend::LaunchSpec;
using backend::SimulatedFate;

class RecordingSink final : public EventSink {
 public:
  void Push(const v1::Event& e) override { events.push_back(e); }
  void Close(const absl::Status& s) override { closed = s; }
  bool Gone() const override { return false; }
  std::vector<v1::Event> events;
  std::optional<absl::Status> closed;
};

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<fakes::TestDaemon>();
    daemon_->set_script(
        [this](const LaunchSpec& s) { return script_ ? script_(s) : SimulatedFate{}; });
  }
  Controller& controller() { return daemon_->controller(); }
  void RunUntilEnded(absl::Duration limit = absl::Hours(10)) { daemon_->RunUntilEnded(limit); }
  int64_t Submit(const std::string& yaml) {
    auto id = daemon_->Submit(yaml);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }
  std::vector<v1::Trial> Trials(int64_t sweep) { return daemon_->Trials(sweep); }
  std::map<std::string, int> Counts(int64_t sweep) { return daemon_->Counts(sweep); }
  absl::StatusOr<v1::ReportResponse> Report(int64_t trial_id, std::map<std::string, double> m,
                                            std::optional<int64_t> step = std::nullopt,
                                            std::string token = "", int64_t report_id = 0) {
    v1::ReportRequest req;
    req.set_trial_id(trial_id);
    req.set_report_id(report_id);
    if (step) req.set_step(*step);
    for (auto& [k, v] : m) (*req.mutable_metrics())[k] = v;
    return controller().Report(req, token.empty() ? daemon_->TokenOf(trial_id) : token);
  }
  int64_t ReportRows() { return daemon_->ReportRows(); }

  std::string Spec(int max_trials, int concurrent, std::string extra = "",
                   std::string objective = "{metric: loss, direction: minimize}",
                   std::string budget_extra = "") {
    return absl::StrCat("parameters: {x: {type: float, low: 0, high: 1}, k: [a, b]}\n",
                        "objective: ", objective, "\n", "command: [train, '--x={x}']\n",
                        "budget: {max_trials: ", max_trials, ", max_concurrent: ", concurrent,
                        budget_extra, "}\n", extra);
  }

  void Restart(bool crash) {
    script_ = [](const LaunchSpec&) {
      SimulatedFate f;
      f.run_time = absl::Seconds(10);
      return f;
    };
    int64_t id = Submit(Spec(4, 2));
    controller().RunOnce();
    auto running = Trials(id);
    ASSERT_EQ(running.size(), 2u);
    ASSERT_TRUE(Report(running[0].id(), {{"loss", 0.3}}, 4).ok());
    controller().RunOnce();
    // The trials do not outlive the daemon here: nothing re-adopts them.
    ASSERT_TRUE(daemon_->Restart(crash, /*lose_trials=*/true).ok());
    auto after = Trials(id);
    EXPECT_EQ(after[0].state(), v1::TRIAL_STATE_LOST);
    EXPECT_EQ(after[0].step(), 4);  // rebuilt from the stored reports
    EXPECT_EQ(after[0].objective(), 0.3);
    RunUntilEnded();
    EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->state(),
              v1::SWEEP_STATE_COMPLETED);
    auto counts = Counts(id);
    EXPECT_EQ(counts["LOST"], 2);
    EXPECT_EQ(counts["COMPLETED"], 4);  // the sweep's 4 configurations, two of them retried
    auto trials = Trials(id);
    EXPECT_EQ(trials[2].retry_of(), trials[0].id());  // retries go first
    EXPECT_EQ(trials[2].params().at("x").float_value(), trials[0].params().at("x").float_value());
  }

  std::function<SimulatedFate(const LaunchSpec&)> script_;
  std::unique_ptr<fakes::TestDaemon> daemon_;
};

TEST_F(ControllerTest, RunsTheBudgetWithinConcurrency) {
  int64_t id = Submit(Spec(10, 3));
  int max_running = 0;
  for (int i = 0; i < 200 && !controller().AllSweepsEnded(); ++i) {
    controller().RunOnce();
    max_running = std::max(max_running, daemon_->simulated().Running());
    daemon_->clock().Advance(absl::Seconds(1));
  }
  EXPECT_EQ(max_running, 3);
  auto sweep = *controller().GetSweep(server::Controller::AllowedForTest(), id);
  EXPECT_EQ(sweep.state(), v1::SWEEP_STATE_COMPLETED);
  EXPECT_EQ(Counts(id), (std::map<std::string, int>{{"COMPLETED", 10}}));
  for (const auto& t : Trials(id)) {
    EXPECT_EQ(t.params().size(), 2u);
    EXPECT_EQ(t.backend_id(), absl::StrCat("simulated:", t.id()));
  }
  // The command got its placeholders and the environment its HPO_* variables.
  const LaunchSpec& first = daemon_->simulated().launched()[0];
  EXPECT_THAT(first.argv[1], ::testing::StartsWith("--x=0."));
  for (const char* k :
       {"HPO_ENDPOINT", "HPO_SWEEP_ID", "HPO_TRIAL_ID", "HPO_TRIAL_TOKEN", "HPO_TRIAL_DIR"}) {
    EXPECT_TRUE(first.env.count(k)) << k;
  }
}

// New trials take at most their slice of a batch's CPU time (here none: one suggestion per
// batch); the rest are made in the batches that follow at once (work posted meanwhile goes in
// them), the sweeps taking turns.
TEST_F(ControllerTest, SuggestionsTakeTheirSliceOfABatchAndSweepsTakeTurns) {
  fakes::TestDaemon::Options o;
  o.suggest_slice = absl::ZeroDuration();
  daemon_ = std::make_unique<fakes::TestDaemon>(o);
  int64_t a = Submit(Spec(3, 3)), b = Submit(Spec(3, 3));
  auto made = [&](int64_t id) { return static_cast<int>(Trials(id).size()); };
  int batches = 0;
  for (bool more = true; more; ++batches) {
    int before = made(a) + made(b);
    more = controller().RunOneBatch();
    EXPECT_LE(made(a) + made(b) - before, 1) << "batch " << batches;
    EXPECT_LE(std::abs(made(a) - made(b)), 1) << "batch " << batches;
    ASSERT_LT(batches, 20);
  }
  EXPECT_EQ(made(a), 3);
  EXPECT_EQ(made(b), 3);
  EXPECT_GE(batches, 4);
  // With the default slice, cheap suggestions all fit in one batch.
  daemon_ = std::make_unique<fakes::TestDaemon>();
  a = Submit(Spec(3, 3));
  b = Submit(Spec(3, 3));
  EXPECT_FALSE(controller().RunOneBatch());
  EXPECT_EQ(made(a) + made(b), 6);
}

TEST_F(ControllerTest, ReportsDecideTheObjectiveAndTheBest) {
  script_ = [](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Seconds(100);
    return f;
  };
  int64_t id = Submit(Spec(2, 2));
  controller().RunOnce();
  auto trials = Trials(id);
  ASSERT_EQ(trials.size(), 2u);
  int64_t a = trials[0].id(), b = trials[1].id();
  ASSERT_TRUE(Report(a, {{"loss", 0.9}}).ok());
  auto r = Report(a, {{"loss", 0.4}, {"acc", 0.8}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->step(), 2);  // auto step
  EXPECT_EQ(r->action(), v1::ReportResponse::ACTION_CONTINUE);
  ASSERT_TRUE(Report(a, {{"loss", 0.6}}, 10).ok());
  ASSERT_TRUE(Report(b, {{"loss", 0.5}}).ok());
  RunUntilEnded();
  auto t = *controller().GetTrial(server::Controller::AllowedForTest(), [&] {
    v1::GetTrialRequest q;
    q.set_trial_id(a);
    q.set_include_reports(true);
    return q;
  }());
  EXPECT_EQ(t.trial().objective(), 0.6);  // last value, not best
  EXPECT_EQ(t.trial().step(), 10);
  EXPECT_EQ(t.reports_size(), 3);
  EXPECT_EQ(t.trial().last_metrics().at("acc"), 0.8);
  auto sweep = *controller().GetSweep(server::Controller::AllowedForTest(), id);
  EXPECT_EQ(sweep.best_trial_id(), b);
  EXPECT_EQ(sweep.best_objective(), 0.5);
}

// A client retries a report whose reply it did not get. Without a step, only the report's id
// tells the retry from a new report with the same values; it holds across a crash of hpod.
TEST_F(ControllerTest, RetriedReportsAreStoredOnceAlsoAfterACrash) {
  script_ = [](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Seconds(100);
    return f;
  };
  int64_t id = Submit(Spec(1, 1));
  controller().RunOnce();
  int64_t t = Trials(id)[0].id();
  auto first = Report(t, {{"loss", 0.5}}, std::nullopt, "", 11);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->step(), 1);
  auto retry = Report(t, {{"loss", 0.5}}, std::nullopt, "", 11);
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(retry->step(), 1);                                          // answered as the first was
  auto same_values = Report(t, {{"loss", 0.5}}, std::nullopt, "", 12);  // a new report
  ASSERT_TRUE(same_values.ok());
  EXPECT_EQ(same_values->step(), 2);
  ASSERT_TRUE(Report(t, {{"loss", 0.4}}, 5).ok());  // no id: step and metrics decide
  EXPECT_EQ(Report(t, {{"loss", 0.4}}, 5)->step(), 5);
  ASSERT_TRUE(Report(t, {{"loss", 0.3}}, std::nullopt, "", 13).ok());
  controller().RunOnce();
  EXPECT_EQ(ReportRows(), 4);

  // kill -9 of hpod before the last reply reached the client; the trial runs on (the simulated
  // backend stands for the node) and the restarted daemon re-adopts it.
  ASSERT_TRUE(daemon_->Restart(/*crash=*/true).ok());
  controller().RunOnce();
  ASSERT_EQ(Trials(id)[0].state(), v1::TRIAL_STATE_RUNNING);
  auto after = Report(t, {{"loss", 0.3}}, std::nullopt, "", 13);  // the client's retry
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->step(), 6);
  auto next = Report(t, {{"loss", 0.3}}, std::nullopt, "", 14);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->step(), 7);
  controller().RunOnce();
  EXPECT_EQ(ReportRows(), 5);
}

TEST_F(ControllerTest, BadReportsStoreNothing) {
  script_ = [](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Seconds(5);
    return f;
  };
  int64_t id = Submit(Spec(1, 1));
  controller().RunOnce();
  int64_t t = Trials(id)[0].id();
  EXPECT_TRUE(absl::IsUnauthenticated(Report(t, {{"loss", 1}}, std::nullopt, "wrong").status()));
  EXPECT_TRUE(absl::IsUnauthenticated(Report(t + 100, {{"loss", 1}}, std::nullopt, "x").status()));
  auto nan = Report(t, {{"loss", std::nan("")}});
  EXPECT_TRUE(absl::IsInvalidArgument(nan.status()));
  EXPECT_THAT(std::string(nan.status().message()), ::testing::HasSubstr("only finite values"));
  EXPECT_TRUE(absl::IsInvalidArgument(Report(t, {{"loss", INFINITY}}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Report(t, {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Report(t, {{"bad name!", 1}}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Report(t, {{"loss", 1}}, -1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Report(t, {{"loss", 1}}, int64_t{1} << 60).status()));
  controller().RunOnce();
  EXPECT_EQ(ReportRows(), 0);
  RunUntilEnded();
  auto late = Report(t, {{"loss", 1}});
  EXPECT_TRUE(absl::IsFailedPrecondition(late.status()));
  EXPECT_EQ(ReportRows(), 0);
}

TEST_F(ControllerTest, TooManyFailuresFailTheSweep) {
  script_ = [](const LaunchSpec&) {
    SimulatedFate f;
    f.exit_code = 2;
    return f;
  };
  int64_t id = Submit(Spec(20, 2, "", "{metric: loss, direction: minimize}", ", max_failed: 3"));
  RunUntilEnded();
  auto sweep = *controller().GetSweep(server::Controller::AllowedForTest(), id);
  EXPECT_EQ(sweep.state(), v1::SWEEP_STATE_FAILED);
  EXPECT_THAT(sweep.message(), ::testing::HasSubstr("max_failed"));
  auto counts = Counts(id);
  EXPECT_GE(counts["FAILED"], 3);
  EXPECT_LE(counts["FAILED"] + counts["STOPPED"], 4);
}

TEST_F(ControllerTest, LostTrialsAreRetriedAsInfrastructureFailures) {
  int launches = 0;
  script_ = [&](const LaunchSpec&) {
    SimulatedFate f;
    f.lost = launches++ == 0;  // the very first launch is lost
    return f;
  };
  // max_failed 1: a trial the infrastructure took does not count against the sweep.
  int64_t id = Submit(Spec(3, 1, "", "{metric: loss, direction: minimize}", ", max_failed: 1"));
  RunUntilEnded();
  auto trials = Trials(id);
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[0].state(), v1::TRIAL_STATE_LOST);
  EXPECT_EQ(trials[0].interruption(), v1::INTERRUPTION_NODE_FAILURE);
  EXPECT_EQ(trials[1].interruption(), v1::INTERRUPTION_UNSPECIFIED);
  EXPECT_EQ(trials[1].retry_of(), trials[0].id());
  EXPECT_EQ(trials[1].attempt(), 2);
  EXPECT_EQ(trials[1].params().at("x").float_value(), trials[0].params().at("x").float_value());
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->state(),
            v1::SWEEP_STATE_COMPLETED);
  EXPECT_EQ(Counts(id)["COMPLETED"], 3);
}

TEST_F(ControllerTest, CancelStopsRunningTrialsAndIgnoresTheRest) {
  script_ = [](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Hours(1);
    f.stop_after = absl::Seconds(3);
    return f;
  };
  int64_t id = Submit(Spec(10, 4));
  controller().RunOnce();
  EXPECT_EQ(daemon_->simulated().Running(), 4);
  auto s = controller().Cancel(Controller::AllowedForTest(), id);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state(), v1::SWEEP_STATE_RUNNING);  // still winding down
  RunUntilEnded();
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->state(),
            v1::SWEEP_STATE_CANCELED);
  EXPECT_EQ(Counts(id), (std::map<std::string, int>{{"CANCELED", 4}}));
  EXPECT_EQ(daemon_->simulated().Running(), 0);
  EXPECT_TRUE(
      absl::IsFailedPrecondition(controller().Cancel(Controller::AllowedForTest(), id).status()));
  EXPECT_TRUE(absl::IsNotFound(controller().Cancel(Controller::AllowedForTest(), id + 1).status()));
}

TEST_F(ControllerTest, TheChangingVerbsActOnlyWithinWhatTheGateAllowed) {
  int64_t one = Submit(Spec(10, 2));
  int64_t two = Submit(Spec(10, 2));
  Caller alice;
  alice.user = "alice";
  alice.sweeps[one] = Role::kOperator;
  absl::StatusOr<Allowed> allowed = controller().Allow(alice, {Action::kOperate, one});
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_EQ(allowed->caller().user, "alice");
  EXPECT_TRUE(controller().Pause(*allowed, one).ok());
  // A door that asked about one sweep and acts on another is refused, and nothing changes.
  absl::StatusOr<v1::Sweep> other = controller().Pause(*allowed, two);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInternal) << other.status();
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), two)->state(),
            v1::SWEEP_STATE_RUNNING);
  // ... or does another thing than it asked for.
  v1::SubmitSweepRequest req;
  req.set_spec_yaml(Spec(1, 1));
  EXPECT_EQ(controller().Submit(*allowed, req).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(controller().Remove(*allowed, one).status().code(), absl::StatusCode::kInternal);
  // The gate itself says no where the role does not reach.
  EXPECT_TRUE(
      absl::IsPermissionDenied(controller().Allow(alice, {Action::kOperate, two}).status()));
  EXPECT_TRUE(absl::IsPermissionDenied(controller().Allow(alice, {Action::kSubmit}).status()));
}

TEST_F(ControllerTest, TheReadingVerbsReadOnlyWhatTheGateAllowed) {
  int64_t one = Submit(Spec(10, 2));
  int64_t two = Submit(Spec(10, 2));
  controller().RunOnce();
  int64_t trial_of_two = Trials(two)[0].id();
  Caller bob;
  bob.user = "bob";
  bob.sweeps[one] = Role::kViewer;
  absl::StatusOr<Allowed> view_one = controller().Allow(bob, {Action::kView, one});
  ASSERT_TRUE(view_one.ok()) << view_one.status();
  EXPECT_TRUE(controller().GetSweep(*view_one, one).ok());
  v1::ListTrialsRequest trials;
  trials.set_sweep_id(one);
  EXPECT_TRUE(controller().ListTrials(*view_one, trials).ok());
  EXPECT_TRUE(controller().Read(*view_one).ok());
  // A door that asked to view sweep one and reads sweep two, or a trial, is refused.
  EXPECT_EQ(controller().GetSweep(*view_one, two).status().code(), absl::StatusCode::kInternal);
  trials.set_sweep_id(two);
  EXPECT_EQ(controller().ListTrials(*view_one, trials).status().code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(controller().TrialDir(*view_one, trial_of_two).status().code(),
            absl::StatusCode::kInternal);
  v1::GetTrialRequest get;
  get.set_trial_id(trial_of_two);
  EXPECT_EQ(controller().GetTrial(*view_one, get).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(controller().Watch(*view_one, two, 0, nullptr).code(), absl::StatusCode::kInternal);
  // The list shows only what the caller may view; a ruling to list reads nothing of the core.
  absl::StatusOr<Allowed> use = controller().Allow(bob, {Action::kUse});
  ASSERT_TRUE(use.ok());
  absl::StatusOr<std::vector<v1::Sweep>> listed = controller().ListSweeps(*use, false);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id(), one);
  EXPECT_EQ(controller().Read(*use).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(controller().ListSweeps(*view_one, false).status().code(), absl::StatusCode::kInternal);
  // The gate says no to what the role does not reach.
  EXPECT_TRUE(absl::IsPermissionDenied(controller().Allow(bob, {Action::kView, two}).status()));
}

TEST_F(ControllerTest, GoalEndsTheSweepAndStopsTheOthers) {
  script_ = [](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Hours(1);
    f.stop_after = absl::Seconds(2);
    return f;
  };
  int64_t id = Submit(Spec(10, 3, "", "{metric: loss, direction: minimize, goal: 0.1}"));
  controller().RunOnce();
  auto trials = Trials(id);
  ASSERT_EQ(trials.size(), 3u);
  auto r = Report(trials[0].id(), {{"loss", 0.5}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->action(), v1::ReportResponse::ACTION_CONTINUE);
  r = Report(trials[1].id(), {{"loss", 0.05}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->action(), v1::ReportResponse::ACTION_STOP);
  // Everyone else learns at their next report.
  r = Report(trials[0].id(), {{"loss", 0.4}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->action(), v1::ReportResponse::ACTION_STOP);
  EXPECT_THAT(r->reason(), ::testing::HasSubstr("reached the goal"));
  RunUntilEnded();
  auto sweep = *controller().GetSweep(server::Controller::AllowedForTest(), id);
  EXPECT_EQ(sweep.state(), v1::SWEEP_STATE_GOAL_REACHED);
  EXPECT_EQ(sweep.best_trial_id(), trials[1].id());
  EXPECT_EQ(Trials(id).size(), 3u);  // no trial started after the goal
  EXPECT_EQ(Counts(id)["STOPPED"], 3);
}

TEST_F(ControllerTest, EarlyStopIsToldFirstAndEnforcedAfterGrace) {
  script_ = [](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Hours(1);
    f.stop_after = absl::Minutes(5);  // the trial ignores the stop as long as it can
    return f;
  };
  int64_t id = Submit(Spec(
      2, 2,
      "early_stopping: {name: asha, min_resource: 1, reduction_factor: 3}\nstop_grace: 10s\n"));
  controller().RunOnce();
  auto trials = Trials(id);
  ASSERT_EQ(trials.size(), 2u);
  ASSERT_EQ(Report(trials[0].id(), {{"loss", 0.1}}, 1)->action(),
            v1::ReportResponse::ACTION_CONTINUE);
  auto r = Report(trials[1].id(), {{"loss", 0.9}}, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->action(), v1::ReportResponse::ACTION_STOP);
  EXPECT_THAT(r->reason(), ::testing::HasSubstr("asha"));
  // Told, not yet forced: within the grace period the backend has not been asked.
  for (int i = 0; i < 5; ++i) {
    daemon_->clock().Advance(absl::Seconds(1));
    controller().RunOnce();
  }
  EXPECT_EQ(daemon_->simulated().Running(), 2);
  // Past the grace period hpod stops it (SIGTERM, SIGKILL after another grace period).
  for (int i = 0; i < 30; ++i) {
    daemon_->clock().Advance(absl::Seconds(1));
    controller().RunOnce();
  }
  auto after = Trials(id);
  EXPECT_EQ(after[1].state(), v1::TRIAL_STATE_STOPPED);
  EXPECT_THAT(after[1].message(), ::testing::HasSubstr("rung 0"));
  EXPECT_EQ(after[1].step(), 1);  // its curve is kept
  EXPECT_EQ(after[0].state(), v1::TRIAL_STATE_RUNNING);
}

TEST_F(ControllerTest, PauseHoldsNewTrials) {
  script_ = [](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Seconds(5);
    return f;
  };
  int64_t id = Submit(Spec(4, 1));
  controller().RunOnce();
  ASSERT_TRUE(controller().Pause(Controller::AllowedForTest(), id).ok());
  EXPECT_TRUE(
      absl::IsFailedPrecondition(controller().Pause(Controller::AllowedForTest(), id).status()));
  for (int i = 0; i < 30; ++i) {
    daemon_->clock().Advance(absl::Seconds(1));
    controller().RunOnce();
  }
  EXPECT_EQ(Trials(id).size(), 1u);
  ASSERT_TRUE(controller().Resume(Controller::AllowedForTest(), id).ok());
  RunUntilEnded();
  EXPECT_EQ(Counts(id)["COMPLETED"], 4);
}

TEST_F(ControllerTest, WallTimeEndsTheSweep) {
  script_ = [](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Minutes(10);
    return f;
  };
  int64_t id =
      Submit(absl::StrCat("parameters: {x: [1, 2, 3]}\nobjective: {metric: m, direction: max}\n",
                          "command: t\nbudget: {max_concurrent: 2, wall_time: 15m}\n"));
  RunUntilEnded();
  auto sweep = *controller().GetSweep(server::Controller::AllowedForTest(), id);
  EXPECT_EQ(sweep.state(), v1::SWEEP_STATE_TIMED_OUT);
  auto counts = Counts(id);
  EXPECT_EQ(counts["COMPLETED"], 2);
  EXPECT_EQ(counts["STOPPED"], 2);
}

TEST_F(ControllerTest, WatchReplaysThenFollowsAndEnds) {
  script_ = [](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Seconds(3);
    return f;
  };
  int64_t id = Submit(Spec(3, 1));
  for (int i = 0; i < 4; ++i) {
    controller().RunOnce();
    daemon_->clock().Advance(absl::Seconds(1));
  }
  auto early = std::make_shared<RecordingSink>();
  ASSERT_TRUE(controller().Watch(server::Controller::AllowedForTest(), id, 0, early).ok());
  // The past is replayed on the publisher's own thread.
  controller().WaitForWatchReplays();
  size_t replayed = early->events.size();
  EXPECT_GT(replayed, 3u);
  // A negative since_seq: nothing of the past, only what comes next.
  auto only_new = std::make_shared<RecordingSink>();
  ASSERT_TRUE(controller().Watch(server::Controller::AllowedForTest(), id, -1, only_new).ok());
  EXPECT_TRUE(only_new->events.empty());
  RunUntilEnded();
  ASSERT_TRUE(only_new->closed.has_value());
  ASSERT_EQ(only_new->events.size(), early->events.size() - replayed);
  EXPECT_GT(only_new->events.front().seq(), early->events[replayed - 1].seq());
  EXPECT_EQ(only_new->events.back().seq(), early->events.back().seq());
  ASSERT_TRUE(early->closed.has_value());
  EXPECT_TRUE(early->closed->ok());
  const v1::Event& last = early->events.back();
  EXPECT_EQ(last.kind(), v1::EVENT_KIND_SWEEP_STATE);
  EXPECT_EQ(last.sweep().state(), v1::SWEEP_STATE_COMPLETED);
  for (size_t i = 1; i < early->events.size(); ++i) {
    EXPECT_LT(early->events[i - 1].seq(), early->events[i].seq());
  }
  // Resuming from the middle gives exactly the rest.
  auto resumed = std::make_shared<RecordingSink>();
  int64_t mid = early->events[replayed / 2].seq();
  ASSERT_TRUE(controller().Watch(server::Controller::AllowedForTest(), id, mid, resumed).ok());
  controller().WaitForWatchReplays();
  ASSERT_TRUE(resumed->closed.has_value());
  EXPECT_EQ(resumed->events.size(), early->events.size() - replayed / 2 - 1);
  EXPECT_EQ(resumed->events.back().seq(), last.seq());
  EXPECT_TRUE(absl::IsNotFound(
      controller().Watch(server::Controller::AllowedForTest(), id + 9, 0, resumed)));
  // An ended sweep's new events: none, and the stream ends at once.
  auto after_end = std::make_shared<RecordingSink>();
  ASSERT_TRUE(controller().Watch(server::Controller::AllowedForTest(), id, -1, after_end).ok());
  EXPECT_TRUE(after_end->events.empty());
  ASSERT_TRUE(after_end->closed.has_value());
  EXPECT_TRUE(after_end->closed->ok());
}

// Watchers that join while the sweep runs, their past replayed off the controller's thread while
// live events come: each gets every event of the sweep once, in order.
TEST_F(ControllerTest, WatchersJoiningMidSweepGetEveryEventOnceInOrder) {
  script_ = [](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Seconds(3);
    return f;
  };
  int64_t id = Submit(Spec(6, 2));
  std::vector<std::shared_ptr<RecordingSink>> joined;
  for (int i = 0; i < 8; ++i) {
    joined.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE(
        controller().Watch(server::Controller::AllowedForTest(), id, 0, joined.back()).ok());
    controller().RunOnce();
    daemon_->clock().Advance(absl::Seconds(1));
  }
  RunUntilEnded();
  controller().WaitForWatchReplays();
  // After the end: the whole log, replayed.
  auto all = std::make_shared<RecordingSink>();
  ASSERT_TRUE(controller().Watch(server::Controller::AllowedForTest(), id, 0, all).ok());
  controller().WaitForWatchReplays();
  ASSERT_TRUE(all->closed.has_value());
  EXPECT_TRUE(all->closed->ok());
  ASSERT_GT(all->events.size(), 10u);
  EXPECT_EQ(all->events.back().sweep().state(), v1::SWEEP_STATE_COMPLETED);
  for (const auto& sink : joined) {
    ASSERT_TRUE(sink->closed.has_value());
    EXPECT_TRUE(sink->closed->ok());
    ASSERT_EQ(sink->events.size(), all->events.size());
    for (size_t i = 0; i < all->events.size(); ++i) {
      EXPECT_EQ(sink->events[i].seq(), all->events[i].seq());
    }
  }
}

TEST_F(ControllerTest, CrashMarksRunningTrialsLostAndRetriesThem) { Restart(/*crash=*/true); }
TEST_F(ControllerTest, ShutdownMarksRunningTrialsLostAndRetriesThem) { Restart(/*crash=*/false); }

// A resumable sweep: segment 1 of the first trial ends at a time limit after 4 s, segment 2
// finishes in 6 s. One GPU per trial.
constexpr char kResumable[] = "resources: {gpus: 1}\ncheckpoint: {signal: SIGUSR1, grace: 30s}\n";

TEST_F(ControllerTest, ResumableTrialsContinueAsTheirNextSegment) {
  int launches = 0;
  script_ = [&](const LaunchSpec&) {
    SimulatedFate f;
    f.lost = launches++ == 0;
    f.run_time = absl::Seconds(f.lost ? 4 : 6);
    f.interruption = backend::Interruption::kTimeLimit;
    return f;
  };
  // max_failed 0 and max_retries 0: an interruption is neither a failure nor a retry.
  int64_t id = Submit(Spec(2, 1, std::string(kResumable) + "max_retries: 0\n",
                           "{metric: loss, direction: minimize}", ", max_failed: 0"));
  controller().RunOnce();
  int64_t first = Trials(id)[0].id();
  ASSERT_TRUE(Report(first, {{"loss", 0.9}}, 1).ok());
  ASSERT_TRUE(Report(first, {{"loss", 0.8}}, 2).ok());
  for (int i = 0; i < 5; ++i) {
    daemon_->clock().Advance(absl::Seconds(1));
    controller().RunOnce();
  }
  // Segment 2 runs: the same trial, from its own checkpoint, told which segment it is.
  const auto& launched = daemon_->simulated().launched();
  ASSERT_EQ(launched.size(), 2u);
  const LaunchSpec& second = launched[1];
  EXPECT_EQ(second.trial_id, first);
  EXPECT_EQ(second.segment, 2);
  EXPECT_EQ(second.checkpoint_signal, SIGUSR1);
  EXPECT_EQ(second.checkpoint_grace, absl::Seconds(30));
  EXPECT_EQ(second.env.at("HPO_SEGMENT"), "2");
  EXPECT_EQ(second.env.at("HPO_CHECKPOINT_IN"), second.env.at("HPO_CHECKPOINT_OUT"));
  EXPECT_EQ(launched[0].env.at("HPO_CHECKPOINT_IN"), "");
  auto mid = Trials(id)[0];
  EXPECT_EQ(mid.state(), v1::TRIAL_STATE_RUNNING);
  EXPECT_EQ(mid.segment(), 2);
  EXPECT_EQ(mid.step(), 2);
  // The segment repeats step 2 (work since its checkpoint): stored, but the curve keeps 0.8.
  ASSERT_TRUE(Report(first, {{"loss", 0.85}}, 2).ok());
  ASSERT_TRUE(Report(first, {{"loss", 0.5}}, 3).ok());
  RunUntilEnded();
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->state(),
            v1::SWEEP_STATE_COMPLETED);
  auto trials = Trials(id);
  ASSERT_EQ(trials.size(), 2u);  // no retry: the same trial went on
  const v1::Trial& t = trials[0];
  EXPECT_EQ(t.state(), v1::TRIAL_STATE_COMPLETED);
  EXPECT_EQ(t.segment(), 2);
  EXPECT_EQ(t.step(), 3);
  EXPECT_EQ(t.report_count(), 4);
  EXPECT_EQ(t.objective(), 0.5);
  ASSERT_EQ(t.segments_size(), 1);
  EXPECT_EQ(t.segments(0).number(), 1);
  EXPECT_EQ(t.segments(0).interruption(), v1::INTERRUPTION_TIME_LIMIT);
  EXPECT_DOUBLE_EQ(t.segments(0).gpu_seconds(), 4.0);
  EXPECT_EQ(t.interruption(), v1::INTERRUPTION_UNSPECIFIED);  // it ended well
  EXPECT_DOUBLE_EQ(t.gpu_seconds(), 10.0);                    // 4 s + 6 s on one GPU
  EXPECT_DOUBLE_EQ(trials[1].gpu_seconds(), 6.0);
  EXPECT_EQ(ReportRows(), 4);
  // All of it survives a restart: the row, its segments, and the curve without the repeat.
  ASSERT_TRUE(daemon_->Restart(/*crash=*/true).ok());
  auto again = Trials(id)[0];
  EXPECT_EQ(again.segment(), 2);
  ASSERT_EQ(again.segments_size(), 1);
  EXPECT_EQ(again.segments(0).interruption(), v1::INTERRUPTION_TIME_LIMIT);
  EXPECT_DOUBLE_EQ(again.gpu_seconds(), 10.0);
  EXPECT_EQ(again.objective(), 0.5);
}

// hpod records that it told a trial to checkpoint before the signal goes, so a trial whose
// segment exits 0 after that (here: while hpod was down) continues as its next segment instead
// of being taken for finished.
TEST_F(ControllerTest, ATrialToldToCheckpointContinuesEvenIfItExitedZeroWhileHpodWasDown) {
  int launches = 0;
  script_ = [&](const LaunchSpec&) {
    SimulatedFate f;
    if (launches++ == 0) {
      f.checkpoint_after = absl::Seconds(2);  // its allocation ends: told to checkpoint
      f.interruption = backend::Interruption::kTimeLimit;
      f.run_time = absl::Seconds(4);  // and it exits 0 once it saved its state
    } else {
      f.run_time = absl::Seconds(6);
    }
    return f;
  };
  int64_t id = Submit(Spec(1, 1, std::string(kResumable) + "max_retries: 0\n"));
  controller().RunOnce();
  int64_t trial = Trials(id)[0].id();
  for (int i = 0; i < 2; ++i) {
    daemon_->clock().Advance(absl::Seconds(1));
    controller().RunOnce();
  }
  // The batch that recorded the request was committed, and only then was the signal sent.
  EXPECT_EQ(daemon_->simulated().checkpoint_signals(), std::vector<int64_t>{trial});
  // hpod dies; the trial (still running) exits 0 before it is back.
  ASSERT_TRUE(daemon_->Restart(/*crash=*/true).ok());
  daemon_->clock().Advance(absl::Seconds(3));
  controller().RunOnce();
  controller().RunOnce();
  auto mid = Trials(id)[0];
  EXPECT_NE(mid.state(), v1::TRIAL_STATE_COMPLETED) << "cut short, not finished";
  EXPECT_EQ(mid.segment(), 2);
  RunUntilEnded();
  auto t = Trials(id)[0];
  EXPECT_EQ(t.state(), v1::TRIAL_STATE_COMPLETED);
  EXPECT_EQ(t.segment(), 2);
  ASSERT_EQ(t.segments_size(), 1);
  EXPECT_EQ(t.segments(0).interruption(), v1::INTERRUPTION_TIME_LIMIT);
  EXPECT_EQ(daemon_->simulated().launched().size(), 2u);
  EXPECT_EQ(Trials(id).size(), 1u) << "the same trial went on; no retry";
}

TEST_F(ControllerTest, TrialsOutOfSegmentsEndLost) {
  script_ = [](const LaunchSpec&) {
    SimulatedFate f;
    f.lost = true;
    f.interruption = backend::Interruption::kPreempted;
    return f;
  };
  int64_t id = Submit(Spec(1, 1,
                           "resources: {gpus: 1}\ncheckpoint: {max_segments: 3}\n"
                           "max_retries: 0\n"));
  RunUntilEnded();
  auto trials = Trials(id);
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state(), v1::TRIAL_STATE_LOST);
  EXPECT_EQ(trials[0].segment(), 3);
  EXPECT_EQ(trials[0].segments_size(), 2);
  EXPECT_EQ(trials[0].interruption(), v1::INTERRUPTION_PREEMPTED);
  EXPECT_DOUBLE_EQ(trials[0].gpu_seconds(), 30.0);
  EXPECT_EQ(daemon_->simulated().launched().size(), 3u);
}

TEST_F(ControllerTest, ResumableTrialsContinueAfterADaemonRestart) {
  for (bool crash : {true, false}) {
    SetUp();
    script_ = [](const LaunchSpec&) {
      SimulatedFate f;
      f.run_time = absl::Seconds(10);
      return f;
    };
    int64_t id = Submit(Spec(1, 1, kResumable));
    controller().RunOnce();
    daemon_->clock().Advance(absl::Seconds(3));
    controller().RunOnce();
    ASSERT_TRUE(daemon_->Restart(crash, /*lose_trials=*/true).ok());
    auto after = Trials(id);
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(after[0].segment(), 2) << crash;
    EXPECT_EQ(after[0].segments(0).interruption(), v1::INTERRUPTION_DAEMON);
    RunUntilEnded();
    auto trials = Trials(id);
    ASSERT_EQ(trials.size(), 1u) << crash;
    EXPECT_EQ(trials[0].state(), v1::TRIAL_STATE_COMPLETED);
    EXPECT_EQ(daemon_->simulated().launched().back().env.at("HPO_SEGMENT"), "2");
  }
}

TEST_F(ControllerTest, TimeLimitIsGivenToTheBackendAndFinishedTrialsSetTheNeed) {
  int64_t limited = Submit(Spec(1, 1, "resources: {time_limit: 90s}\n"));
  RunUntilEnded();
  const LaunchSpec& l = daemon_->simulated().launched().back();
  EXPECT_EQ(l.resources.time_limit, absl::Minutes(2));  // Slurm counts minutes
  EXPECT_EQ(l.resources.needs, absl::Minutes(2));
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), limited)->state(),
            v1::SWEEP_STATE_COMPLETED);
  // Without a limit, a trial needs as long as the longest finished one took (10 s here).
  int64_t open = Submit(Spec(2, 1));
  RunUntilEnded();
  const auto& launched = daemon_->simulated().launched();
  EXPECT_EQ(launched[launched.size() - 2].resources.needs, absl::ZeroDuration());
  EXPECT_EQ(launched.back().resources.needs, absl::Seconds(10));
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), open)->state(),
            v1::SWEEP_STATE_COMPLETED);
  // A resumable one continues elsewhere: it needs time to work as long as its grace, and the
  // grace.
  Submit(Spec(2, 1, kResumable));
  RunUntilEnded();
  EXPECT_EQ(daemon_->simulated().launched().back().resources.needs, absl::Minutes(1));
}

// Params of each trial, in number order, as text.
std::vector<std::string> ParamsOf(const std::vector<v1::Trial>& trials) {
  std::vector<std::string> out;
  for (const auto& t : trials) out.push_back(t.params().at("x").ShortDebugString());
  return out;
}

TEST_F(ControllerTest, ExtendReopensAnEndedSweepAndItsSearchGoesOnAsIfLargerFromTheStart) {
  int64_t id = Submit(Spec(4, 2));
  RunUntilEnded();
  ASSERT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->state(),
            v1::SWEEP_STATE_COMPLETED);
  v1::ExtendSweepRequest req;
  req.set_sweep_id(id);
  req.set_add_trials(4);
  req.set_max_concurrent(3);
  absl::StatusOr<v1::Sweep> extended = controller().Extend(Controller::AllowedForTest(), req);
  ASSERT_TRUE(extended.ok()) << extended.status();
  EXPECT_EQ(extended->state(), v1::SWEEP_STATE_RUNNING);
  EXPECT_EQ(extended->max_trials(), 8);
  EXPECT_EQ(extended->max_concurrent(), 3);
  EXPECT_THAT(extended->message(), ::testing::HasSubstr("): trials 8"));
  RunUntilEnded();
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->state(),
            v1::SWEEP_STATE_COMPLETED);
  EXPECT_EQ(Counts(id), (std::map<std::string, int>{{"COMPLETED", 8}}));
  // The same seed gives the same eight points as a sweep of 8 from the start.
  int64_t whole = Submit(Spec(8, 2));
  RunUntilEnded();
  EXPECT_EQ(ParamsOf(Trials(id)), ParamsOf(Trials(whole)));
  // The change is stored: a restart plans the sweep with it.
  ASSERT_TRUE(daemon_->Restart(/*crash=*/true).ok());
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->max_trials(), 8);
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->state(),
            v1::SWEEP_STATE_COMPLETED);
}

// A change whose reply was lost (hpod died after the commit) is sent again with its key: it is
// answered with the sweep as it is and applied once. The key is stored with the change.
TEST_F(ControllerTest, ARetriedExtendOrEnqueueAppliesOnceAcrossACrash) {
  int64_t id = Submit(Spec(2, 2));
  RunUntilEnded();
  v1::ExtendSweepRequest extend;
  extend.set_sweep_id(id);
  extend.set_add_trials(3);
  extend.set_request_id("extend-1");
  ASSERT_TRUE(controller().Extend(Controller::AllowedForTest(), extend).ok());
  controller().RunOnce();
  ASSERT_TRUE(daemon_->Restart(/*crash=*/true).ok());
  absl::StatusOr<v1::Sweep> again = controller().Extend(Controller::AllowedForTest(), extend);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->max_trials(), 5) << "applied once, not 8";
  v1::ExtendSweepRequest other = extend;
  other.set_add_trials(4);
  absl::StatusOr<v1::Sweep> clash = controller().Extend(Controller::AllowedForTest(), other);
  EXPECT_TRUE(absl::IsInvalidArgument(clash.status())) << clash.status();
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->max_trials(), 5);

  v1::EnqueueRequest enqueue;
  enqueue.set_sweep_id(id);
  enqueue.set_request_id("enqueue-1");
  auto& point = *enqueue.add_points()->mutable_values();
  point["x"] = "0.25";
  point["k"] = "b";
  ASSERT_TRUE(controller().Enqueue(Controller::AllowedForTest(), enqueue).ok());
  controller().RunOnce();
  ASSERT_TRUE(daemon_->Restart(/*crash=*/true).ok());
  ASSERT_TRUE(controller().Enqueue(Controller::AllowedForTest(), enqueue).ok());
  RunUntilEnded();
  auto trials = Trials(id);
  EXPECT_EQ(trials.size(), 5u) << "2 + 3 more, the enqueued one among them, not twice";
  int enqueued = 0;
  for (const v1::Trial& t : trials) enqueued += t.params().at("x").float_value() == 0.25;
  EXPECT_EQ(enqueued, 1);
  // Without a key every request is a new one.
  extend.clear_request_id();
  ASSERT_TRUE(controller().Extend(Controller::AllowedForTest(), extend).ok());
  ASSERT_TRUE(controller().Extend(Controller::AllowedForTest(), extend).ok());
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->max_trials(), 11);
}

TEST_F(ControllerTest, AnOperatorAddsGpuHoursOnlyUpToTheOwnersCapAndEachExtendNamesWhoDidIt) {
  int64_t id = Submit(Spec(20, 2, "resources: {gpus: 1}\n", "{metric: loss, direction: minimize}",
                           ", gpu_hours: 1"));
  Caller opal;
  opal.user = "opal";
  opal.role = Role::kOperator;
  opal.max_extend_gpu_hours = 3;
  absl::StatusOr<Allowed> allowed = controller().Allow(opal, {Action::kOperate, id});
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  auto extend = [&](double add) {
    v1::ExtendSweepRequest req;
    req.set_sweep_id(id);
    req.set_add_gpu_hours(add);
    return controller().Extend(*allowed, req);
  };
  absl::StatusOr<v1::Sweep> first = extend(2);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(first->message(), ::testing::HasSubstr("extended by opal: GPU-hours 3"));
  // 2 added of 3: one more is the most, whatever the sweep's budget has become.
  absl::StatusOr<v1::Sweep> over = extend(1.5);
  ASSERT_TRUE(absl::IsPermissionDenied(over.status())) << over.status();
  EXPECT_THAT(std::string(over.status().message()),
              ::testing::HasSubstr("opal may add at most 3 GPU-hours"));
  EXPECT_THAT(std::string(over.status().message()), ::testing::HasSubstr("added 2 to sweep"));
  EXPECT_DOUBLE_EQ(controller().GetSweep(Controller::AllowedForTest(), id)->gpu_hours_budget(), 3);
  ASSERT_TRUE(extend(1).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(extend(0.01).status()));
  // What opal added is kept with the sweep, across a restart of hpod.
  SweepRecord stored = daemon_->sqlite().LoadSweeps()->at(0);
  EXPECT_DOUBLE_EQ(stored.budget_change.gpu_hours_added_by.at("opal"), 3);
  // The owner has no cap, and says who extended.
  v1::ExtendSweepRequest more;
  more.set_sweep_id(id);
  more.set_add_gpu_hours(10);
  absl::StatusOr<v1::Sweep> owner = controller().Extend(Controller::AllowedForTest(), more);
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_THAT(owner->message(), ::testing::HasSubstr("extended by the owner"));
  // Without a cap an operator adds as the owner does, and what it added is counted all the same.
  opal.max_extend_gpu_hours.reset();
  allowed = controller().Allow(opal, {Action::kOperate, id});
  ASSERT_TRUE(extend(5).ok());
  EXPECT_DOUBLE_EQ(
      daemon_->sqlite().LoadSweeps()->at(0).budget_change.gpu_hours_added_by.at("opal"), 8);
}

TEST_F(ControllerTest, ExtendRefusesWhatGivesNothingMoreAndChangesNothing) {
  int64_t id = Submit(Spec(2, 2, "resources: {gpus: 1}\n", "{metric: loss, direction: minimize}",
                           ", gpu_hours: 1"));
  RunUntilEnded();  // 2 trials x 10 s x 1 GPU
  v1::ExtendSweepRequest req;
  req.set_sweep_id(id);
  auto refused = [&](v1::ExtendSweepRequest r, const std::string& says) {
    absl::StatusOr<v1::Sweep> s = controller().Extend(Controller::AllowedForTest(), r);
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr(says)) << s.status();
    v1::Sweep now = *controller().GetSweep(server::Controller::AllowedForTest(), id);
    EXPECT_EQ(now.state(), v1::SWEEP_STATE_COMPLETED);
    EXPECT_EQ(now.max_trials(), 2);
  };
  refused(req, "nothing to change");
  v1::ExtendSweepRequest fewer = req;
  fewer.set_max_trials(2);
  refused(fewer, "already made 2 trial(s)");
  v1::ExtendSweepRequest below = req;
  below.set_add_trials(1);
  below.set_gpu_hours(0.001);
  refused(below, "already used 0.005556 GPU-hours");
  v1::ExtendSweepRequest only_concurrency = req;
  only_concurrency.set_max_concurrent(4);
  refused(only_concurrency, "made all its 2 trial(s); give --trials too");
  EXPECT_TRUE(daemon_->sqlite().LoadSweeps()->at(0).budget_change.empty());
  // A canceled sweep cannot be extended.
  int64_t canceled = Submit(Spec(4, 1));
  controller().RunOnce();
  ASSERT_TRUE(controller().Cancel(Controller::AllowedForTest(), canceled).ok());
  RunUntilEnded();
  v1::ExtendSweepRequest more;
  more.set_sweep_id(canceled);
  more.set_add_trials(2);
  absl::StatusOr<v1::Sweep> s = controller().Extend(Controller::AllowedForTest(), more);
  EXPECT_TRUE(absl::IsFailedPrecondition(s.status())) << s.status();
  EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr("CANCELED"));
}

TEST_F(ControllerTest, EnqueuedConfigurationsRunFirstAndCountTowardTheBudget) {
  // Two from the file, concurrency 1: they are trials 0 and 1, then the sampler's.
  int64_t id = Submit(Spec(4, 1, "enqueue:\n  - {x: 0.25, k: b}\n  - {x: 0.5, k: a}\n"));
  controller().RunOnce();
  // A restart while they wait keeps the queue.
  ASSERT_TRUE(daemon_->Restart(/*crash=*/true).ok());
  RunUntilEnded();
  std::vector<v1::Trial> trials = Trials(id);
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[0].params().at("x").float_value(), 0.25);
  EXPECT_EQ(trials[0].params().at("k").string_value(), "b");
  EXPECT_EQ(trials[1].params().at("x").float_value(), 0.5);
  EXPECT_EQ(trials[0].origin(), "enqueued");
  EXPECT_EQ(trials[1].origin(), "enqueued");
  EXPECT_EQ(trials[2].origin(), "");
  // The sampler's first is the first a sweep without them proposes.
  int64_t plain = Submit(Spec(4, 1));
  RunUntilEnded();
  EXPECT_EQ(trials[2].params().at("x").float_value(),
            Trials(plain)[0].params().at("x").float_value());

  // hpo enqueue on the ended sweep: it reopens, with the limit raised for it.
  v1::EnqueueRequest req;
  req.set_sweep_id(id);
  (*req.add_points()->mutable_values())["x"] = "0.125";
  (*req.mutable_points(0)->mutable_values())["k"] = "a";
  absl::StatusOr<v1::Sweep> s = controller().Enqueue(Controller::AllowedForTest(), req);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->max_trials(), 5);
  EXPECT_THAT(s->message(), ::testing::HasSubstr("budget.max_trials raised to 5"));
  RunUntilEnded();
  trials = Trials(id);
  ASSERT_EQ(trials.size(), 5u);
  EXPECT_EQ(trials[4].params().at("x").float_value(), 0.125);
  EXPECT_EQ(trials[4].origin(), "enqueued");

  // A point outside the space is refused and changes nothing.
  v1::EnqueueRequest bad;
  bad.set_sweep_id(id);
  (*bad.add_points()->mutable_values())["x"] = "2";
  (*bad.mutable_points(0)->mutable_values())["k"] = "a";
  s = controller().Enqueue(Controller::AllowedForTest(), bad);
  ASSERT_TRUE(absl::IsInvalidArgument(s.status()));
  EXPECT_THAT(
      std::string(s.status().message()),
      ::testing::HasSubstr("configuration 1: x=2 is outside the space (x is a float in [0, 1])"));
  (*bad.mutable_points(0)->mutable_values())["x"] = "0.5";
  (*bad.mutable_points(0)->mutable_values())["k"] = "c";
  EXPECT_THAT(
      std::string(controller().Enqueue(Controller::AllowedForTest(), bad).status().message()),
      ::testing::HasSubstr("k=c is not one of its choices (a, b)"));
  bad.mutable_points(0)->mutable_values()->erase("k");
  EXPECT_THAT(
      std::string(controller().Enqueue(Controller::AllowedForTest(), bad).status().message()),
      ::testing::HasSubstr("no value for parameter 'k'"));
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->state(),
            v1::SWEEP_STATE_COMPLETED);
  EXPECT_EQ(Trials(id).size(), 5u);
}

TEST_F(ControllerTest, WarmStartFeedsTheSamplerWithTheCompatibleTrialsOfAnEarlierSweep) {
  script_ = [](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Seconds(2);
    return f;
  };
  int64_t old = Submit(Spec(8, 4));
  for (int i = 0; i < 30 && !controller().AllSweepsEnded(); ++i) {
    controller().RunOnce();
    for (const auto& t : Trials(old)) {
      if (t.state() == v1::TRIAL_STATE_RUNNING && !t.has_objective()) {
        ASSERT_TRUE(Report(t.id(), {{"loss", t.params().at("x").float_value()}}).ok());
      }
    }
    daemon_->clock().Advance(absl::Seconds(1));
  }
  ASSERT_EQ(Counts(old), (std::map<std::string, int>{{"COMPLETED", 8}}));
  int inside = 0;
  for (const auto& t : Trials(old)) inside += t.params().at("x").float_value() <= 0.5;
  ASSERT_GT(inside, 0);
  // A narrower x, the same k, and a new m with its default.
  auto spec = [&](const std::string& extra) {
    return absl::StrCat(
        "parameters: {x: {type: float, low: 0, high: 0.5}, k: [a, b], "
        "m: {type: int, low: 1, high: 4",
        extra, "}}\nobjective: {metric: loss, direction: minimize}\ncommand: [train]\n",
        "budget: {max_trials: 2, max_concurrent: 2}\nwarm_start: {sweep: ", old, "}\n");
  };
  int64_t id = Submit(spec(", default: 2"));
  std::vector<v1::Trial> trials = Trials(id);
  ASSERT_EQ(trials.size(), static_cast<size_t>(inside + 2));
  for (int i = 0; i < inside; ++i) {
    EXPECT_EQ(trials[i].origin(), "warm_start");
    EXPECT_EQ(trials[i].state(), v1::TRIAL_STATE_COMPLETED);
    EXPECT_EQ(trials[i].params().at("m").int_value(), 2);
    EXPECT_LE(trials[i].params().at("x").float_value(), 0.5);
    EXPECT_TRUE(trials[i].has_objective());
    EXPECT_THAT(trials[i].message(), ::testing::HasSubstr(absl::StrCat("from sweep ", old)));
  }
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->best_trial_id(), 0)
      << "not run here: not its best";
  RunUntilEnded();
  EXPECT_EQ(daemon_->simulated().launched().size(), 8u + 2u) << "only its own two ran";
  // They stay what they are across a restart.
  ASSERT_TRUE(daemon_->Restart(/*crash=*/true).ok());
  EXPECT_EQ(Trials(id)[0].origin(), "warm_start");
  EXPECT_EQ(Trials(id).size(), static_cast<size_t>(inside + 2));

  // Refused, with nothing stored: a new parameter without a default, nothing in common, another
  // objective.
  size_t sweeps = daemon_->sqlite().LoadSweeps()->size();
  auto refused = [&](const std::string& yaml, const std::string& says) {
    v1::SubmitSweepRequest req;
    req.set_spec_yaml(yaml);
    absl::StatusOr<v1::Sweep> s = controller().Submit(Controller::AllowedForTest(), req);
    EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
    EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr(says));
  };
  refused(spec(""), "parameter 'm' is new; give it a default:");
  refused(absl::StrCat("parameters: {z: [1, 2]}\nobjective: {metric: loss, direction: minimize}\n"
                       "command: t\nalgorithm: grid\nwarm_start: {sweep: ",
                       old, "}\n"),
          "no parameter in common (it has x, k; this sweep z)");
  refused(absl::StrCat("parameters: {x: [1, 2]}\nobjective: {metric: acc, direction: maximize}\n"
                       "command: t\nalgorithm: grid\nwarm_start: {sweep: ",
                       old, "}\n"),
          "it optimizes loss, this sweep acc in the other direction");
  refused(absl::StrCat("parameters: {x: [1, 2]}\nobjective: {metric: loss, direction: minimize}\n"
                       "command: t\nalgorithm: grid\nwarm_start: {sweep: 999}\n"),
          "there is no sweep 999");
  EXPECT_EQ(daemon_->sqlite().LoadSweeps()->size(), sweeps);
}

TEST_F(ControllerTest, InvalidSpecIsRefusedAndNothingStored) {
  v1::SubmitSweepRequest req;
  req.set_spec_yaml("parameters: {x: [1]}\nobjective: {metric: m, direction: up}\ncommand: t\n");
  req.set_source("bad.yaml");
  auto s = controller().Submit(Controller::AllowedForTest(), req);
  ASSERT_TRUE(absl::IsInvalidArgument(s.status()));
  EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr("bad.yaml:2:"));
  EXPECT_TRUE(daemon_->sqlite().LoadSweeps()->empty());
  // Resources that can never fit are refused at submit.
  req.set_spec_yaml(Spec(1, 1, "resources: {gpus: 8}\n"));
  s = controller().Submit(Controller::AllowedForTest(), req);
  ASSERT_TRUE(absl::IsInvalidArgument(s.status()));
  EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr("GPU"));
}

// A sweep runs with the defaults it was submitted under: a restart by a release whose defaults
// are newer changes nothing of it, and only sweeps submitted then take the new ones.
TEST_F(ControllerTest, ASweepKeepsTheDefaultsItWasSubmittedUnderAcrossARestartWithNewerOnes) {
  SpecDefaults older;  // version 1 as an older release had it
  older.algorithm = "random";
  older.early_stopping = "none";
  older.health.mode = Health::Mode::kNone;
  SpecDefaults newer;  // version 2: hpod chooses
  newer.version = 2;
  daemon_->set_spec_defaults({older});
  ASSERT_TRUE(daemon_->Restart(/*crash=*/false).ok());
  script_ = [](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Seconds(10);
    return f;
  };
  int64_t id = Submit(Spec(6, 2));
  controller().RunOnce();
  auto sweep = [&](int64_t sweep_id) {
    return *controller().GetSweep(server::Controller::AllowedForTest(), sweep_id);
  };
  EXPECT_EQ(sweep(id).algorithm(), "random");
  EXPECT_EQ(sweep(id).defaults_version(), 1);

  daemon_->set_spec_defaults({older, newer});
  ASSERT_TRUE(daemon_->Restart(/*crash=*/false).ok());
  v1::Sweep kept = sweep(id);
  EXPECT_EQ(kept.algorithm(), "random");
  EXPECT_EQ(kept.early_stopping(), "none");
  EXPECT_EQ(kept.defaults_version(), 1);
  EXPECT_EQ(kept.stored_warnings_size(), 0);
  int64_t later = Submit(Spec(6, 2));
  EXPECT_EQ(sweep(later).algorithm(), "auto");
  EXPECT_EQ(sweep(later).early_stopping(), "auto");
  EXPECT_EQ(sweep(later).defaults_version(), 2);
  RunUntilEnded();
  EXPECT_EQ(sweep(id).state(), v1::SWEEP_STATE_COMPLETED);
  EXPECT_EQ(Counts(id)["COMPLETED"], 6);

  // A release that does not know the version a sweep was submitted under does not guess.
  int64_t third = Submit(Spec(2, 1));
  daemon_->set_spec_defaults({older});
  ASSERT_TRUE(daemon_->Restart(/*crash=*/false).ok());
  EXPECT_EQ(sweep(third).state(), v1::SWEEP_STATE_FAILED);
  EXPECT_THAT(sweep(third).message(), ::testing::HasSubstr("defaults version 2"));
}

}  // namespace
}  // namespace hpo::server
