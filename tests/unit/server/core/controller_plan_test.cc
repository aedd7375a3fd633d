// The controller's plans (hpo plan): a pilot sweep, budget.max_trial_steps, and a plan that
// learns a step's time from an earlier sweep's reports, in virtual time (tests/fakes).
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/controller.h"
#include "server/core/estimate.h"
#include "tests/fakes/test_daemon.h"

namespace hpo::server {
namespace {

using backend::LaunchSpec;
using backend::SimulatedFate;
using ::testing::HasSubstr;

// Ten trials of 20 steps, two at a time, on nodes of their own (node-hours count them).
const char* const kSweep =
    "name: big\n"
    "parameters: {x: {type: float, low: 0, high: 1}}\n"
    "objective: {metric: loss, direction: minimize}\n"
    "command: [train, '--x={x}']\n"
    "algorithm: tpe\n"
    "early_stopping: none\n"
    "budget: {max_trials: 10, max_concurrent: 2}\n"
    "plan: {steps: 20}\n";

class ControllerPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<fakes::TestDaemon>();
    daemon_->set_script([](const LaunchSpec&) {
      SimulatedFate f;
      f.run_time = absl::Hours(1);  // runs until it is stopped
      return f;
    });
  }
  Controller& controller() { return daemon_->controller(); }
  absl::StatusOr<v1::Sweep> SubmitPilot(const std::string& yaml, int64_t trials, int64_t steps,
                                        int64_t full = 0) {
    v1::SubmitSweepRequest req;
    req.set_spec_yaml(yaml);
    req.set_source("big.yaml");
    req.set_base_dir(daemon_->root());
    req.set_pilot_trials(trials);
    req.set_pilot_steps(steps);
    req.set_pilot_full_trials(full);
    return controller().Submit(Controller::AllowedForTest(), req);
  }
  v1::PlanSweepRequest PlanOf(const std::string& yaml) {
    v1::PlanSweepRequest req;
    req.set_spec_yaml(yaml);
    req.set_source("big.yaml");
    req.set_base_dir(daemon_->root());
    return req;
  }
  absl::StatusOr<v1::ReportResponse> Report(int64_t trial_id, int64_t step, double loss) {
    v1::ReportRequest req;
    req.set_trial_id(trial_id);
    req.set_step(step);
    (*req.mutable_metrics())["loss"] = loss;
    return controller().Report(req, daemon_->TokenOf(trial_id));
  }
  std::unique_ptr<fakes::TestDaemon> daemon_;
};

TEST_F(ControllerPlanTest, APilotRunsAFewStepsAndThePlanLearnsAStepWithoutTheStartup) {
  absl::StatusOr<v1::Sweep> pilot = SubmitPilot(kSweep, 2, 4);
  ASSERT_TRUE(pilot.ok()) << pilot.status();
  EXPECT_EQ(pilot->name(), "big-pilot");
  EXPECT_EQ(pilot->max_trials(), 2);
  EXPECT_EQ(pilot->algorithm(), "random");
  EXPECT_THAT(controller().GetSweep(Controller::AllowedForTest(), pilot->id())->spec_yaml(),
              HasSubstr("steps: 4"));
  controller().RunOnce();
  std::vector<v1::Trial> trials = daemon_->Trials(pilot->id());
  ASSERT_EQ(trials.size(), 2u);
  // Each trainer takes 10 s to start, then 2 s a step; the fourth report stops it.
  daemon_->clock().Advance(absl::Seconds(10));
  for (int64_t step = 1; step <= 4; ++step) {
    daemon_->clock().Advance(absl::Seconds(2));
    for (const v1::Trial& t : trials) {
      absl::StatusOr<v1::ReportResponse> r = Report(t.id(), step, 1.0 / static_cast<double>(step));
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->action(),
                step < 4 ? v1::ReportResponse::ACTION_CONTINUE : v1::ReportResponse::ACTION_STOP);
      if (step == 4) {
        EXPECT_THAT(r->reason(), HasSubstr("a short trial of the pilot: stopped at step 4"));
      }
    }
    controller().RunOnce();
  }
  daemon_->RunUntilEnded();
  EXPECT_EQ(daemon_->Counts(pilot->id()), (std::map<std::string, int>{{"STOPPED", 2}}));

  // The pilot is what is stored: a restart plans it again as the pilot, not as the sweep.
  ASSERT_TRUE(daemon_->Restart(/*crash=*/false).ok());
  EXPECT_EQ(controller().GetSweep(Controller::AllowedForTest(), pilot->id())->max_trials(), 2);

  v1::PlanSweepRequest req;
  req.set_spec_yaml(kSweep);
  req.set_source("big.yaml");
  req.set_base_dir(daemon_->root());
  req.set_like_sweep(pilot->id());
  absl::StatusOr<v1::PlanSweepResponse> plan = controller().Plan(Controller::AllowedForTest(), req);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->errors_size(), 0) << plan->errors(0);
  const v1::SweepEstimate& e = plan->estimate();
  EXPECT_THAT(e.basis(), HasSubstr("20 step(s) a trial (the file's plan.steps)"));
  EXPECT_THAT(e.basis(),
              HasSubstr("2s a step, 10s to start (sweep 1's 2 finished trial(s), on average)"));
  // Five rounds of two trials, each 10 s to start and 20 steps of 2 s.
  EXPECT_NEAR(e.wall_seconds().expected(), 5 * (10 + 20 * 2), 1e-6);
  EXPECT_NEAR(e.node_hours().expected(), 10 * (10 + 20 * 2) / 3600.0, 1e-9);
}

// A plan's simulation runs off the controller's thread (its answer comes in a later batch), and
// each user may have two plans being computed at once.
TEST_F(ControllerPlanTest, APlanIsComputedOffTheControllersThreadTwoAtOnceForAUser) {
  v1::PlanSweepRequest req;
  req.set_spec_yaml(kSweep);
  req.set_source("big.yaml");
  req.set_base_dir(daemon_->root());
  auto got = std::make_shared<std::optional<absl::StatusOr<v1::PlanSweepResponse>>>();
  Controller::Done done =
      controller().Plan(Controller::AllowedForTest(), req,
                        [got](absl::StatusOr<v1::PlanSweepResponse> r) -> Controller::Done {
                          *got = std::move(r);
                          return nullptr;
                        });
  EXPECT_EQ(done, nullptr);
  EXPECT_FALSE(got->has_value()) << "answered on the controller's thread, within its batch";
  for (int i = 0; i < 1000 && !got->has_value(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    controller().RunOnce();
  }
  ASSERT_TRUE(got->has_value()) << "no answer within 10 s";
  ASSERT_TRUE((*got)->ok()) << (*got)->status();
  const v1::PlanSweepResponse& plan = ***got;
  ASSERT_EQ(plan.errors_size(), 0) << plan.errors(0);
  EXPECT_EQ(plan.estimate().trials().expected(), 10);

  absl::StatusOr<Slots::Held> one = controller().plan_slots().Take("");
  absl::StatusOr<Slots::Held> two = controller().plan_slots().Take("");
  ASSERT_TRUE(one.ok() && two.ok());
  absl::StatusOr<v1::PlanSweepResponse> third =
      controller().Plan(Controller::AllowedForTest(), req);
  ASSERT_TRUE(absl::IsResourceExhausted(third.status())) << third.status();
  EXPECT_THAT(third.status().message(), HasSubstr("2 plans being computed, the most one user"));
  one->reset();
  EXPECT_TRUE(controller().Plan(Controller::AllowedForTest(), req).ok());
}

// A file that does not say how long its trials are: the pilot's check says so (and nothing
// else), its first trial runs to its end while the short one stops at step 4, and the plan
// learns the length from the trial that completed.
TEST_F(ControllerPlanTest, APilotRunsATrialToItsEndWhereTheLengthIsNotKnown) {
  std::string bare = kSweep;
  bare.erase(bare.find("plan: {steps: 20}\n"));
  v1::PlanSweepRequest check = PlanOf(bare);
  absl::StatusOr<v1::PlanSweepResponse> plain =
      controller().Plan(Controller::AllowedForTest(), check);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_EQ(plain->errors_size(), 1);
  EXPECT_THAT(plain->errors(0), HasSubstr("let hpo plan --pilot run a trial to its end"));
  check.set_pilot(true);
  absl::StatusOr<v1::PlanSweepResponse> checked =
      controller().Plan(Controller::AllowedForTest(), check);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->errors_size(), 0);
  EXPECT_TRUE(checked->length_unknown());
  EXPECT_FALSE(checked->has_estimate());
  check.set_spec_yaml(kSweep);
  EXPECT_FALSE(controller().Plan(Controller::AllowedForTest(), check)->length_unknown());
  // The file's errors are still errors.
  std::string unbounded = bare;
  unbounded.replace(unbounded.find("max_trials: 10, "), 16, "");
  check.set_spec_yaml(unbounded);
  absl::StatusOr<v1::PlanSweepResponse> refused =
      controller().Plan(Controller::AllowedForTest(), check);
  ASSERT_EQ(refused->errors_size(), 1);
  EXPECT_THAT(refused->errors(0), HasSubstr("never runs out of trials"));

  // Trial 1 (the full one) ends by itself after 12 steps; the short one runs until stopped.
  daemon_->set_script([](const LaunchSpec& spec) {
    SimulatedFate f;
    f.run_time = spec.trial_id == 1 ? absl::Seconds(10 + 12 * 2 + 1) : absl::Hours(1);
    return f;
  });
  absl::StatusOr<v1::Sweep> pilot = SubmitPilot(bare, 1, 4, 1);
  ASSERT_TRUE(pilot.ok()) << pilot.status();
  EXPECT_EQ(pilot->max_trials(), 2);
  controller().RunOnce();
  std::vector<v1::Trial> trials = daemon_->Trials(pilot->id());
  ASSERT_EQ(trials.size(), 2u);
  ASSERT_EQ(trials[0].id(), 1);
  daemon_->clock().Advance(absl::Seconds(10));
  for (int64_t step = 1; step <= 12; ++step) {
    daemon_->clock().Advance(absl::Seconds(2));
    for (const v1::Trial& t : trials) {
      if (t.id() != 1 && step > 4) continue;
      absl::StatusOr<v1::ReportResponse> r = Report(t.id(), step, 1.0 / static_cast<double>(step));
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->action(), t.id() != 1 && step == 4 ? v1::ReportResponse::ACTION_STOP
                                                      : v1::ReportResponse::ACTION_CONTINUE)
          << "trial " << t.id() << " step " << step;
    }
    controller().RunOnce();
  }
  daemon_->RunUntilEnded();
  EXPECT_EQ(daemon_->Counts(pilot->id()),
            (std::map<std::string, int>{{"COMPLETED", 1}, {"STOPPED", 1}}));

  v1::PlanSweepRequest req = PlanOf(bare);
  req.set_like_sweep(pilot->id());
  absl::StatusOr<v1::PlanSweepResponse> plan = controller().Plan(Controller::AllowedForTest(), req);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->errors_size(), 0) << plan->errors(0);
  EXPECT_THAT(plan->estimate().basis(),
              HasSubstr("12 step(s) a trial (sweep 1's completed trials), 2s a step"));
  EXPECT_EQ(plan->estimate().steps().expected(), 10 * 12);
}

// A trial stopped at its sweep's budget.max_trial_steps ran its whole length: a later plan
// learns that length from it.
TEST(EstimateInputs, ATrialStoppedAtTheStepCapRanItsLength) {
  TrialRecord stopped, early, completed;
  for (TrialRecord* t : {&stopped, &early, &completed}) {
    t->started_at = absl::FromUnixSeconds(100);
    t->ended_at = absl::FromUnixSeconds(200);
  }
  stopped.id = 1, stopped.state = v1::TRIAL_STATE_STOPPED, stopped.step = 30;
  early.id = 2, early.state = v1::TRIAL_STATE_STOPPED, early.step = 3;
  completed.id = 3, completed.state = v1::TRIAL_STATE_COMPLETED, completed.step = 30;
  EXPECT_EQ(InputsFromTrials({&stopped, &early}, {}, 30).steps, 30);
  EXPECT_EQ(InputsFromTrials({&stopped, &early}, {}).steps, 0);
  EXPECT_EQ(InputsFromTrials({&stopped, &early, &completed}, {}).steps, 30);
  EXPECT_EQ(InputsFromTrials({&stopped, &early}, {}, 30).step_seconds.size(), 2u);
}

TEST_F(ControllerPlanTest, APilotThatCannotRunIsRefusedAndNothingIsStored) {
  EXPECT_THAT(std::string(SubmitPilot(kSweep, 0, 4).status().message()),
              HasSubstr("1 to 64 trials"));
  EXPECT_THAT(std::string(SubmitPilot(kSweep, 2, 1).status().message()), HasSubstr("at least 2"));
  std::string external = absl::StrCat(kSweep, "backend: external\n");
  EXPECT_THAT(std::string(SubmitPilot(external, 2, 4).status().message()),
              HasSubstr("an external sweep's trials are launched elsewhere"));
  // The file's own errors come first, named as the file's.
  EXPECT_THAT(std::string(SubmitPilot("name: x\n", 2, 4).status().message()),
              HasSubstr("big.yaml"));
  EXPECT_TRUE(controller().ListSweeps(Controller::AllowedForTest(), false)->empty());
}

}  // namespace
}  // namespace hpo::server
