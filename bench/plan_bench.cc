// plan_bench: how close `hpo plan` comes to what a sweep then uses, on the simulated backend in
// virtual time.
//
// Each run is real: the controller with its SQLite store, and the simulated backend with W GPUs;
// a trial holds one GPU and reports after each step. A step takes one virtual second times a
// factor of the trial's own, 0.5 to 1.5 from its first numeric parameter (a bigger model is a
// slower one), so no declared step time is right for every trial. As a user would: `hpo plan
// --pilot` runs the sweep's pilot first (8 random configurations, 5 steps each, a sweep of its
// own) and estimates the real sweep (N trials, W at a time) like it; the sweep runs, and what it
// used (trials, steps, GPU-hours, wall time) is read back. Per problem and method (random, TPE,
// random with ASHA), over seeds: the plan's expected value and range, what was used, and the error.
// Prints markdown tables.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/problems.h"
#include "common/clock.h"
#include "server/core/controller.h"
#include "spdlog/spdlog.h"
#include "tests/fakes/test_daemon.h"

namespace {

using hpo::algorithms::Params;
using hpo::bench::Problem;
using hpo::server::Controller;

struct Method {
  std::string name, algorithm, stopper;
};

// What a sweep used.
struct Used {
  double trials = 0, steps = 0, gpu_hours = 0, wall = 0;
};

// The slowness of a trial's steps: 0.5 to 1.5 over its first numeric parameter's range.
double Factor(const Problem& problem, const Params& params) {
  for (const auto& p : problem.space.params) {
    if (p.type == hpo::algorithms::ParamType::kCategorical) continue;
    double lo = hpo::algorithms::NumericValue(p.low).value_or(0);
    double hi = hpo::algorithms::NumericValue(p.high).value_or(0);
    auto it = params.find(p.name);
    if (it == params.end() || hi <= lo) break;
    double v = hpo::algorithms::NumericValue(it->second).value_or(lo);
    if (p.log && lo > 0) return 0.5 + (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo));
    return 0.5 + (v - lo) / (hi - lo);
  }
  return 1.0;
}

class Bench {
 public:
  Bench(const Problem& problem, int workers, const std::string& prefix)
      : problem_(problem), workers_(workers), daemon_(Options(workers, prefix)) {
    daemon_.set_script([this](const hpo::backend::LaunchSpec& spec) {
      Params params = hpo::bench::ParamsFromArgv(problem_.space, spec.argv);
      double factor = Factor(problem_, params);
      running_[spec.trial_id] = {spec.env.at("HPO_TRIAL_TOKEN"), params, clock().Now(), factor};
      // It exits a moment after its last report, or at once when stopped.
      hpo::backend::SimulatedFate fate;
      fate.run_time = absl::Seconds(factor * problem_.steps) + absl::Milliseconds(1);
      return fate;
    });
    daemon_.simulated().keep_launched(false);
  }

  Controller& controller() { return daemon_.controller(); }
  hpo::FakeClock& clock() { return daemon_.clock(); }

  std::string Yaml(const std::string& name, int trials, const Method& m, uint64_t seed) const {
    return absl::StrCat("name: ", name, "\ncommand: [train]\npass_params: flags\n",
                        hpo::bench::ParametersYaml(problem_.space),
                        hpo::bench::ObjectivesYaml(problem_), "budget: {max_trials: ", trials,
                        ", max_concurrent: ", workers_, "}\n", "resources: {gpus: 1}\n",
                        m.algorithm.empty() ? "" : absl::StrCat("algorithm: ", m.algorithm, "\n"),
                        m.stopper.empty() ? "" : absl::StrCat("early_stopping: ", m.stopper, "\n"),
                        "stop_grace: 0s\nseed: ", seed, "\n");
  }

  // Submits `yaml` (or with `pilot_trials`, its pilot of that many trials, `pilot_steps` steps
  // each: hpo plan --pilot) and runs it to its end; returns its id.
  int64_t Run(const std::string& yaml, int pilot_trials = 0, int pilot_steps = 0) {
    hpo::v1::SubmitSweepRequest req;
    req.set_spec_yaml(yaml);
    req.set_source("plan.yaml");
    req.set_base_dir(daemon_.root());
    req.set_pilot_trials(pilot_trials);
    req.set_pilot_steps(pilot_steps);
    auto sweep = controller().Submit(Controller::AllowedForTest(), req);
    if (!sweep.ok()) Die(sweep.status().ToString());
    while (!controller().AllSweepsEnded()) {
      for (auto it = running_.begin(); it != running_.end();) {
        Trial& t = it->second;
        if (clock().Now() < t.start + absl::Seconds(t.factor * (t.step + 1))) {
          ++it;
          continue;
        }
        int step = ++t.step;
        std::vector<double> values = problem_.value(t.params, step);
        hpo::v1::ReportRequest report;
        report.set_trial_id(it->first);
        report.set_step(step);
        for (size_t j = 0; j < values.size(); ++j) {
          (*report.mutable_metrics())[problem_.metrics[j]] = values[j];
        }
        int64_t id = it->first;
        bool last = step >= problem_.steps;
        controller().Post([this, report, token = t.token, id]() -> Controller::Done {
          auto reply = controller().Report(report, token);
          if (!reply.ok()) Die(reply.status().ToString());
          if (reply->action() == hpo::v1::ReportResponse::ACTION_STOP) running_.erase(id);
          return nullptr;
        });
        it = last ? running_.erase(it) : std::next(it);
      }
      controller().RunOnce();
      absl::Time next = clock().Now() + absl::Seconds(problem_.steps * 2);
      for (const auto& [id, t] : running_) {
        next = std::min(next, t.start + absl::Seconds(t.factor * (t.step + 1)));
      }
      next = std::min(next, clock().Now() + absl::Milliseconds(100));
      clock().Set(std::max(next, clock().Now()));
    }
    running_.clear();
    return sweep->id();
  }

  Used UsedBy(int64_t id) {
    auto sweep = controller().GetSweep(Controller::AllowedForTest(), id);
    if (!sweep.ok()) Die(sweep.status().ToString());
    Used u;
    u.gpu_hours = sweep->gpu_seconds() / 3600;
    u.wall = static_cast<double>(sweep->ended_at().seconds() - sweep->created_at().seconds());
    hpo::v1::ListTrialsRequest req;
    req.set_sweep_id(id);
    auto trials = controller().ListTrials(Controller::AllowedForTest(), req);
    if (!trials.ok()) Die(trials.status().ToString());
    for (const auto& t : *trials) {
      u.trials += 1;
      u.steps += static_cast<double>(std::max<int64_t>(0, t.step()));
    }
    return u;
  }

  // The plan `--like` sweep `like`, or with `step_seconds` declared (like 0).
  hpo::v1::SweepEstimate Plan(const std::string& yaml, int64_t like, double step_seconds = 0) {
    hpo::v1::PlanSweepRequest req;
    req.set_spec_yaml(yaml);
    req.set_source("plan.yaml");
    req.set_base_dir(daemon_.root());
    req.set_like_sweep(like);
    req.set_steps(problem_.steps);  // a pilot's trials stop early: they do not show the length
    if (like == 0) req.set_step_seconds(step_seconds);
    auto plan = controller().Plan(Controller::AllowedForTest(), req);
    if (!plan.ok()) Die(plan.status().ToString());
    if (plan->errors_size() > 0) Die(plan->errors(0));
    return plan->estimate();
  }

 private:
  struct Trial {
    std::string token;
    Params params;
    absl::Time start;
    double factor = 1;
    int step = 0;
  };
  static hpo::fakes::TestDaemon::Options Options(int workers, const std::string& prefix) {
    hpo::fakes::TestDaemon::Options o;
    o.gpus = workers;
    o.slots = workers;
    o.durable = false;
    o.start = absl::FromUnixSeconds(1'800'000'000);
    o.tick = absl::Milliseconds(100);
    o.dir_prefix = prefix;
    return o;
  }
  [[noreturn]] static void Die(const std::string& why) {
    std::fprintf(stderr, "plan_bench: %s\n", why.c_str());
    std::exit(2);
  }
  const Problem& problem_;
  int workers_;
  hpo::fakes::TestDaemon daemon_;
  std::map<int64_t, Trial> running_;
};

std::string RangeText(const hpo::v1::EstimateRange& r, const char* fmt) {
  return absl::StrCat(absl::StrFormat(fmt, r.expected()), " (", absl::StrFormat(fmt, r.low()), "-",
                      absl::StrFormat(fmt, r.high()), ")");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("plan_bench: hpo plan's estimate against what the sweep used (simulated backend)");
  int trials = 60, workers = 4, seeds = 3;
  std::string problems = "hartmann6,table:bench/data/digits_mlp_curves.csv";
  app.add_option("--trials", trials, "trials of each sweep");
  app.add_option("--workers", workers, "GPUs, and trials at a time");
  app.add_option("--seeds", seeds, "runs of each method");
  app.add_option("--problems", problems, "comma-separated: hartmann6, table:PATH");
  int pilot_trials = 8, pilot_steps = 5;
  app.add_option("--pilot-trials", pilot_trials, "the pilot's trials (hpo plan --pilot)");
  app.add_option("--pilot-steps", pilot_steps, "steps each pilot trial runs");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  const std::vector<Method> methods = {
      {"random", "random", ""}, {"TPE", "tpe", ""}, {"random + ASHA", "random", "asha"}};
  std::printf(
      "| problem | method | seed | trials plan / used | steps plan | steps used | "
      "GPU-hours plan --pilot (range) | declared 1 s | GPU-hours used | error --pilot | "
      "error declared | wall plan (range) | wall used |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  struct Tally {
    std::vector<double> like_errors, declared_errors;
    double planned = 0, declared = 0, used = 0;
    int covered = 0;
  };
  std::map<std::string, Tally> tally;
  uint64_t problem_seed = 0;  // each problem draws configurations of its own
  for (const std::string& key : std::vector<std::string>(absl::StrSplit(problems, ','))) {
    problem_seed += 1000;
    Problem problem;
    if (key == "hartmann6") {
      problem = hpo::bench::Hartmann6Curve();
    } else if (key.rfind("table:", 0) == 0) {
      std::string path = key.substr(6);
      if (path[0] != '/') path = absl::StrCat(HPO_SOURCE_DIR, "/", path);
      auto loaded = hpo::bench::LoadTable(path, {}, {});
      if (!loaded.ok()) {
        std::fprintf(stderr, "plan_bench: %s\n", loaded.status().ToString().c_str());
        return 2;
      }
      problem = std::move(*loaded);
    } else {
      std::fprintf(stderr, "plan_bench: unknown problem '%s'\n", key.c_str());
      return 2;
    }
    for (const Method& m : methods) {
      for (int seed = 1; seed <= seeds; ++seed) {
        Bench bench(problem, workers, "hpo-plan-bench");
        std::string yaml = bench.Yaml("sweep", trials, m, problem_seed + seed);
        int64_t pilot = bench.Run(bench.Yaml("sweep", trials, m, problem_seed + seed + 100),
                                  pilot_trials, pilot_steps);
        hpo::v1::SweepEstimate plan = bench.Plan(yaml, pilot);
        // The mean step time of the trials' factors (0.5 to 1.5): what a user who knew it would
        // declare; the error left is the schedule's alone.
        hpo::v1::SweepEstimate declared = bench.Plan(yaml, 0, 1.0);
        Used used = bench.UsedBy(bench.Run(yaml));
        double like_error = (plan.gpu_hours().expected() - used.gpu_hours) / used.gpu_hours;
        double declared_error = (declared.gpu_hours().expected() - used.gpu_hours) / used.gpu_hours;
        Tally& t = tally[m.name];
        t.like_errors.push_back(std::abs(like_error));
        t.declared_errors.push_back(std::abs(declared_error));
        t.planned += plan.gpu_hours().expected();
        t.declared += declared.gpu_hours().expected();
        t.used += used.gpu_hours;
        t.covered +=
            used.gpu_hours >= plan.gpu_hours().low() && used.gpu_hours <= plan.gpu_hours().high();
        std::printf(
            "| %s | %s | %d | %.0f / %.0f | %s | %.0f | %s | %.3f | %.3f | %+.0f%% | "
            "%+.0f%% | %s | %.0f |\n",
            problem.name.c_str(), m.name.c_str(), seed, plan.trials().expected(), used.trials,
            RangeText(plan.steps(), "%.0f").c_str(), used.steps,
            RangeText(plan.gpu_hours(), "%.3f").c_str(), declared.gpu_hours().expected(),
            used.gpu_hours, 100 * like_error, 100 * declared_error,
            RangeText(plan.wall_seconds(), "%.0f").c_str(), used.wall);
        std::fflush(stdout);
      }
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::printf(
      "\n| method | runs | GPU-hours: plan / used over all runs (--pilot) | declared 1 s | "
      "median error --pilot | median error declared | largest error --pilot | used within the "
      "--pilot range |\n|---|---|---|---|---|---|---|---|\n");
  for (const Method& m : methods) {
    const Tally& t = tally[m.name];
    const size_t n = t.like_errors.size();
    std::printf("| %s | %zu | %+.0f%% | %+.0f%% | %.0f%% | %.0f%% | %.0f%% | %d of %zu |\n",
                m.name.c_str(), n, 100 * (t.planned / t.used - 1), 100 * (t.declared / t.used - 1),
                100 * median(t.like_errors), 100 * median(t.declared_errors),
                100 * (n ? *std::max_element(t.like_errors.begin(), t.like_errors.end()) : 0),
                t.covered, n);
  }
  return 0;
}
