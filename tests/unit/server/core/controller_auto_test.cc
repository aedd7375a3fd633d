// `algorithm: auto` and `early_stopping: auto` through the controller, in virtual time
// (tests/fakes): what they chose shows in the sweep, its events hear of a change, and a
// restarted daemon rebuilds the same choice from the store.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/controller.h"
#include "tests/fakes/test_daemon.h"

namespace hpo::server {
namespace {

using backend::LaunchSpec;
using backend::SimulatedFate;
using ::testing::HasSubstr;

// No algorithm and no early stopping named: both auto. Each trial reports 9 steps (a second
// apart) and exits after 10 s.
const char* const kSweep =
    "parameters: {x: {type: float, low: 0, high: 1}}\n"
    "objective: {metric: loss, direction: minimize}\n"
    "command: [train, '--x={x}']\n"
    "budget: {max_trials: 24, max_concurrent: 2}\n";

class ControllerAutoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<fakes::TestDaemon>();
    daemon_->set_script([](const LaunchSpec&) {
      SimulatedFate f;
      f.run_time = absl::Milliseconds(9500);
      return f;
    });
  }
  Controller& controller() { return daemon_->controller(); }
  v1::Sweep Get(int64_t id) { return *controller().GetSweep(Controller::AllowedForTest(), id); }
  // Every running trial reports its next step (its value follows its x), for `seconds`.
  void Run(int64_t sweep, int seconds) {
    for (int s = 0; s < seconds; ++s) {
      for (const v1::Trial& t : daemon_->Trials(sweep)) {
        if (t.state() != v1::TRIAL_STATE_RUNNING) continue;
        int64_t step = ++steps_[t.id()];
        if (step > 9) continue;
        double x = t.params().at("x").float_value();
        v1::ReportRequest req;
        req.set_trial_id(t.id());
        req.set_step(step);
        (*req.mutable_metrics())["loss"] = x + 1.0 / static_cast<double>(step);
        (void)controller().Report(req, daemon_->TokenOf(t.id()));
      }
      daemon_->clock().Advance(absl::Seconds(1));
      controller().RunOnce();
    }
  }
  std::unique_ptr<fakes::TestDaemon> daemon_;
  std::map<int64_t, int64_t> steps_;
};

TEST_F(ControllerAutoTest, SaysWhatItChoseAndRebuildsTheChoiceAfterARestart) {
  absl::StatusOr<int64_t> id = daemon_->Submit(kSweep);
  ASSERT_TRUE(id.ok()) << id.status();
  controller().RunOnce();
  v1::Sweep sweep = Get(*id);
  EXPECT_EQ(sweep.algorithm(), "auto");
  EXPECT_EQ(sweep.early_stopping(), "auto");
  EXPECT_THAT(sweep.algorithm_choice(), HasSubstr("tpe: random draws until 10 trials"));
  EXPECT_THAT(sweep.algorithm_choice(), HasSubstr("chosen because TPE, multivariate"));
  EXPECT_THAT(sweep.early_stopping_choice(), HasSubstr("none yet"));

  Run(*id, 12);  // the first two trials complete at step 9
  sweep = Get(*id);
  EXPECT_THAT(sweep.early_stopping_choice(),
              HasSubstr("asha, rungs at steps 1, 3 of 9 (trial #0 (the first to complete) ran 9 "
                        "steps)"));
  EXPECT_THAT(sweep.early_stopping_choice(), HasSubstr("step 1: not measured yet"));
  Run(*id, 60);
  sweep = Get(*id);
  EXPECT_THAT(sweep.algorithm_choice(), HasSubstr("tpe: modelling the trials that reported"));
  EXPECT_THAT(sweep.early_stopping_choice(), HasSubstr("step 1: 1.00 over"));
  EXPECT_THAT(sweep.early_stopping_choice(), HasSubstr(", on"));

  // The sweep's events said so as it changed.
  absl::StatusOr<std::vector<EventRecord>> events = daemon_->sqlite().LoadEvents(*id, 0, 100000);
  ASSERT_TRUE(events.ok());
  std::set<std::string> told;
  for (const EventRecord& e : *events) {
    v1::Event event;
    ASSERT_TRUE(event.ParseFromString(e.payload));
    if (event.kind() == v1::EVENT_KIND_SWEEP_STATE) {
      told.insert(event.sweep().early_stopping_choice().substr(0, 20));
      told.insert(event.sweep().algorithm_choice().substr(0, 30));
    }
  }
  EXPECT_TRUE(told.count("none yet: it chooses")) << "before the first trial completed";
  EXPECT_TRUE(told.count("asha, rungs at steps")) << "after";
  EXPECT_TRUE(told.count("tpe: modelling the trials that")) << "once the model took over";

  // A restart replays the curves and the ended trials: the same choice, deciding alike.
  const v1::Sweep before = Get(*id);
  ASSERT_TRUE(daemon_->Restart(/*crash=*/true).ok());
  v1::Sweep after = Get(*id);
  EXPECT_EQ(after.algorithm_choice(), before.algorithm_choice());
  EXPECT_EQ(after.early_stopping_choice(), before.early_stopping_choice());
  Run(*id, 200);
  daemon_->RunUntilEnded();
  std::map<std::string, int> counts = daemon_->Counts(*id);
  EXPECT_GT(counts["STOPPED"], 0) << "its rungs stopped trials";
  EXPECT_GT(counts["COMPLETED"], 0);
}

}  // namespace
}  // namespace hpo::server
