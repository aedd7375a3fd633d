// What the dashboard's charts get from a large sweep (server/web/dashboard_data.h): past their
// limit, the objective chart keeps every trial that improved the running best and the parallel
// coordinates keep the best half, each with an even spread of the others, and both say how many
// there were in all.
#include "server/web/dashboard_data.h"

#include <algorithm>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fakes/test_daemon.h"

namespace hpo::server {
namespace {

using ::testing::ElementsAre;

TEST(DashboardThinTest, KeepsWhatItMustAndSpreadsTheRest) {
  EXPECT_THAT(DashboardData::Thin(5, 10, {}), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(DashboardData::Thin(10, 4, {9}), ElementsAre(0, 3, 6, 9));
  EXPECT_THAT(DashboardData::Thin(10, 5, {}), ElementsAre(0, 2, 4, 6, 8));
  EXPECT_THAT(DashboardData::Thin(10, 4, {5, 5, 1}), ElementsAre(0, 1, 5, 6));
  // What must be kept is kept even past the limit.
  EXPECT_THAT(DashboardData::Thin(10, 2, {3, 1, 2}), ElementsAre(1, 2, 3));
}

class DashboardDataTest : public ::testing::Test {
 protected:
  // 120 trials of x in [0, 1], each reporting loss = (x - 0.3)^2 once and completing.
  int64_t RunSweep() {
    auto id = daemon_.Submit(
        "parameters: {x: {type: float, low: 0, high: 1}}\n"
        "objective: {metric: loss, direction: minimize}\ncommand: [train, '--x={x}']\n"
        "budget: {max_trials: 120, max_concurrent: 8}\nseed: 3\n");
    EXPECT_TRUE(id.ok()) << id.status();
    for (int i = 0; i < 1000 && !daemon_.controller().AllSweepsEnded(); ++i) {
      daemon_.controller().RunOnce();
      for (const v1::Trial& t : daemon_.Trials(*id)) {
        if (t.state() != v1::TRIAL_STATE_RUNNING || t.step() >= 1) continue;
        const double x = t.params().at("x").float_value();
        v1::ReportRequest req;
        req.set_trial_id(t.id());
        req.set_step(1);
        (*req.mutable_metrics())["loss"] = (x - 0.3) * (x - 0.3);
        EXPECT_TRUE(daemon_.controller().Report(req, daemon_.TokenOf(t.id())).ok());
      }
      daemon_.clock().Advance(absl::Seconds(1));
    }
    EXPECT_TRUE(daemon_.controller().AllSweepsEnded());
    return *id;
  }
  fakes::TestDaemon daemon_;
};

TEST_F(DashboardDataTest, TheObjectiveChartKeepsEveryNewBestPastItsLimit) {
  const int64_t id = RunSweep();
  absl::StatusOr<nlohmann::json> all =
      DashboardData(daemon_.controller().Read(server::Controller::AllowedForTest()).value())
          .Objective(id, 2000);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ((*all)["total"], 120);
  ASSERT_EQ((*all)["points"].size(), 120u);
  double lowest = 1e9;
  for (const auto& p : (*all)["points"]) lowest = std::min(lowest, p[1].get<double>());

  absl::StatusOr<nlohmann::json> few =
      DashboardData(daemon_.controller().Read(server::Controller::AllowedForTest()).value())
          .Objective(id, 30);
  ASSERT_TRUE(few.ok()) << few.status();
  EXPECT_EQ((*few)["total"], 120);
  const nlohmann::json& points = (*few)["points"];
  const nlohmann::json& best = (*few)["best"];
  EXPECT_EQ(best, (*all)["best"]);  // the running best is drawn from every trial
  EXPECT_EQ(best.back()[1].get<double>(), lowest);
  EXPECT_LE(points.size(), std::max<size_t>(30, best.size()));
  EXPECT_GE(points.size(), 30u);
  std::set<int64_t> numbers;
  int64_t last = -1;
  for (const auto& p : points) {
    EXPECT_GT(p[0].get<int64_t>(), last);  // still by trial number
    last = p[0].get<int64_t>();
    numbers.insert(last);
  }
  for (size_t i = 0; i + 1 < best.size(); ++i) {
    EXPECT_TRUE(numbers.count(best[i][0].get<int64_t>())) << "new best at " << best[i][0];
  }
  // Spread over the sweep, not only its start.
  EXPECT_GT(points.back()[0].get<int64_t>(), 100);
}

TEST_F(DashboardDataTest, TheParallelCoordinatesKeepTheBestHalfPastTheirLimit) {
  const int64_t id = RunSweep();
  absl::StatusOr<nlohmann::json> all =
      DashboardData(daemon_.controller().Read(server::Controller::AllowedForTest()).value())
          .Parallel(id, 1000);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ((*all)["trials"].size(), 120u);
  std::vector<double> losses;
  for (const auto& t : (*all)["trials"]) losses.push_back(t[1].get<double>());
  std::sort(losses.begin(), losses.end());

  absl::StatusOr<nlohmann::json> few =
      DashboardData(daemon_.controller().Read(server::Controller::AllowedForTest()).value())
          .Parallel(id, 30);
  ASSERT_TRUE(few.ok()) << few.status();
  EXPECT_EQ((*few)["total"], 120);
  ASSERT_EQ((*few)["trials"].size(), 30u);
  std::multiset<double> shown;
  for (const auto& t : (*few)["trials"]) shown.insert(t[1].get<double>());
  for (size_t i = 0; i < 15; ++i) EXPECT_TRUE(shown.count(losses[i])) << "best #" << i;
  EXPECT_EQ((*few)["axes"], (*all)["axes"]);
}

TEST_F(DashboardDataTest, AnUnknownSweepIsNotFound) {
  EXPECT_EQ(DashboardData(daemon_.controller().Read(server::Controller::AllowedForTest()).value())
                .Objective(99, 10)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(DashboardData(daemon_.controller().Read(server::Controller::AllowedForTest()).value())
                .Parallel(99, 10)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace hpo::server
