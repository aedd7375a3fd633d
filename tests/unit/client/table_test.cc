#include "client/table.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hpo::client {
namespace {

using ::testing::HasSubstr;

v1::Trial MakeTrial(int64_t id, v1::TrialState state, double objective, std::string act) {
  v1::Trial t;
  t.set_id(id);
  t.set_number(id - 1);
  t.set_state(state);
  (*t.mutable_params())["lr"].set_float_value(0.01 * id);
  (*t.mutable_params())["act"].set_string_value(act);
  (*t.mutable_params())["a_very_long_parameter_name_that_does_not_fit"].set_int_value(id);
  t.set_step(5);
  t.set_has_objective(true);
  t.set_objective(objective);
  (*t.mutable_last_metrics())["acc"] = objective;
  return t;
}

TEST(Table, RendersAndFitsTheWidth) {
  v1::Sweep sweep;
  sweep.set_objective_metric("acc");
  sweep.set_direction(v1::DIRECTION_MAXIMIZE);
  std::vector<v1::Trial> trials = {MakeTrial(1, v1::TRIAL_STATE_COMPLETED, 0.9, "relu"),
                                   MakeTrial(2, v1::TRIAL_STATE_RUNNING, 0.5, "tanh")};
  std::string full = TrialTable(sweep, trials, {});
  EXPECT_THAT(full, HasSubstr("a_very_long_parameter_name_that_does_not_fit"));
  EXPECT_THAT(full, HasSubstr("COMPLETED"));
  TableOptions narrow;
  narrow.max_width = 60;
  narrow.max_rows = 2;
  std::string fit = TrialTable(sweep, trials, narrow);
  EXPECT_THAT(fit, HasSubstr("column(s) hidden"));
  EXPECT_THAT(fit, HasSubstr("1 more trial(s) not shown"));
  std::string header = SweepHeader(sweep, trials);
  EXPECT_THAT(header, HasSubstr("COMPLETED 1"));
  EXPECT_THAT(header, HasSubstr("RUNNING 1"));
  EXPECT_THAT(header, HasSubstr("best acc 0.9 (trial 1"));
}

TEST(Table, CsvQuotesAndJsonParses) {
  std::vector<v1::Trial> trials = {MakeTrial(1, v1::TRIAL_STATE_FAILED, 0.1, "a,\"b\"")};
  trials[0].set_backend_id("local:pid=42");
  std::string csv = TrialsCsv(trials);
  EXPECT_THAT(csv, HasSubstr("param.act"));
  EXPECT_THAT(csv, HasSubstr("\"a,\"\"b\"\"\""));
  EXPECT_THAT(csv, HasSubstr("local:pid=42"));
  v1::Sweep sweep;
  std::string json = TrialsJson(sweep, trials);
  EXPECT_THAT(json, HasSubstr("\"backend_id\": \"local:pid=42\""));
  EXPECT_THAT(json, HasSubstr("\"state\": \"FAILED\""));
}

}  // namespace
}  // namespace hpo::client
