#include <set>

#include "algorithms/grid_sampler.h"
#include "algorithms/random_sampler.h"
#include "gtest/gtest.h"

namespace hpo::algorithms {
namespace {

SearchSpace MixedSpace() {
  SearchSpace s;
  ParamDef lr{"lr", ParamType::kFloat, 1e-4, 1e-1, true, std::nullopt, {}, {}, std::nullopt};
  ParamDef units{"units", ParamType::kInt, 16, 256, false, 16.0, {}, {}, std::nullopt};
  ParamDef act{"act",
               ParamType::kCategorical,
               0,
               0,
               false,
               std::nullopt,
               {std::string("relu"), std::string("tanh"), true},
               {},
               std::nullopt};
  ParamDef epochs{"epochs", ParamType::kFixed, 0,           0, false, std::nullopt,
                  {},       int64_t{10},       std::nullopt};
  ParamDef drop{"drop", ParamType::kFloat, 0.0, 0.5, false, 0.1, {}, {}, std::nullopt};
  s.params = {lr, units, act, epochs, drop};
  return s;
}

absl::StatusOr<std::optional<Params>> Suggest(const Sampler& sampler, const SearchSpace& space,
                                              int64_t n, uint64_t seed) {
  std::vector<HistoryEntry> history;
  SuggestRequest req{&space, &history, n, seed, Direction::kMinimize};
  return sampler.Suggest(req);
}

TEST(SearchSpace, ValidateNamesTheParameter) {
  SearchSpace s = MixedSpace();
  EXPECT_TRUE(s.Validate().ok());
  s.params[0].low = -1;  // log with low <= 0
  absl::Status st = s.Validate();
  EXPECT_TRUE(absl::IsInvalidArgument(st));
  EXPECT_NE(st.message().find("'lr'"), std::string::npos);
  SearchSpace dup = MixedSpace();
  dup.params.push_back(dup.params[0]);
  EXPECT_FALSE(dup.Validate().ok());
}

TEST(RandomSampler, SameSeedSameSuggestionsAlwaysInSpace) {
  SearchSpace space = MixedSpace();
  RandomSampler sampler;
  std::set<std::string> distinct_acts;
  for (int64_t n = 0; n < 500; ++n) {
    auto a = Suggest(sampler, space, n, 42);
    auto b = Suggest(sampler, space, n, 42);
    ASSERT_TRUE(a.ok() && a->has_value());
    EXPECT_EQ(**a, **b);
    EXPECT_TRUE(space.Contains(**a)) << n;
    const Params& p = **a;
    EXPECT_TRUE(std::holds_alternative<double>(p.at("lr")));
    EXPECT_TRUE(std::holds_alternative<int64_t>(p.at("units")));
    EXPECT_EQ(std::get<int64_t>(p.at("units")) % 16, 0);
    EXPECT_EQ(std::get<int64_t>(p.at("epochs")), 10);
    double drop = std::get<double>(p.at("drop"));
    EXPECT_NEAR(drop * 10, std::round(drop * 10), 1e-9);
    distinct_acts.insert(FormatValue(p.at("act")));
  }
  EXPECT_EQ(distinct_acts.size(), 3u);
  EXPECT_NE(**Suggest(sampler, space, 0, 42), **Suggest(sampler, space, 0, 43));
}

TEST(RandomSampler, LogScaleCoversDecades) {
  SearchSpace space = MixedSpace();
  RandomSampler sampler;
  int below_1e3 = 0;
  for (int64_t n = 0; n < 1000; ++n) {
    if (std::get<double>((**Suggest(sampler, space, n, 7)).at("lr")) < 1e-3) ++below_1e3;
  }
  // Log-uniform over 3 decades puts about a third below 1e-3 (uniform would put 1%).
  EXPECT_GT(below_1e3, 250);
  EXPECT_LT(below_1e3, 420);
}

TEST(GridSampler, EnumeratesTheProductThenEnds) {
  SearchSpace s;
  s.params.push_back(
      {"lr", ParamType::kFloat, 0.001, 0.1, true, std::nullopt, {}, {}, std::nullopt});
  s.params.push_back({"act",
                      ParamType::kCategorical,
                      0,
                      0,
                      false,
                      std::nullopt,
                      {std::string("a"), std::string("b")},
                      {},
                      std::nullopt});
  s.params.push_back({"layers", ParamType::kInt, 1, 3, false, std::nullopt, {}, {}, std::nullopt});
  GridSampler grid(s, 3, false);
  ASSERT_EQ(*grid.MaxTrials(s), 3 * 2 * 3);
  std::set<std::string> seen;
  for (int64_t n = 0; n < 18; ++n) {
    auto p = Suggest(grid, s, n, 0);
    ASSERT_TRUE(p.ok() && p->has_value());
    EXPECT_TRUE(s.Contains(**p));
    std::string key;
    for (const auto& [k, v] : **p) key += k + "=" + FormatValue(v) + ";";
    seen.insert(key);
  }
  EXPECT_EQ(seen.size(), 18u);
  EXPECT_FALSE(Suggest(grid, s, 18, 0)->has_value());
  // Log spacing: 0.001, 0.01, 0.1.
  EXPECT_NEAR(std::get<double>(grid.axes()[0][1]), 0.01, 1e-12);
}

TEST(GridSampler, ShuffleIsAPermutation) {
  SearchSpace s;
  s.params.push_back({"x", ParamType::kInt, 0, 99, false, std::nullopt, {}, {}, std::nullopt});
  GridSampler grid(s, 100, true);
  std::set<int64_t> seen;
  for (int64_t n = 0; n < 100; ++n)
    seen.insert(std::get<int64_t>((**Suggest(grid, s, n, 5)).at("x")));
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_NE(std::get<int64_t>((**Suggest(grid, s, 0, 5)).at("x")), 0);
}

TEST(MakeSampler, UnknownNameListsKnownOnes) {
  AlgorithmSpec spec;
  spec.name = "bayes";
  auto s = MakeSampler(spec, MixedSpace());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("random"), std::string::npos);
}

}  // namespace
}  // namespace hpo::algorithms
