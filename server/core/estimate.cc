#include "server/core/estimate.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "algorithms/stopper.h"
#include "nlohmann/json.hpp"

namespace hpo::server {
namespace {

struct RunFigures {
  double trials = 0, steps = 0, gpu_seconds = 0, node_seconds = 0, wall = 0;
};

// One simulated run of the sweep (see estimate.h), with draws from `seed`.
// The steps a simulated trial reports at: every step up to `dense`, then each about `growth`
// times the last, and the last step. A rule meets a rung at the first report past it, a few
// percent late at most, and a long trial costs the simulation tens of reports, not thousands.
std::vector<int64_t> ReportSteps(int64_t steps, int64_t dense, double growth) {
  std::vector<int64_t> out;
  for (int64_t s = 1; s <= steps;) {
    out.push_back(s);
    s = s < dense
            ? s + 1
            : std::max(s + 1, static_cast<int64_t>(std::ceil(static_cast<double>(s) * growth)));
  }
  if (out.empty() || out.back() != steps) out.push_back(steps);
  return out;
}

absl::StatusOr<RunFigures> SimulateOnce(const SweepSpec& spec, const EstimateInputs& in,
                                        const std::vector<int64_t>& at_steps, uint64_t seed) {
  algorithms::StopperSpec rule = spec.early_stopping;
  if (rule.name == "auto" && rule.steps == 0) rule.steps = at_steps.back();  // as it will learn
  absl::StatusOr<std::unique_ptr<algorithms::Stopper>> made = algorithms::MakeStopper(rule);
  if (!made.ok()) return made.status();
  algorithms::Stopper& stopper = **made;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::normal_distribution<double> noise(0, 0.02);
  const Budget& budget = spec.budget;
  const int64_t steps = at_steps.back();
  const backend::Resources r = spec.MaxResources();
  const double gpus = static_cast<double>(r.gpus) * std::max(1, r.nodes);
  const double nodes = std::max(1, r.nodes);
  const int64_t concurrency = std::max<int64_t>(1, budget.max_concurrent);
  const double wall_limit = budget.wall_time ? absl::ToDoubleSeconds(*budget.wall_time) : HUGE_VAL;
  const double gpu_budget = budget.gpu_hours ? *budget.gpu_hours * 3600 : HUGE_VAL;
  // Without a step time, a step takes 1 s: the order of events is all the schedule needs. With
  // measured trials, each run draws its own sample of the same size from them (a bootstrap), so
  // that the range also says how little a few measured trials tell of the rest.
  struct Timing {
    double step = 1, startup = 0, tail = 0;
  };
  std::vector<Timing> measured;
  for (size_t i = 0; i < in.step_seconds.size(); ++i) {
    measured.push_back({std::max(1e-6, in.step_seconds[i]),
                        i < in.startup_seconds.size() ? in.startup_seconds[i] : 0,
                        i < in.tail_seconds.size() ? in.tail_seconds[i] : 0});
  }
  std::vector<Timing> sample = measured;
  if (sample.size() > 1) {
    std::uniform_int_distribution<size_t> pick(0, measured.size() - 1);
    for (Timing& s : sample) s = measured[pick(rng)];
  }
  auto timing = [&]() {
    if (sample.empty()) return Timing();
    std::uniform_int_distribution<size_t> pick(0, sample.size() - 1);
    return sample[pick(rng)];
  };

  struct Trial {
    double start = 0, quality = 0;
    Timing time;
    bool running = true;
    bool finishing = false;  // made its last report; ends after its tail
    int64_t step = 0;        // the last step reported
    size_t next = 0;         // into at_steps: the next report
    std::vector<std::pair<int64_t, double>> points;
  };
  std::vector<Trial> trials;
  // (time of the next report, trial number): the earliest first.
  using Next = std::pair<double, int64_t>;
  std::priority_queue<Next, std::vector<Next>, std::greater<Next>> next;
  RunFigures out;
  double now = 0, ended_gpu_seconds = 0;
  int64_t running = 0;
  // What the budget counts: the ended trials' GPU-seconds and the running ones' so far.
  double running_starts = 0;  // the sum of the running trials' starts
  auto used_gpu_seconds = [&] {
    return ended_gpu_seconds + (static_cast<double>(running) * now - running_starts) * gpus;
  };
  auto end = [&](Trial& t, double at) {
    out.steps += static_cast<double>(t.step);
    out.gpu_seconds += (at - t.start) * gpus;
    out.node_seconds += (at - t.start) * nodes;
    ended_gpu_seconds += (at - t.start) * gpus;
    out.wall = std::max(out.wall, at);
    t.running = false;
    running_starts -= t.start;
    --running;
  };
  // The time until trial `t`'s next report.
  auto until_next = [&](const Trial& t) {
    return t.time.step * static_cast<double>(at_steps[t.next] - t.step);
  };
  constexpr size_t kMaxTrials = 100000;  // a bound on the work, far past any sane sweep
  auto launch = [&] {
    while (running < concurrency &&
           (in.limit <= 0 || static_cast<int64_t>(trials.size()) < in.limit) &&
           trials.size() < kMaxTrials && now < wall_limit && used_gpu_seconds() < gpu_budget) {
      Trial t;
      t.start = now;
      t.time = timing();
      t.quality = uniform(rng);
      trials.push_back(std::move(t));
      next.emplace(now + trials.back().time.startup + until_next(trials.back()),
                   static_cast<int64_t>(trials.size()) - 1);
      running_starts += now;
      ++running;
    }
  };
  launch();
  while (!next.empty()) {
    auto [at, number] = next.top();
    next.pop();
    Trial& t = trials[static_cast<size_t>(number)];
    if (at > wall_limit) {  // the sweep's wall time ends it; hpod stops what runs
      end(t, wall_limit);
      now = wall_limit;
      continue;
    }
    now = at;
    if (t.finishing) {
      end(t, now);
      launch();
      continue;
    }
    t.step = at_steps[t.next++];
    double value = t.quality + 1.0 / static_cast<double>(t.step) + noise(rng);
    t.points.emplace_back(t.step, value);
    bool last = t.step >= steps;
    algorithms::Curve curve;
    curve.trial_number = number;
    curve.points = t.points;
    curve.finished = last;
    algorithms::StopDecision d = stopper.Observe(curve, algorithms::Direction::kMinimize);
    if (last && t.time.tail > 0) {
      t.finishing = true;
      next.emplace(now + t.time.tail, number);
    } else if (last || d.decision == algorithms::Decision::kStop) {
      end(t, now);
      launch();
    } else {
      next.emplace(now + until_next(t), number);
    }
  }
  if (trials.size() >= kMaxTrials) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the sweep would run more than ", kMaxTrials,
        " trials within its budget, more than a plan simulates: give budget.max_trials"));
  }
  out.trials = static_cast<double>(trials.size());
  return out;
}

EstimateRange RangeOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(std::lround(q * (v.size() - 1)))]; };
  return {at(0.1), at(0.5), at(0.9)};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

absl::Status CheckBounded(const SweepSpec& spec, int64_t limit) {
  if (limit <= 0 && !spec.budget.wall_time && !spec.budget.gpu_hours) {
    return absl::InvalidArgumentError(
        "nothing bounds the sweep: give budget.max_trials, wall_time or gpu_hours");
  }
  return absl::OkStatus();
}

int64_t DeclaredSteps(const SweepSpec& spec) {
  return spec.plan.steps > 0 ? spec.plan.steps : spec.early_stopping.max_resource;
}

absl::StatusOr<Estimate> EstimateSweep(const SweepSpec& spec, const EstimateInputs& in) {
  const Budget& b = spec.budget;
  if (absl::Status s = CheckBounded(spec, in.limit); !s.ok()) return s;
  if (in.steps <= 0) {
    return absl::InvalidArgumentError(
        "how many steps a trial reports is not known: give `plan: {steps: N}` in the sweep file "
        "(or early_stopping.max_resource), hpo plan --steps N, --like SWEEP, or let hpo plan "
        "--pilot run a trial to its end");
  }
  if (in.limit <= 0 && in.step_seconds.empty()) {
    return absl::InvalidArgumentError(
        "the sweep is bounded by its wall time or GPU-hours only, so its size depends on the time "
        "of a step: give `plan: {step_time: 30s}`, hpo plan --step-time 30s, or --like SWEEP");
  }
  // The work is bounded: trials report at ReportSteps (coarser for a sweep of very many trial
  // steps), and a large sweep gets fewer runs (at least 3), about two million reports in all.
  double trials_bound = static_cast<double>(in.limit);
  if (in.limit <= 0 || b.wall_time) {
    double fastest =
        in.step_seconds.empty()
            ? 1.0
            : std::max(1e-3, *std::min_element(in.step_seconds.begin(), in.step_seconds.end()));
    double by_wall = b.wall_time ? static_cast<double>(std::max<int64_t>(1, b.max_concurrent)) *
                                       (1 + absl::ToDoubleSeconds(*b.wall_time) / fastest /
                                                static_cast<double>(in.steps))
                                 : HUGE_VAL;
    trials_bound = in.limit > 0 ? std::min(trials_bound, by_wall) : by_wall;
  }
  trials_bound = std::min(trials_bound, 100000.0);
  // A trial's length: its steps, or fewer when the budget stops each trial earlier.
  const int64_t length = b.max_trial_steps > 0 ? std::min(in.steps, b.max_trial_steps) : in.steps;
  std::vector<int64_t> at_steps = ReportSteps(length, 20, 1.1);
  if (trials_bound * static_cast<double>(at_steps.size()) > 1e6) {
    at_steps = ReportSteps(length, 3, 1.5);
  }
  const double per_run = std::max(1.0, trials_bound * static_cast<double>(at_steps.size()));
  const int runs = std::max(1, std::min(in.runs, std::max(3, static_cast<int>(2e6 / per_run))));
  std::vector<double> trials, steps, gpu, node, wall;
  for (int run = 0; run < runs; ++run) {
    absl::StatusOr<RunFigures> f = SimulateOnce(spec, in, at_steps, spec.seed * 7919 + run + 1);
    if (!f.ok()) return f.status();
    trials.push_back(f->trials);
    steps.push_back(f->steps);
    gpu.push_back(f->gpu_seconds / 3600);
    node.push_back(f->node_seconds / 3600);
    wall.push_back(f->wall);
  }
  Estimate e;
  e.trials = RangeOf(trials);
  e.steps = RangeOf(steps);
  e.has_cost = !in.step_seconds.empty();
  if (e.has_cost) {
    e.gpu_hours = RangeOf(gpu);
    e.node_hours = RangeOf(node);
    e.wall_seconds = RangeOf(wall);
  }
  e.basis = in.basis;
  return e;
}

EstimateInputs InputsFromTrials(const std::vector<const TrialRecord*>& trials,
                                const std::map<int64_t, ReportSpan>& spans, int64_t cap) {
  EstimateInputs in;
  std::vector<double> last_steps;
  for (const TrialRecord* t : trials) {
    if (t->state != v1::TRIAL_STATE_COMPLETED && t->state != v1::TRIAL_STATE_STOPPED) continue;
    if (t->step < 1 || !t->started_at || !t->ended_at) continue;
    const bool completed = t->state == v1::TRIAL_STATE_COMPLETED;
    double run = absl::ToDoubleSeconds(*t->ended_at - *t->started_at);
    if (run <= 0) continue;
    double step = run / static_cast<double>(t->step), startup = 0, tail = 0;
    if (auto it = spans.find(t->id); it != spans.end()) {
      const ReportSpan& span = it->second;
      double between = absl::ToDoubleSeconds(span.last - span.first);
      if (span.last_step > span.first_step && between > 0) {
        step = between / static_cast<double>(span.last_step - span.first_step);
        startup = std::max(0.0, absl::ToDoubleSeconds(span.first - *t->started_at) -
                                    step * static_cast<double>(span.first_step));
        // A stopped trial's end is hpod's stop, not its own: no tail of its own.
        if (completed) tail = std::max(0.0, absl::ToDoubleSeconds(*t->ended_at - span.last));
      }
    }
    in.step_seconds.push_back(step);
    in.startup_seconds.push_back(startup);
    in.tail_seconds.push_back(tail);
    if (completed || (cap > 0 && t->step >= cap))
      last_steps.push_back(static_cast<double>(t->step));
  }
  in.steps = static_cast<int64_t>(Median(last_steps));
  return in;
}

std::string EstimateJson(const Estimate& e) {
  auto range = [](const EstimateRange& r) {
    return nlohmann::json::array({r.low, r.expected, r.high});
  };
  nlohmann::json j = {{"trials", range(e.trials)},
                      {"steps", range(e.steps)},
                      {"has_cost", e.has_cost},
                      {"gpu_hours", range(e.gpu_hours)},
                      {"node_hours", range(e.node_hours)},
                      {"wall_seconds", range(e.wall_seconds)},
                      {"basis", e.basis}};
  return j.dump();
}

std::optional<Estimate> EstimateFromJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("trials")) return std::nullopt;
  auto range = [&j](const char* key) {
    EstimateRange r;
    const nlohmann::json& a = j.value(key, nlohmann::json::array());
    if (a.is_array() && a.size() == 3 && a[0].is_number() && a[1].is_number() && a[2].is_number()) {
      r = {a[0].get<double>(), a[1].get<double>(), a[2].get<double>()};
    }
    return r;
  };
  Estimate e;
  e.trials = range("trials");
  e.steps = range("steps");
  e.has_cost = j.value("has_cost", false);
  e.gpu_hours = range("gpu_hours");
  e.node_hours = range("node_hours");
  e.wall_seconds = range("wall_seconds");
  e.basis = j.value("basis", std::string());
  return e;
}

}  // namespace hpo::server
