// Every failure the controller handles, injected through the fakes of tests/fakes: the backend
// refusing a launch or a stop, or losing a trial at a restart (Adopt NOT_FOUND), and the store
// refusing a commit, and the way back from it. The sampler failing is in
// trial_lifecycle_test.cc.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hpo/v1/states.h"
#include "server/core/controller.h"
#include "tests/fakes/test_daemon.h"

namespace hpo::server {
namespace {

using backend::LaunchSpec;
using backend::SimulatedFate;
using fakes::FaultyBackend;
using fakes::FaultyStore;
using ::testing::HasSubstr;

constexpr char kSpec[] =
    "parameters: {x: {type: float, low: 0, high: 1}}\n"
    "objective: {metric: loss, direction: minimize}\n"
    "command: [train, '--x={x}']\n";

std::string Spec(int max_trials, int concurrent, const std::string& extra = "") {
  return absl::StrCat(kSpec, "budget: {max_trials: ", max_trials, ", max_concurrent: ", concurrent,
                      "}\n", extra);
}

class ControllerFaultsTest : public ::testing::Test {
 protected:
  ControllerFaultsTest() {
    fakes::TestDaemon::Options o;
    o.gpus = 2;
    o.slots = 8;
    daemon_ = std::make_unique<fakes::TestDaemon>(o);
    daemon_->set_script([](const LaunchSpec&) {
      SimulatedFate f;
      f.run_time = absl::Seconds(10);
      f.stop_after = absl::Seconds(1);
      return f;
    });
  }
  Controller& controller() { return daemon_->controller(); }
  int64_t Submit(const std::string& yaml) {
    auto id = daemon_->Submit(yaml);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }
  std::vector<v1::Trial> Trials(int64_t sweep) { return daemon_->Trials(sweep); }
  v1::ReportRequest ReportOf(int64_t trial, double loss, int64_t report_id) {
    v1::ReportRequest req;
    req.set_trial_id(trial);
    req.set_report_id(report_id);
    (*req.mutable_metrics())["loss"] = loss;
    return req;
  }
  // A report posted as the gRPC service posts it: the reply's status as its client sees it.
  absl::Status PostReport(const v1::ReportRequest& req) {
    absl::Status seen = absl::UnknownError("not answered");
    controller().Post([&]() -> Controller::Done {
      absl::StatusOr<v1::ReportResponse> r =
          controller().Report(req, daemon_->TokenOf(req.trial_id()));
      absl::Status s = r.status();
      return [&seen, s](const absl::Status& commit) { seen = s.ok() ? commit : s; };
    });
    controller().RunOnce();
    return seen;
  }
  std::unique_ptr<fakes::TestDaemon> daemon_;
};

TEST_F(ControllerFaultsTest,
       ALaunchTheConfigCausesFailsTheTrialAndOneTheInfrastructureCausesIsRetried) {
  daemon_->backend().Fail(FaultyBackend::Verb::kLaunch, absl::StatusCode::kInvalidArgument);
  int64_t id = Submit(Spec(3, 1));
  auto trials = Trials(id);
  ASSERT_EQ(trials.size(), 2u) << "the failed one's slot goes to the next";
  EXPECT_EQ(trials[0].state(), v1::TRIAL_STATE_FAILED);
  EXPECT_THAT(trials[0].message(), HasSubstr("could not launch: injected fault: Launch"));
  EXPECT_EQ(trials[1].state(), v1::TRIAL_STATE_LAUNCHING);

  daemon_->backend().Fail(FaultyBackend::Verb::kLaunch, absl::StatusCode::kUnavailable);
  daemon_->RunUntilEnded();
  trials = Trials(id);
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[1].state(), v1::TRIAL_STATE_COMPLETED);
  EXPECT_EQ(trials[2].state(), v1::TRIAL_STATE_LOST) << "not the configuration's fault";
  EXPECT_EQ(trials[3].retry_of(), trials[2].id());
  EXPECT_EQ(trials[3].state(), v1::TRIAL_STATE_COMPLETED);
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->state(),
            v1::SWEEP_STATE_COMPLETED);
  EXPECT_EQ(daemon_->backend().failed(), 2);
}

TEST_F(ControllerFaultsTest, AStopTheBackendRefusesLeavesTheTrialToEndOnItsOwn) {
  int64_t id = Submit(Spec(1, 1));
  daemon_->backend().Fail(FaultyBackend::Verb::kStop, absl::StatusCode::kUnavailable);
  ASSERT_TRUE(controller().Cancel(Controller::AllowedForTest(), id).ok());
  EXPECT_EQ(daemon_->simulated().Running(), 1) << "the stop was refused";
  daemon_->RunUntilEnded();
  EXPECT_EQ(Trials(id)[0].state(), v1::TRIAL_STATE_CANCELED);
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->state(),
            v1::SWEEP_STATE_CANCELED);
}

// The store refuses a commit (disk full): the batch's replies say UNAVAILABLE, hpod takes no
// new work while the store says it cannot write, and once a commit succeeds the kept writes are
// durable: the refused report is stored once, its client's retry is recognized, and the sweep
// goes on.
TEST_F(ControllerFaultsTest, ACommitFailureRefusesNewWorkUntilTheStoreRecovers) {
  int64_t id = Submit(Spec(3, 1));
  controller().RunOnce();
  int64_t trial = Trials(id)[0].id();
  ASSERT_TRUE(PostReport(ReportOf(trial, 0.5, 1)).ok());

  daemon_->store().Fail(FaultyStore::Call::kCommit, absl::StatusCode::kUnavailable);
  absl::Status refused = PostReport(ReportOf(trial, 0.4, 2));
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_TRUE(absl::IsUnavailable(daemon_->store().Health()));
  v1::SubmitSweepRequest req;
  req.set_spec_yaml(Spec(1, 1));
  absl::StatusOr<v1::Sweep> sweep = controller().Submit(Controller::AllowedForTest(), req);
  EXPECT_TRUE(absl::IsUnavailable(sweep.status()));
  EXPECT_THAT(std::string(sweep.status().message()), HasSubstr("cannot write its data"));
  // While unhealthy, reports are refused before anything is stored (the client retries).
  v1::ReportRequest third = ReportOf(trial, 0.3, 3);
  EXPECT_TRUE(absl::IsUnavailable(controller().Report(third, daemon_->TokenOf(trial)).status()));

  // The next commit goes through: the kept report is stored, and the client's retry of it
  // (same id) is answered as stored, not stored again.
  controller().RunOnce();
  EXPECT_TRUE(daemon_->store().Health().ok());
  ASSERT_TRUE(PostReport(ReportOf(trial, 0.4, 2)).ok());
  ASSERT_TRUE(PostReport(third).ok());
  EXPECT_EQ(daemon_->ReportRows(), 3);
  daemon_->RunUntilEnded();
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->state(),
            v1::SWEEP_STATE_COMPLETED);
  EXPECT_EQ(Trials(id).size(), 3u);
  EXPECT_EQ(Trials(id)[0].report_count(), 3);
}

// After a restart, the backend finds neither trial: the running one is LOST (and retried), the
// one that was only waiting to start waits again and runs. Two GPUs: the first trial takes one,
// the second asks for both and waits.
TEST_F(ControllerFaultsTest, AdoptNotFoundLosesARunningTrialAndRequeuesAPendingOne) {
  int64_t id = Submit(
      "parameters: {g: [1, 2]}\nobjective: {metric: loss, direction: minimize}\n"
      "command: [train]\nalgorithm: grid\nresources: {gpus: \"{g}\"}\n"
      "budget: {max_concurrent: 2}\n");
  auto before = Trials(id);
  ASSERT_EQ(before.size(), 2u);
  ASSERT_EQ(before[0].state(), v1::TRIAL_STATE_LAUNCHING);
  ASSERT_EQ(before[1].state(), v1::TRIAL_STATE_PENDING) << "it waits for both GPUs";
  controller().RunOnce();
  // The running trial's Adopt is refused; the pending one was never launched, so the simulated
  // backend does not know it either (NOT_FOUND of its own).
  daemon_->backend().Fail(FaultyBackend::Verb::kAdopt, absl::StatusCode::kNotFound);
  ASSERT_TRUE(daemon_->Restart(/*crash=*/true).ok());
  auto after = Trials(id);
  EXPECT_EQ(after[0].state(), v1::TRIAL_STATE_LOST);
  EXPECT_THAT(after[0].message(),
              HasSubstr("hpod restarted while the trial ran, and injected fault"));
  EXPECT_EQ(after[1].state(), v1::TRIAL_STATE_PENDING);
  daemon_->RunUntilEnded();
  auto trials = Trials(id);
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[1].state(), v1::TRIAL_STATE_COMPLETED);
  EXPECT_EQ(trials[2].retry_of(), trials[0].id());
  EXPECT_EQ(trials[2].state(), v1::TRIAL_STATE_COMPLETED);
  EXPECT_EQ(controller().GetSweep(server::Controller::AllowedForTest(), id)->state(),
            v1::SWEEP_STATE_COMPLETED);
}

// A daemon killed at any instant has recorded every decision it acted on. A trial told to stop
// (early stopping) when hpod died ends STOPPED after the restart, however it exits.
TEST_F(ControllerFaultsTest, AStopDecidedBeforeACrashStillEndsTheTrialStopped) {
  daemon_->set_script([](const LaunchSpec&) {
    SimulatedFate f;
    f.run_time = absl::Hours(1);
    f.stop_after = absl::Minutes(5);  // it ignores being told; only the signal ends it (143)
    return f;
  });
  int64_t id =
      Submit(Spec(2, 2, "early_stopping: {name: asha, min_resource: 1}\nstop_grace: 10s\n"));
  controller().RunOnce();
  auto trials = Trials(id);
  ASSERT_EQ(trials.size(), 2u);
  ASSERT_TRUE(PostReport(ReportOf(trials[0].id(), 0.1, 1)).ok());
  v1::ReportRequest losing = ReportOf(trials[1].id(), 0.9, 2);
  ASSERT_TRUE(PostReport(losing).ok());
  EXPECT_EQ(controller().Report(losing, daemon_->TokenOf(trials[1].id()))->action(),
            v1::ReportResponse::ACTION_STOP);

  ASSERT_TRUE(daemon_->Restart(/*crash=*/true).ok());  // the trials run on
  EXPECT_EQ(controller().Report(losing, daemon_->TokenOf(trials[1].id()))->action(),
            v1::ReportResponse::ACTION_STOP)
      << "a retry after the restart is still told to stop";
  for (int i = 0; i < 40; ++i) {  // the grace period again, then the signal, then its exit
    daemon_->clock().Advance(absl::Seconds(1));
    controller().RunOnce();
  }
  auto after = Trials(id);
  EXPECT_EQ(after[1].state(), v1::TRIAL_STATE_STOPPED) << after[1].message();
  EXPECT_EQ(after[1].exit_code(), 143);
  EXPECT_THAT(after[1].message(), HasSubstr("asha"));
  EXPECT_EQ(after[0].state(), v1::TRIAL_STATE_RUNNING);
}

// A launch decided and recorded (LAUNCHING) but never carried out — hpod died between the
// commit and the launch — runs once after the restart: neither lost nor launched twice.
TEST_F(ControllerFaultsTest, ALaunchRecordedButNotCarriedOutRunsOnceAfterARestart) {
  int64_t id = Submit(Spec(2, 2));
  for (const auto& t : Trials(id)) ASSERT_EQ(t.state(), v1::TRIAL_STATE_LAUNCHING);
  // The trials never started: a fresh backend knows nothing of them.
  ASSERT_TRUE(daemon_->Restart(/*crash=*/true, /*lose_trials=*/true).ok());
  for (const auto& t : Trials(id)) EXPECT_EQ(t.state(), v1::TRIAL_STATE_PENDING);
  daemon_->RunUntilEnded();
  EXPECT_EQ(daemon_->Counts(id), (std::map<std::string, int>{{"COMPLETED", 2}}));
  EXPECT_EQ(daemon_->simulated().launched().size(), 2u) << "each launched once";
}

TEST_F(ControllerFaultsTest, ASweepWhoseSubmitNeverAnsweredIsGoneAfterARestart) {
  daemon_->backend().HoldVet();  // slurmctld has not answered the sweep's first allocation yet
  v1::SubmitSweepRequest req;
  req.set_spec_yaml(Spec(4, 2));
  req.set_source("t.yaml");
  req.set_base_dir(daemon_->root());
  std::optional<absl::StatusOr<v1::Sweep>> answer;
  // The submit as the gRPC service makes it: its answer comes once the backend vetted it.
  auto submit = [&] {
    answer.reset();
    controller().Post([&]() -> Controller::Done {
      return controller().Submit(Controller::AllowedForTest(), req,
                                 [&answer](absl::StatusOr<v1::Sweep> r) -> Controller::Done {
                                   answer = std::move(r);
                                   return nullptr;
                                 });
    });
    controller().RunOnce();
  };
  submit();
  ASSERT_FALSE(answer.has_value());
  ASSERT_EQ(daemon_->sqlite().LoadSweeps()->size(), 1u) << "stored before the backend is asked";
  // hpod dies before the answer: the submit never answered, so the sweep is not kept.
  ASSERT_TRUE(daemon_->Restart(/*crash=*/true).ok());
  EXPECT_TRUE(daemon_->sqlite().LoadSweeps()->empty());
  EXPECT_TRUE(controller().ListSweeps(Controller::AllowedForTest(), false)->empty());

  // Answered, the same submit runs as ever.
  daemon_->backend().HoldVet();
  submit();
  daemon_->backend().ReleaseVet(absl::OkStatus());
  controller().RunOnce();
  ASSERT_TRUE(answer.has_value() && answer->ok());
  ASSERT_TRUE(daemon_->Restart(/*crash=*/true).ok());
  EXPECT_EQ(controller().GetSweep(Controller::AllowedForTest(), (*answer)->id())->state(),
            v1::SWEEP_STATE_RUNNING);
}

}  // namespace
}  // namespace hpo::server
