// The suggester: the history's copy on its thread follows the sweep's, proposals come back
// without holding the caller, see each other as running, and a sweep run with it ends as one
// run on the controller's thread does.
#include "server/core/suggester.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "gtest/gtest.h"
#include "tests/unit/server/core/lifecycle_fixture.h"

namespace hpo::server {
namespace {

using algorithms::HistoryEntry;
using algorithms::Params;
using Curve = std::vector<std::pair<int64_t, double>>;

// A sampler that proposes x = trial_number + 1, and waits at each proposal until the test
// opens its gate (at most 30 s: a gate never opened fails the test, it does not hang it). It
// notes what each request showed it.
class GatedSampler final : public algorithms::Sampler {
 public:
  struct Seen {
    int64_t trial_number;
    size_t history;  // entries
    size_t running;  // ... not finished
  };
  std::string Name() const override { return "gated"; }
  absl::StatusOr<std::optional<Params>> Suggest(
      const algorithms::SuggestRequest& req) const override {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(30), [this] { return open_; });
    size_t running = 0;
    for (const HistoryEntry& h : *req.history) running += !h.finished;
    seen_.push_back({req.trial_number, req.history->size(), running});
    return Params{{"x", req.trial_number + 1}};
  }
  std::optional<int64_t> MaxTrials(const algorithms::SearchSpace&) const override {
    return std::nullopt;
  }
  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  std::vector<Seen> seen() const {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool open_ = false;
  mutable std::vector<Seen> seen_;
};

void WaitIdle(const Suggester& s) {
  for (int i = 0; i < 30000 && s.Busy(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_FALSE(s.Busy());
}

algorithms::SearchSpace OneInt() {
  algorithms::SearchSpace space;
  algorithms::ParamDef x;
  x.name = "x";
  x.type = algorithms::ParamType::kInt;
  x.low = 1;
  x.high = 1000;
  space.params.push_back(x);
  return space;
}

TEST(HistoryMirrorTest, TheCopyFollowsTheHistoryThroughNewEndedAndGrowingTrials) {
  // A history as a sweep keeps it: entries point at curves and vectors held elsewhere.
  std::deque<Curve> curves;
  std::deque<std::vector<double>> vectors;
  std::vector<HistoryEntry> history;
  std::vector<algorithms::Direction> directions = {algorithms::Direction::kMinimize,
                                                   algorithms::Direction::kMaximize};
  algorithms::SearchSpace space = OneInt();
  algorithms::SuggestRequest like;
  like.space = &space;
  like.history = &history;
  like.directions = &directions;
  HistoryMirror mirror(like, /*curves=*/true, /*vectors=*/true);
  SweepSuggestions feed;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 60; ++round) {
    // New trials, curves that grow (a curve only grows: a report's step is past the last),
    // trials that end.
    for (int i = 0; i < static_cast<int>(rng() % 4); ++i) {
      HistoryEntry& h = history.emplace_back();
      h.number = static_cast<int64_t>(history.size()) - 1;
      h.params = {{"x", static_cast<int64_t>(rng() % 100)}};
      h.curve = &curves.emplace_back();
      h.vectors = &vectors.emplace_back();
    }
    for (HistoryEntry& h : history) {
      if (h.finished) continue;
      Curve& c = curves[static_cast<size_t>(h.number)];
      std::vector<double>& v = vectors[static_cast<size_t>(h.number)];
      for (int k = 0; k < static_cast<int>(rng() % 3); ++k) {
        c.emplace_back(static_cast<int64_t>(c.size()) + 1, static_cast<double>(rng() % 1000));
        v.insert(v.end(), {1.0, 2.0, 0.0});
      }
      if (rng() % 5 == 0) {
        h.finished = true;
        h.objective = c.empty() ? std::nullopt : std::optional<double>(c.back().second);
        h.values = {0.5, static_cast<double>(h.number)};
        h.violation = 0.25;
        h.stopped = rng() % 2 == 0;
      }
    }
    mirror.Apply(feed.Updates(history));
    if (round % 3 == 0) mirror.AddProposal({{"x", int64_t{5}}}, {});  // dropped at the next
    const std::vector<HistoryEntry>& copy = mirror.history();
    ASSERT_GE(copy.size(), history.size());
    ASSERT_LE(copy.size(), history.size() + 1);
    for (size_t n = 0; n < history.size(); ++n) {
      const HistoryEntry &a = history[n], &b = copy[n];
      SCOPED_TRACE(::testing::Message() << "round " << round << ", trial " << n);
      EXPECT_EQ(a.number, b.number);
      EXPECT_EQ(a.params, b.params);
      EXPECT_EQ(a.finished, b.finished);
      EXPECT_EQ(a.objective, b.objective);
      EXPECT_EQ(a.values, b.values);
      EXPECT_EQ(a.violation, b.violation);
      EXPECT_EQ(a.stopped, b.stopped);
      ASSERT_NE(b.curve, nullptr);
      EXPECT_EQ(*a.curve, *b.curve);
      ASSERT_NE(b.vectors, nullptr);
      EXPECT_EQ(*a.vectors, *b.vectors);
    }
    algorithms::SuggestRequest req = mirror.Request(0);
    for (size_t n = 0; n < copy.size(); ++n) {
      double want = algorithms::ObjectiveColumn(copy[n]);
      double got = (*req.objectives)[n];
      EXPECT_TRUE(want == got || (std::isnan(want) && std::isnan(got)));
    }
  }
}

TEST(SuggesterTest, AThreadedRequestReturnsAtOnceAndItsProposalsCountAsRunning) {
  auto sampler = std::make_shared<GatedSampler>();
  algorithms::SearchSpace space = OneInt();
  std::vector<HistoryEntry> history(2);
  history[0] = {0, {{"x", int64_t{1}}}, true, 3.0};
  history[1] = {1, {{"x", int64_t{2}}}, false, std::nullopt};
  algorithms::SuggestRequest now;
  now.space = &space;
  now.history = &history;
  now.trial_number = 2;
  Suggester suggester(/*threaded=*/true);
  SweepSuggestions sweep;
  auto find = [&](int64_t id) { return id == 9 ? &sweep : nullptr; };
  suggester.Ask(9, sweep, sampler, false, now, 3);  // the sampler waits: Ask does not
  EXPECT_TRUE(sweep.asking());
  suggester.Poll(find);
  EXPECT_EQ(sweep.waiting(), 0u);
  sampler->Open();
  WaitIdle(suggester);
  suggester.Poll(find);
  EXPECT_FALSE(sweep.asking());
  ASSERT_EQ(sweep.waiting(), 3u);
  for (int64_t k = 0; k < 3; ++k) {
    std::optional<Suggestion> s = sweep.Take();
    ASSERT_TRUE(s && s->params.ok() && s->params->has_value());
    EXPECT_EQ(**s->params, (Params{{"x", 3 + k}}));
  }
  std::vector<GatedSampler::Seen> seen = sampler->seen();
  ASSERT_EQ(seen.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {  // the trial running, and the proposals before it
    EXPECT_EQ(seen[k].trial_number, static_cast<int64_t>(2 + k));
    EXPECT_EQ(seen[k].history, 2 + k);
    EXPECT_EQ(seen[k].running, 1 + k);
  }
  // The next request's copy has the proposals no more: their trials come with the history.
  history.push_back({2, {{"x", int64_t{3}}}, false, std::nullopt});
  now.trial_number = 3;
  suggester.Ask(9, sweep, sampler, false, now, 1);
  WaitIdle(suggester);
  suggester.Poll(find);
  ASSERT_EQ(sampler->seen().size(), 4u);
  EXPECT_EQ(sampler->seen()[3].history, 3u);
  EXPECT_EQ(sampler->seen()[3].running, 2u);
}

TEST(SuggesterTest, ARequestOfASweepThatEndedBringsNothing) {
  auto sampler = std::make_shared<GatedSampler>();
  algorithms::SearchSpace space = OneInt();
  std::vector<HistoryEntry> history;
  algorithms::SuggestRequest now;
  now.space = &space;
  now.history = &history;
  Suggester suggester(/*threaded=*/true);
  SweepSuggestions sweep;
  suggester.Ask(1, sweep, sampler, false, now, 50);
  sweep.Cancel();
  EXPECT_FALSE(sweep.asking());
  sampler->Open();
  WaitIdle(suggester);
  suggester.Poll([&](int64_t) { return &sweep; });
  EXPECT_EQ(sweep.waiting(), 0u);
  EXPECT_LE(sampler->seen().size(), 1u);  // the one under way when it ended, at most
}

// --- A sweep with its proposals made on the suggester's thread

class ThreadedLifecycleTest : public LifecycleTest {
 protected:
  void SetUp() override {
    LifecycleTest::SetUp();
    TrialLifecycle::Options o;
    o.data_dir = DataDir(root_);
    o.suggest_thread = true;
    lifecycle_ =
        std::make_unique<TrialLifecycle>(o, table_, *store_, router_, files_, *events_, clock_);
  }
  // A tick, and those that take the proposals it asked for, as hpod's loop is woken for them.
  void TickAll() {
    Tick();
    while (lifecycle_->Suggesting()) {
      for (int i = 0; i < 30000 && lifecycle_->SuggesterBusy(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      ASSERT_FALSE(lifecycle_->SuggesterBusy());
      Tick();
    }
  }
};

TEST_F(ThreadedLifecycleTest, ASlowProposalHoldsNoTickBack) {
  auto gated = std::make_unique<GatedSampler>();
  GatedSampler* sampler = gated.get();
  Sweep& sweep = AddSweep(std::move(gated), 4, 2);
  Tick();  // asks, and returns while the sampler waits
  EXPECT_TRUE(lifecycle_->Suggesting());
  EXPECT_EQ(sweep.trials().size(), 0u);
  Tick();
  EXPECT_EQ(sweep.trials().size(), 0u);
  sampler->Open();
  TickAll();
  ASSERT_EQ(sweep.trials().size(), 2u);  // both places, from one request
  EXPECT_EQ(sweep.trial(0).rec.params, X(1));
  EXPECT_EQ(sweep.trial(1).rec.params, X(2));
}

TEST_F(ThreadedLifecycleTest, ASweepRunsEveryProposalOnceInOrder) {
  Sweep& sweep = AddSweep(Cycling(12), 12, 3);
  for (absl::Time end = clock_.Now() + absl::Minutes(5); clock_.Now() < end && !sweep.Final();) {
    TickAll();
    clock_.Advance(absl::Seconds(1));
  }
  ASSERT_TRUE(sweep.Final());
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_COMPLETED);
  ASSERT_EQ(sweep.trials().size(), 12u);
  for (const auto& t : sweep.trials()) {
    EXPECT_EQ(t->rec.params, X(1 + t->rec.number % 3)) << "trial " << t->rec.number;
    EXPECT_EQ(t->rec.state, v1::TRIAL_STATE_COMPLETED);
  }
}

TEST_F(ThreadedLifecycleTest, ASamplerErrorOnItsThreadFailsTheSweep) {
  std::vector<fakes::ScriptedSampler::Step> steps = {X(1), absl::InvalidArgumentError("no room")};
  Sweep& sweep = AddSweep(std::make_unique<fakes::ScriptedSampler>(std::move(steps)), 5, 3);
  for (absl::Time end = clock_.Now() + absl::Minutes(1); clock_.Now() < end && !sweep.Final();) {
    TickAll();
    clock_.Advance(absl::Seconds(1));
  }
  EXPECT_EQ(sweep.rec.state, v1::SWEEP_STATE_FAILED);
  EXPECT_NE(sweep.rec.message.find("the sampler failed: no room"), std::string::npos)
      << sweep.rec.message;
  EXPECT_EQ(sweep.trials().size(), 1u);
}

}  // namespace
}  // namespace hpo::server
