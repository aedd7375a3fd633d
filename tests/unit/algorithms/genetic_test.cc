// GeneticSampler: determinism, bounds and types under mutation, demes, elites, and search that
// beats random on Hartmann-6 and Branin over 10 seeds.
#include <set>

#include "algorithms/genetic_sampler.h"
#include "algorithms/random_sampler.h"
#include "gtest/gtest.h"
#include "tests/unit/algorithms/test_functions.h"

namespace hpo::algorithms {
namespace {

using namespace ::hpo::algorithms::testing;  // NOLINT

SearchSpace Mixed() {
  SearchSpace s;
  s.params.push_back(
      {"lr", ParamType::kFloat, 1e-5, 1e-1, true, std::nullopt, {}, {}, std::nullopt});
  s.params.push_back({"units", ParamType::kInt, 8, 512, false, 8.0, {}, {}, std::nullopt});
  s.params.push_back({"layers", ParamType::kInt, 1, 6, false, std::nullopt, {}, {}, std::nullopt});
  s.params.push_back(
      {"batch", ParamType::kInt, 16, 1024, true, std::nullopt, {}, {}, std::nullopt});
  s.params.push_back({"dropout", ParamType::kFloat, 0, 0.5, false, 0.05, {}, {}, std::nullopt});
  s.params.push_back({"act",
                      ParamType::kCategorical,
                      0,
                      0,
                      false,
                      std::nullopt,
                      {std::string("relu"), std::string("gelu"), std::string("tanh")},
                      {},
                      std::nullopt});
  s.params.push_back(
      {"epochs", ParamType::kFixed, 0, 0, false, std::nullopt, {}, int64_t{10}, std::nullopt});
  return s;
}

// Runs `n` trials `concurrent` at a time (a trial finishes `concurrent` suggestions after it
// started), with objective f; returns every suggestion.
std::vector<Params> Drive(const Sampler& sampler, const SearchSpace& space,
                          const std::function<double(const Params&)>& f, int n, uint64_t seed,
                          int concurrent = 4, bool column = false) {
  std::vector<HistoryEntry> history;
  std::vector<double> objectives;  // the controller's objective column, when `column`
  std::vector<Params> out;
  for (int t = 0; t < n; ++t) {
    if (t >= concurrent) {
      HistoryEntry& done = history[static_cast<size_t>(t - concurrent)];
      done.finished = true;
      done.objective = f(done.params);
      objectives[static_cast<size_t>(t - concurrent)] = ObjectiveColumn(done);
    }
    SuggestRequest req{&space, &history, t, seed, Direction::kMinimize};
    if (column) req.objectives = &objectives;
    auto p = sampler.Suggest(req);
    EXPECT_TRUE(p.ok() && p->has_value());
    out.push_back(**p);
    history.push_back({t, **p, false, std::nullopt});
    objectives.push_back(ObjectiveColumn(history.back()));
  }
  return out;
}

double Rough(const Params& p) {  // something to minimize over Mixed()
  double lr = std::get<double>(p.at("lr"));
  return std::pow(std::log10(lr) + 3, 2) +
         std::abs(static_cast<double>(std::get<int64_t>(p.at("units"))) - 128) / 64 +
         (std::get<std::string>(p.at("act")) == "gelu" ? 0 : 1);
}

TEST(Genetic, SameSeedSameSuggestionsAndAlwaysInsideTheSpace) {
  SearchSpace space = Mixed();
  GeneticSampler ga({8, 3, 0.5, 0.3, 0.1, 2, 2, 3});
  auto a = Drive(ga, space, Rough, 200, 5);
  auto b = Drive(ga, space, Rough, 200, 5);
  auto c = Drive(ga, space, Rough, 200, 6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (const Params& p : a) EXPECT_TRUE(space.Contains(p)) << FormatValue(p.at("units"));
  std::set<Params> distinct(a.begin(), a.end());
  EXPECT_GT(distinct.size(), 150u) << "children should mostly differ";
}

// The objective column (what long sweeps pass) gives the same search as reading the entries.
TEST(Genetic, ObjectiveColumnGivesTheSameSuggestions) {
  SearchSpace space = Mixed();
  for (int demes : {1, 3}) {
    GeneticSampler ga({9, 3, 0.5, 0.3, 0.1, 2, demes, 2});
    EXPECT_EQ(Drive(ga, space, Rough, 150, 11, 4, false), Drive(ga, space, Rough, 150, 11, 4, true))
        << demes;
  }
}

TEST(Genetic, MutationKeepsBoundsTypesAndSteps) {
  SearchSpace space = Mixed();
  Rng rng(1, 2);
  for (const ParamDef& p : space.params) {
    ParamValue v = RandomSampler::Draw(p, rng);
    int moved = 0;
    for (int i = 0; i < 5000; ++i) {
      ParamValue m = GeneticSampler::Mutate(p, v, 0.3, rng);
      Params one{{p.name, m}};
      SearchSpace just;
      just.params.push_back(p);
      ASSERT_TRUE(just.Contains(one)) << p.name << " = " << FormatValue(m);
      ASSERT_EQ(m.index(), v.index()) << p.name;
      moved += m != v;
      v = m;
    }
    if (p.type == ParamType::kFixed)
      EXPECT_EQ(moved, 0);
    else if (p.type == ParamType::kInt || p.type == ParamType::kCategorical)
      EXPECT_EQ(moved, 5000) << p.name;
    else
      EXPECT_GT(moved, 4000) << p.name;
  }
  // Log parameters move in log space: from the bottom of lr's range, a step of 0.1 of the log
  // range is a factor of about 2.5, not a jump to the middle of the linear range.
  ParamDef lr = space.params[0];
  double sum_log = 0;
  for (int i = 0; i < 2000; ++i)
    sum_log += std::log10(std::get<double>(GeneticSampler::Mutate(lr, 1e-5, 0.1, rng)));
  EXPECT_LT(sum_log / 2000, -4.3);
}

TEST(Genetic, DemesBreedFromTheirOwnTrialsAndElitesNeverAgeOut) {
  SearchSpace space = Box({{0, 1}, {0, 1}});
  // Clones only (no crossover, no mutation), a huge tournament: the child is the best member of
  // its deme's population.
  GeneticSampler ga({4, 100, 0.0, 0.0, 0.1, 1, 2, 0});
  std::vector<HistoryEntry> history;
  Rng rng(3, 3);
  for (int t = 0; t < 40; ++t) {
    Params p{{"x1", rng.Uniform()}, {"x2", rng.Uniform()}};
    // Trial 2 (deme 0) is the best ever; everything later is worse.
    history.push_back({t, p, true, t == 2 ? -100.0 : static_cast<double>(t)});
  }
  for (int t = 40; t < 50; ++t) {
    auto child = ga.Suggest({&space, &history, t, 1, Direction::kMinimize});
    ASSERT_TRUE(child.ok());
    if (t % 2 == 0) {
      EXPECT_EQ(**child, history[2].params) << "deme 0's elite, long aged out of its recent trials";
    } else {
      // Deme 1: its recent trials are 37 and 39, its elite is trial 1 (objective 1): the best.
      EXPECT_EQ(**child, history[1].params);
    }
  }
  // With migration every child, deme 1 also sees deme 0's best.
  GeneticSampler migrating({4, 100, 0.0, 0.0, 0.1, 1, 2, 1});
  auto child = migrating.Suggest({&space, &history, 41, 1, Direction::kMinimize});
  EXPECT_EQ(**child, history[2].params);
}

TEST(Genetic, SettingsAreChecked) {
  EXPECT_TRUE(GeneticSampler::Validate({}).ok());
  EXPECT_FALSE(GeneticSampler::Validate({1, 3, 0.5, 0.3, 0.1, 0, 1, 0}).ok());    // population
  EXPECT_FALSE(GeneticSampler::Validate({10, 3, 1.5, 0.3, 0.1, 2, 1, 0}).ok());   // crossover
  EXPECT_FALSE(GeneticSampler::Validate({10, 3, 0.5, 0.3, 0.0, 2, 1, 0}).ok());   // scale
  EXPECT_FALSE(GeneticSampler::Validate({10, 3, 0.5, 0.3, 0.1, 10, 1, 0}).ok());  // elitism
  EXPECT_FALSE(GeneticSampler::Validate({10, 3, 0.5, 0.3, 0.1, 2, 6, 0}).ok());   // demes
}

void CompareWithRandom(const SearchSpace& space, const Objective& f, int trials, const char* name) {
  RandomSampler random;
  GeneticSampler ga({16, 3, 0.5, 0.3, 0.1, 2, 1, 0});
  std::vector<double> r, g;
  int wins = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    r.push_back(Run(random, space, f, trials, seed));
    g.push_back(Run(ga, space, f, trials, seed));
    wins += g.back() < r.back() ? 1 : 0;
  }
  std::printf(
      "%s, %d trials, 10 seeds: median best random %.4f, genetic %.4f; genetic better in %d/10\n",
      name, trials, Median(r), Median(g), wins);
  EXPECT_LT(Median(g), Median(r)) << name;
  EXPECT_GE(wins, 7) << name;
}

TEST(Genetic, BeatsRandomOnHartmann6) {
  CompareWithRandom(Box(std::vector<std::pair<double, double>>(6, {0, 1})), Hartmann6, 200,
                    "Hartmann-6");
}

TEST(Genetic, BeatsRandomOnBranin) {
  CompareWithRandom(Box({{-5, 10}, {0, 15}}), Branin, 200, "Branin");
}

}  // namespace
}  // namespace hpo::algorithms

namespace hpo::algorithms {
namespace {

TEST(Pbt, StartsMembersThenContinuesOrExploits) {
  SearchSpace space;
  space.params.push_back(
      {"lr", ParamType::kFloat, 1e-4, 1.0, true, std::nullopt, {}, {}, std::nullopt});
  space.params.push_back(
      {"layers", ParamType::kInt, 1, 8, false, std::nullopt, {}, {}, std::nullopt});
  PbtSampler pbt({4, 0.25, 0.0, 0.2});
  std::vector<HistoryEntry> history;
  for (int64_t n = 0; n < 4; ++n) {
    SuggestOutput out;
    auto p = pbt.Suggest({&space, &history, n, 9, Direction::kMinimize, &out});
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(out.lineage, n);
    EXPECT_EQ(out.parent, -1);
    // Member n scores n: member 0 is the best, member 3 the worst.
    history.push_back({n, **p, true, static_cast<double>(n), out.parent, out.lineage});
  }
  // Trial 4 continues member 0 (its segment finished first): not in the bottom quarter.
  SuggestOutput out;
  auto p = pbt.Suggest({&space, &history, 4, 9, Direction::kMinimize, &out});
  EXPECT_EQ(out.lineage, 0);
  EXPECT_EQ(out.parent, 0);
  EXPECT_EQ(**p, history[0].params);
  history.push_back({4, **p, false, std::nullopt, out.parent, out.lineage});
  // Next: member 1, then 2 continue; member 3 (the worst) exploits member 0, the top quarter.
  for (int64_t n = 5; n <= 7; ++n) {
    p = pbt.Suggest({&space, &history, n, 9, Direction::kMinimize, &out});
    EXPECT_EQ(out.lineage, n - 4);
    if (n < 7) {
      EXPECT_EQ(out.parent, n - 4);
      EXPECT_EQ(**p, history[static_cast<size_t>(n - 4)].params);
    } else {
      EXPECT_EQ(out.parent, 0) << "copies the best member's checkpoint";
      EXPECT_NE(**p, history[0].params) << "and explores";
      EXPECT_TRUE(space.Contains(**p));
      double ratio =
          std::get<double>(p->value().at("lr")) / std::get<double>(history[0].params.at("lr"));
      EXPECT_TRUE(std::abs(ratio - 0.8) < 1e-9 || std::abs(ratio - 1.2) < 1e-9 ||
                  std::get<double>(p->value().at("lr")) == 1.0 ||
                  std::get<double>(p->value().at("lr")) == 1e-4)
          << ratio;
    }
    history.push_back({n, **p, false, std::nullopt, out.parent, out.lineage});
  }
}

TEST(Pbt, ExploreKeepsBoundsAndTypes) {
  SearchSpace space;
  space.params.push_back(
      {"lr", ParamType::kFloat, 1e-4, 1.0, true, std::nullopt, {}, {}, std::nullopt});
  space.params.push_back({"units", ParamType::kInt, 8, 64, false, 8.0, {}, {}, std::nullopt});
  space.params.push_back({"act",
                          ParamType::kCategorical,
                          0,
                          0,
                          false,
                          std::nullopt,
                          {std::string("relu"), std::string("tanh")},
                          {},
                          std::nullopt});
  Rng rng(4, 4);
  PbtOptions o{8, 0.25, 0.3, 0.2};
  for (const ParamDef& d : space.params) {
    ParamValue v = RandomSampler::Draw(d, rng);
    for (int i = 0; i < 3000; ++i) {
      v = PbtSampler::Explore(d, v, o, rng);
      SearchSpace one;
      one.params.push_back(d);
      ASSERT_TRUE(one.Contains({{d.name, v}})) << d.name << " " << FormatValue(v);
    }
  }
  EXPECT_FALSE(PbtSampler::Validate({1, 0.25, 0.25, 0.2}).ok());
  EXPECT_FALSE(PbtSampler::Validate({8, 0.75, 0.25, 0.2}).ok());
  EXPECT_FALSE(PbtSampler::Validate({8, 0.25, 0.25, 1.5}).ok());
}

}  // namespace
}  // namespace hpo::algorithms
