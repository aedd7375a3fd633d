// The contract every sampler and every stopper keeps, run over every name the sweep file
// accepts (SamplerNames, StopperNames): a new algorithm is covered by being named there.
//
// A sampler, over a sweep of mixed parameters (log-scaled, stepped, integer, categorical with a
// bool, fixed) whose trials complete, fail (no objective) or are stopped early:
//  - every suggestion lies in the space;
//  - the same seed gives the same suggestions; a sampler built afresh (hpod restarted) given the
//    same history suggests exactly what the running one does;
//  - with several objectives the same holds, or the sampler refuses them and names one that
//    takes them.
// A stopper, told of interleaved reports of many trials, some of which end early:
//  - the same reports give the same decisions, each stop with a reason;
//  - one built afresh and told every curve so far trial by trial (what a restarted hpod does)
//    decides every later report as the one that ran all along.
#include <cmath>
#include <map>
#include <random>
#include <span>

#include "absl/strings/str_cat.h"
#include "algorithms/sampler.h"
#include "algorithms/stopper.h"
#include "gtest/gtest.h"
#include "tests/unit/algorithms/test_functions.h"

namespace hpo::algorithms {
namespace {

SearchSpace Mixed() {
  SearchSpace s = testing::EveryKind({std::string("relu"), std::string("gelu"), true});
  s.params.push_back({"epochs", ParamType::kFixed, 0, 0, false, std::nullopt, {}, int64_t{10}});
  return s;
}

double Num(const ParamValue& v) {
  if (const double* d = std::get_if<double>(&v)) return *d;
  if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (const bool* b = std::get_if<bool>(&v)) return *b ? 1 : 0;
  return std::get<std::string>(v) == "relu" ? 0.3 : 0.7;
}

// A trial's outcome: every 7th fails (no objective), every 5th is stopped early, the others
// complete; the objectives are smooth functions of the parameters.
void Finish(HistoryEntry& h, bool pareto) {
  h.finished = true;
  if (h.number % 7 == 3) return;
  const Params& p = h.params;
  double a = std::pow(std::log10(Num(p.at("lr"))) + 3, 2) + Num(p.at("drop")) + Num(p.at("act")) +
             0.001 * Num(p.at("units"));
  double b = 1.0 / (1.0 + Num(p.at("drop"))) + 0.0001 * Num(p.at("units"));
  h.objective = a;
  h.stopped = h.number % 5 == 4;
  if (pareto) h.values = {a, b};
}

struct SweepRun {
  std::vector<Params> suggested;
};

// A sweep of `trials` suggestions, one at a time, each finished before the next. Checks each
// suggestion against a sampler built afresh for it.
SweepRun Sweep(const std::string& name, uint64_t seed, bool pareto, int trials = 60) {
  AlgorithmSpec spec;
  spec.name = name;
  spec.population = 8;
  spec.startup_trials = 5;
  SearchSpace space = Mixed();
  auto sampler = MakeSampler(spec, space, pareto);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  if (!sampler.ok()) return {};
  const std::vector<Direction> directions = {Direction::kMinimize, Direction::kMinimize};
  std::vector<HistoryEntry> history;
  SweepRun run;
  for (int64_t n = 0; n < trials; ++n) {
    SCOPED_TRACE(absl::StrCat(name, " trial ", n));
    SuggestOutput out, fresh_out;
    SuggestRequest req{&space, &history, n, seed, Direction::kMinimize, &out};
    if (pareto) req.directions = &directions;
    absl::StatusOr<std::optional<Params>> p = (*sampler)->Suggest(req);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok() || !p->has_value()) break;  // a finished grid
    EXPECT_TRUE(space.Contains(**p));
    // hpod restarted: a new sampler, the same history, the same answer.
    auto fresh = MakeSampler(spec, space, pareto);
    SuggestRequest again = req;
    again.output = &fresh_out;
    absl::StatusOr<std::optional<Params>> q = (*fresh)->Suggest(again);
    EXPECT_TRUE(q.ok() && q->has_value() && **q == **p) << "rebuilt differently";
    EXPECT_EQ(fresh_out.parent, out.parent);
    EXPECT_EQ((*fresh)->Choice(again), (*sampler)->Choice(req)) << "a choice rebuilt alike";
    HistoryEntry h;
    h.number = n;
    h.params = **p;
    h.parent = out.parent;
    h.lineage = out.lineage;
    Finish(h, pareto);
    history.push_back(std::move(h));
    run.suggested.push_back(**p);
  }
  return run;
}

class SamplerContract : public ::testing::TestWithParam<std::string> {};

TEST_P(SamplerContract, InTheSpaceDeterministicAndRebuiltIdentically) {
  SweepRun a = Sweep(GetParam(), 7, false);
  EXPECT_GE(a.suggested.size(), 40u);
  SweepRun b = Sweep(GetParam(), 7, false);
  EXPECT_EQ(a.suggested, b.suggested) << "the same seed must give the same sweep";
}

TEST_P(SamplerContract, SeveralObjectivesWhereItTakesThem) {
  AlgorithmSpec spec;
  spec.name = GetParam();
  if (absl::StatusOr<std::unique_ptr<Sampler>> s = MakeSampler(spec, Mixed(), /*pareto=*/true);
      !s.ok()) {  // one that cannot rank by several says so, and which can
    EXPECT_TRUE(absl::IsInvalidArgument(s.status()));
    EXPECT_NE(s.status().message().find("nsga2"), std::string::npos) << s.status();
    return;
  }
  SweepRun a = Sweep(GetParam(), 11, true);
  SweepRun b = Sweep(GetParam(), 11, true);
  EXPECT_EQ(a.suggested, b.suggested);
}

INSTANTIATE_TEST_SUITE_P(EveryName, SamplerContract, ::testing::ValuesIn(SamplerNames()),
                         [](const auto& info) { return info.param; });

// Interleaved reports of `trials` trials, up to 27 steps each; every 4th trial ends early.
struct Report {
  int64_t trial;
  int64_t step;
  double value;
  bool last;  // the trial's last report: it finished
};
std::vector<Report> Reports(int trials, uint64_t seed) {
  std::mt19937_64 bits(seed);
  std::bernoulli_distribution skip(0.3);
  std::vector<Report> out;
  std::vector<int64_t> next(trials, 1);
  std::vector<int64_t> last(trials);
  for (int t = 0; t < trials; ++t) last[t] = t % 4 == 1 ? 5 : 27;
  for (int round = 0, more = 1; more; ++round) {
    more = 0;
    for (int t = 0; t < trials; ++t) {
      if (round < 2 * t) {  // trials start one after another, as a sweep's do
        more = 1;
        continue;
      }
      if (next[t] > last[t] || skip(bits)) {
        more |= next[t] <= last[t];
        continue;
      }
      double base = 1.0 + 0.1 * ((t * 37) % 11);
      out.push_back(
          {t, next[t], base / std::sqrt(static_cast<double>(next[t])), next[t] == last[t]});
      more = 1;
      ++next[t];
    }
  }
  return out;
}

class StopperContract : public ::testing::TestWithParam<std::string> {};

TEST_P(StopperContract, SameReportsSameDecisionsAlsoAfterARestart) {
  StopperSpec spec;
  spec.name = GetParam();
  spec.max_resource = 27;
  const std::vector<Report> reports = Reports(24, 3);
  const size_t restart_at = reports.size() / 3;
  auto one = MakeStopper(spec), two = MakeStopper(spec);
  ASSERT_TRUE(one.ok() && two.ok()) << one.status();
  std::map<int64_t, std::vector<std::pair<int64_t, double>>> curves;
  std::map<int64_t, bool> finished;
  std::vector<int64_t> end_order;  // the trials that completed, in the order they did
  std::unique_ptr<Stopper> restarted;
  int stops = 0, stops_after_restart = 0;
  for (size_t i = 0; i < reports.size(); ++i) {
    const Report& r = reports[i];
    if (i == restart_at) {  // hpod restarts: a new stopper told every curve, trial by trial
      restarted = *MakeStopper(spec);
      for (const auto& [trial, points] : curves) {
        for (size_t k = 1; k <= points.size(); ++k) {
          bool ended = k == points.size() && finished[trial];
          restarted->Observe({trial, std::span(points.data(), k), ended}, Direction::kMinimize);
        }
      }
      for (int64_t trial : end_order) {  // then the ended trials, in the order they ended
        const auto& points = curves[trial];
        restarted->Ended({trial, std::span(points.data(), points.size()), true}, true);
      }
    }
    auto& points = curves[r.trial];
    points.emplace_back(r.step, r.value);
    finished[r.trial] = r.last;
    Curve curve{r.trial, std::span(points.data(), points.size()), r.last};
    StopDecision a = (*one)->Observe(curve, Direction::kMinimize);
    StopDecision b = (*two)->Observe(curve, Direction::kMinimize);
    EXPECT_EQ(a.decision, b.decision) << "report " << i;
    if (a.decision == Decision::kStop) {
      ++stops;
      EXPECT_FALSE(a.reason.empty()) << "a stop says why";
    }
    if (restarted) {
      EXPECT_EQ(restarted->Observe(curve, Direction::kMinimize).decision, a.decision)
          << GetParam() << ", report " << i << " after the restart";
      stops_after_restart += a.decision == Decision::kStop;
    }
    if (r.last) {  // it completed
      end_order.push_back(r.trial);
      (*one)->Ended(curve, true);
      (*two)->Ended(curve, true);
      if (restarted) restarted->Ended(curve, true);
      EXPECT_EQ((*one)->Choice(), (*two)->Choice());
      if (restarted) {
        EXPECT_EQ(restarted->Choice(), (*one)->Choice());
      }
    }
  }
  if (GetParam() == "none") {
    EXPECT_EQ(stops, 0);
  } else {
    EXPECT_GT(stops_after_restart, 0) << "later trials, compared with earlier ones, should stop "
                                      << stops << " " << (*one)->Choice();
  }
}

INSTANTIATE_TEST_SUITE_P(EveryName, StopperContract, ::testing::ValuesIn(StopperNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace hpo::algorithms
