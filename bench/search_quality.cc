// search_quality: how fast each search method finds good configurations, in virtual time, side
// by side with Optuna 3.1 on the same problems with the same simulated parallelism.
//
// Each hpod run is a real sweep: the controller with its SQLite store and trial directories, and
// the simulated backend with W slots in virtual time, where one step (epoch) costs one second. A
// trial reports its objectives after every step (up to the problem's last) over the
// controller's report path and honours a stop at once. Problems (bench/problems.h): synthetic
// functions with learning curves (Hartmann-6; ZDT1 and DTLZ2 with two and three objectives) and
// any table of real learning curves in the CSV format of bench/README.md (the digits MLP table,
// and gradient-boosted trees on breast cancer with two objectives). bench/optuna_quality.py runs
// Optuna through the same event loop on the same problems and prints each step's values; both
// sides are scored here alike: regret (one objective) or the hypervolume gap (several). ASHA's
// and Hyperband's rungs span the problem's steps on both sides. Prints markdown tables per
// problem, W and budget: median [quartiles] over seeds at budget marks, and each hpod method
// (hpod's default among them) read against Optuna's default and Optuna's best: where it ends,
// and the budget it needs to reach each one's final score.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "algorithms/search_space.h"
#include "bench/problems.h"
#include "common/clock.h"
#include "server/core/controller.h"
#include "spdlog/spdlog.h"
#include "tests/fakes/test_daemon.h"

namespace {

using hpo::algorithms::ParamDef;
using hpo::algorithms::Params;
using hpo::algorithms::ParamType;
using hpo::algorithms::ParamValue;
using hpo::algorithms::SearchSpace;
using hpo::bench::ObjectivesYaml;
using hpo::bench::ParametersYaml;
using hpo::bench::ParamsFromArgv;
using hpo::bench::Problem;

struct Method {
  std::string name;
  std::string algorithm;  // the sweep file's `algorithm:` value; empty: not given
  std::string stopper;    // its `early_stopping:` value; empty: not given
};

// The score after each step spent: (steps spent, virtual time, score; lower is better).
struct Point {
  double spent, time, score;
};
using Run = std::vector<Point>;

// One run: a real controller with its SQLite store and trial directories, and the simulated
// backend with W slots in virtual time. A trial reports its values after each step (one virtual
// second) and ends after the last; told to stop, it stops at once (stop_grace 0). Returns after
// `budget` steps.
Run Simulate(const Problem& problem, const Method& method, int workers, uint64_t seed, int budget,
             const std::string& dir_prefix) {
  hpo::fakes::TestDaemon::Options daemon_options;
  daemon_options.gpus = 0;
  daemon_options.slots = workers;
  daemon_options.durable = false;  // virtual time: fsync would only slow the run
  daemon_options.start = absl::FromUnixSeconds(1'800'000'000);
  daemon_options.tick = absl::Milliseconds(1);
  daemon_options.dir_prefix = dir_prefix;
  hpo::fakes::TestDaemon daemon(daemon_options);
  hpo::FakeClock& clock = daemon.clock();
  const absl::Time t0 = clock.Now();
  struct Running {
    std::string token;
    Params params;
    absl::Time start;
    int epoch = 0;
  };
  std::map<int64_t, Running> running;
  const int steps = problem.steps;
  daemon.set_script([&](const hpo::backend::LaunchSpec& spec) {
    running[spec.trial_id] = {spec.env.at("HPO_TRIAL_TOKEN"),
                              ParamsFromArgv(problem.space, spec.argv), clock.Now()};
    hpo::backend::SimulatedFate fate;
    fate.run_time = absl::Seconds(steps) + absl::Milliseconds(1);
    return fate;
  });
  daemon.simulated().keep_launched(false);
  hpo::server::Controller& controller = daemon.controller();
  hpo::v1::SubmitSweepRequest req;
  req.set_spec_yaml(absl::StrCat(
      "name: quality\ncommand: [train]\npass_params: flags\n", ParametersYaml(problem.space),
      ObjectivesYaml(problem), "budget: {max_trials: 100000, max_concurrent: ", workers, "}\n",
      method.algorithm.empty() ? "" : absl::StrCat("algorithm: ", method.algorithm, "\n"),
      method.stopper.empty() ? "" : absl::StrCat("early_stopping: ", method.stopper, "\n"),
      "stop_grace: 0s\nseed: ", seed, "\n"));
  req.set_source("quality.yaml");
  req.set_base_dir(daemon.root());
  if (auto sweep = controller.Submit(hpo::server::Controller::AllowedForTest(), req); !sweep.ok()) {
    std::fprintf(stderr, "search_quality: %s\n", sweep.status().ToString().c_str());
    std::exit(2);
  }
  Run out;
  hpo::bench::Score score(problem);
  int spent = 0;
  while (spent < budget) {
    // Every trial whose next step is done reports it; a stop is honoured at once.
    for (auto it = running.begin(); it != running.end() && spent < budget;) {
      Running& r = it->second;
      if (clock.Now() < r.start + absl::Seconds(r.epoch + 1)) {
        ++it;
        continue;
      }
      int epoch = ++r.epoch;
      std::vector<double> values = problem.value(r.params, epoch);
      ++spent;
      out.push_back(
          {static_cast<double>(spent), absl::ToDoubleSeconds(clock.Now() - t0), score.Add(values)});
      hpo::v1::ReportRequest report;
      report.set_trial_id(it->first);
      report.set_step(epoch);
      for (size_t j = 0; j < values.size(); ++j) {
        (*report.mutable_metrics())[problem.metrics[j]] = values[j];
      }
      int64_t id = it->first;
      controller.Post(
          [&controller, &running, report, token = r.token, id]() -> hpo::server::Controller::Done {
            auto reply = controller.Report(report, token);
            if (!reply.ok()) {
              std::fprintf(stderr, "search_quality: report refused: %s\n",
                           reply.status().ToString().c_str());
              std::exit(2);
            }
            if (reply->action() == hpo::v1::ReportResponse::ACTION_STOP) running.erase(id);
            return nullptr;
          });
      // After its last step the trial exits (the backend ends it a moment later).
      it = epoch >= steps ? running.erase(it) : std::next(it);
    }
    controller.RunOnce();
    // Until every slot runs a trial the controller needs its ticks; then on to the next report.
    absl::Time next = clock.Now() + absl::Seconds(steps);
    for (const auto& [id, r] : running) next = std::min(next, r.start + absl::Seconds(r.epoch + 1));
    if (static_cast<int>(running.size()) < workers)
      next = std::min(next, clock.Now() + absl::Milliseconds(1));
    if (controller.AllSweepsEnded()) break;
    clock.Set(std::max(next, clock.Now()));
  }
  return out;
}

double ScoreAt(const Run& pts, double x, bool by_time) {
  double r = INFINITY;
  for (const Point& p : pts) {
    if ((by_time ? p.time : p.spent) > x + 1e-9) break;
    r = p.score;
  }
  return r;
}

struct Stats {
  double q1, median, q3;
};
Stats Quartiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    double pos = q * static_cast<double>(v.size() - 1);
    size_t lo = static_cast<size_t>(std::floor(pos));
    size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  return {at(0.25), at(0.5), at(0.75)};
}

// Each method's runs, one per seed.
using Results = std::map<std::string, std::vector<Run>>;

// What the tables show: regret, or the hypervolume (the problem's front's volume minus the gap).
double Shown(const Problem& problem, double score) {
  return problem.multi() ? problem.best - score : score;
}

void Table(const Problem& problem, int workers, int budget, const Results& results, bool by_time) {
  double horizon = by_time ? static_cast<double>(budget) / workers : budget;
  std::vector<double> marks = {horizon / 8, horizon / 4, horizon / 2, horizon};
  std::printf(
      "\n%s, W = %d: %s (median [q1, q3] over %zu seeds) after %s\n\n", problem.name.c_str(),
      workers,
      problem.multi() ? absl::StrFormat("hypervolume (the front's: %.4f)", problem.best).c_str()
                      : "regret",
      results.begin()->second.size(), by_time ? "simulated wall time (step = 1)" : "steps spent");
  std::printf("| method |");
  for (double m : marks) std::printf(" %s %.0f |", by_time ? "t =" : "", m);
  std::printf("\n|---|");
  for (size_t i = 0; i < marks.size(); ++i) std::printf("---:|");
  std::printf("\n");
  for (const auto& [name, runs] : results) {
    std::printf("| %s |", name.c_str());
    for (double m : marks) {
      std::vector<double> r;
      for (const auto& run : runs) r.push_back(Shown(problem, ScoreAt(run, m, by_time)));
      Stats s = Quartiles(r);
      std::printf(" %.4f [%.4f, %.4f] |", s.median, s.q1, s.q3);
    }
    std::printf("\n");
  }
}

double FinalMedian(const std::vector<Run>& runs, int budget) {
  std::vector<double> r;
  for (const auto& run : runs) r.push_back(ScoreAt(run, budget, false));
  return Quartiles(r).median;
}

// Steps the method needs for its median score (over seeds) to reach `target`; -1 if never.
double BudgetToReach(const std::vector<Run>& runs, double target, int budget) {
  for (int b = 1; b <= budget; ++b) {
    std::vector<double> r;
    for (const auto& run : runs) r.push_back(ScoreAt(run, b, false));
    if (Quartiles(r).median <= target + 1e-12) return b;
  }
  return -1;
}

// Optuna's runs, from bench/optuna_quality.py: lines "method seed spent time value...", scored
// here as hpod's are.
Results RunOptuna(const std::string& src, const Problem& problem, const std::string& problem_args,
                  int workers, int seeds, int budget) {
  Results out;
  std::string cmd =
      absl::StrCat("/usr/bin/python3 ", src, "/bench/optuna_quality.py ", problem_args,
                   " --workers ", workers, " --seeds ", seeds, " --budget ", budget);
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) {
    std::fprintf(stderr, "search_quality: cannot run %s\n", cmd.c_str());
    std::exit(2);
  }
  char buf[1024];
  std::map<std::string, std::map<int, std::pair<hpo::bench::Score, Run>>> runs;
  while (std::fgets(buf, sizeof(buf), f) != nullptr) {
    std::istringstream in(buf);
    std::string method;
    int seed;
    Point p;
    std::vector<double> values(problem.metrics.size());
    if (!(in >> method >> seed >> p.spent >> p.time)) continue;
    bool ok = true;
    for (double& v : values) ok = ok && static_cast<bool>(in >> v);
    if (!ok) continue;
    std::replace(method.begin(), method.end(), '_', ' ');
    auto [it, added] = runs[method].try_emplace(seed, hpo::bench::Score(problem), Run());
    p.score = it->second.first.Add(values);
    it->second.second.push_back(p);
  }
  // A failed peer run is an error, never a table with Optuna's rows missing.
  if (int status = ::pclose(f); status != 0 || runs.empty()) {
    std::fprintf(stderr, "search_quality: Optuna's run failed (%s): %s\n",
                 status != 0 ? absl::StrCat("exit status ", WEXITSTATUS(status)).c_str()
                             : "it printed no results",
                 cmd.c_str());
    std::exit(2);
  }
  for (auto& [m, by_seed] : runs) {
    for (auto& [s, scored] : by_seed) out[m].push_back(std::move(scored.second));
  }
  return out;
}

// Random search: every table's regret is also read as a share of its (normalized regret).
constexpr char kRandom[] = "hpod random";

// Optuna's default: what a user of Optuna gets without choosing (TPE, no pruner).
std::string OptunaDefault(const Problem& problem) {
  return problem.multi() ? "Optuna MOTPE" : "Optuna TPE (default, no pruner)";
}

// Every hpod method against two of Optuna's: its default, and its best configuration on this
// problem (the lowest median final score). Per method: where it ends, and the steps it needs for
// its median to reach each one's final score, as a share of the budget. For several objectives
// also the best method with early stopping against the best without, at the same budget.
void Summary(const Problem& problem, int w, int budget, const std::vector<Method>& methods,
             const Results& results, const Results& optuna) {
  const char* what = problem.multi() ? "hypervolume" : "regret";
  std::string best_optuna;
  for (const auto& [name, runs] : optuna) {
    if (best_optuna.empty() ||
        FinalMedian(runs, budget) < FinalMedian(optuna.at(best_optuna), budget))
      best_optuna = name;
  }
  const std::string default_optuna = OptunaDefault(problem);
  if (!optuna.count(default_optuna)) {
    std::fprintf(stderr, "search_quality: Optuna's run has no %s\n", default_optuna.c_str());
    std::exit(2);
  }
  double best = FinalMedian(optuna.at(best_optuna), budget);
  double plain = FinalMedian(optuna.at(default_optuna), budget);
  std::printf(
      "\n%s, W = %d, budget %d: Optuna's default (%s) ends at %s %.4f; Optuna's best (%s) at "
      "%.4f. Each hpod method:\n\n",
      problem.name.c_str(), w, budget, default_optuna.c_str(), what, Shown(problem, plain),
      best_optuna.c_str(), Shown(problem, best));
  // Regret as a share of random search's at the same budget (one objective): comparable across
  // problems, as published studies report it.
  const bool normalized = !problem.multi() && results.count(kRandom) > 0;
  const double random_final = normalized ? FinalMedian(results.at(kRandom), budget) : 0;
  auto normal = [&](double v) {
    return !normalized        ? std::string()
           : random_final > 0 ? absl::StrFormat(" %.3f |", v / random_final)
                              : std::string(" - |");
  };
  std::printf(
      "| hpod method | final %s (median) |%s reaches Optuna's default's after | reaches Optuna's "
      "best's after | at least as good as Optuna's best |\n",
      what, normalized ? " normalized (÷ hpod random's) |" : "");
  std::printf("|---|---:|%s---:|---:|---|\n", normalized ? "---:|" : "");
  if (normalized) {
    std::printf("| Optuna's default | %.4f |%s | | |\n| Optuna's best | %.4f |%s | | |\n",
                Shown(problem, plain), normal(plain).c_str(), Shown(problem, best),
                normal(best).c_str());
  }
  auto share = [&](const std::vector<Run>& runs, double target) -> std::string {
    double need = BudgetToReach(runs, target, budget);
    return need < 0 ? "never" : absl::StrFormat("%.0f (%.0f%%)", need, 100 * need / budget);
  };
  for (const Method& m : methods) {
    const std::vector<Run>& runs = results.at(m.name);
    double final = FinalMedian(runs, budget);
    std::printf("| %s | %.4f |%s %s | %s | %s |\n", m.name.c_str(), Shown(problem, final),
                normal(final).c_str(), share(runs, plain).c_str(), share(runs, best).c_str(),
                final <= best + 1e-12 ? "yes" : "no");
  }
  std::printf(
      "\n(targets: every hpod method's row is read against both; the default's should end at "
      "least as good as Optuna's best and reach Optuna's default's final result within 50%% of "
      "the budget)\n");
  if (!problem.multi()) return;
  // The best method with early stopping against the best without, at equal budget.
  std::string stopped, unstopped;
  for (const Method& m : methods) {
    if (m.stopper.empty()) continue;  // the default: neither
    std::string& slot = m.stopper == "none" ? unstopped : stopped;
    if (slot.empty() ||
        FinalMedian(results.at(m.name), budget) < FinalMedian(results.at(slot), budget)) {
      slot = m.name;
    }
  }
  if (stopped.empty() || unstopped.empty()) return;  // --methods left one side out
  double a = FinalMedian(results.at(stopped), budget);
  double b = FinalMedian(results.at(unstopped), budget);
  std::printf(
      "W = %d, budget %d: with early stopping the best is %s, hypervolume %.4f; without "
      "%s, %.4f (%s)\n",
      w, budget, stopped.c_str(), Shown(problem, a), unstopped.c_str(), Shown(problem, b),
      a <= b ? "early stopping at least as good" : "early stopping behind");
}

// hpod's methods on a problem. ASHA's and Hyperband's rungs span the problem's steps, as
// Optuna's Hyperband does (max_resource: its last step), with Hyperband's brackets as Optuna
// counts them (floor(log_3(max / min)) + 1).
std::vector<Method> Methods(const Problem& problem) {
  const int steps = problem.steps;
  int brackets = 1;
  for (int r = 3; r <= steps; r *= 3) ++brackets;
  std::string asha =
      absl::StrCat("{name: asha, min_resource: 1, max_resource: ", steps, ", reduction_factor: 3}");
  std::string asha_bootstrap = absl::StrCat("{name: asha, min_resource: 1, max_resource: ", steps,
                                            ", reduction_factor: 3, bootstrap: 5}");
  std::string asha_predictive = absl::StrCat("{name: asha, min_resource: 1, max_resource: ", steps,
                                             ", reduction_factor: 3, min_correlation: 0.5}");
  std::string asha_predictive_stop =
      absl::StrCat("{name: asha, min_resource: 1, max_resource: ", steps,
                   ", reduction_factor: 3, bootstrap: 5, min_correlation: 0.5, unmeasured: stop}");
  std::string hyperband = absl::StrCat("{name: hyperband, min_resource: 1, max_resource: ", steps,
                                       ", reduction_factor: 3, brackets: ", brackets, "}");
  // What a sweep file that names neither gets.
  const Method fallback = {"hpod default (no algorithm: or early_stopping: given)", "", ""};
  if (problem.multi()) {
    return {fallback,
            {"hpod random", "random", "none"},
            {"hpod random + MO-ASHA", "random", asha},
            {"hpod NSGA-II", "{name: nsga2, population: 16}", "none"},
            {"hpod NSGA-II + MO-ASHA", "{name: nsga2, population: 16}", asha},
            {"hpod MOTPE", "{name: tpe}", "none"},
            {"hpod MOTPE + MO-ASHA", "{name: tpe}", asha},
            {"hpod MOTPE + MO-Hyperband", "{name: tpe}", hyperband},
            {"hpod MOTPE univariate", "{name: tpe, multivariate: false}", "none"},
            {"hpod MOTPE univariate + MO-ASHA", "{name: tpe, multivariate: false}", asha},
            {"hpod GP (ParEGO)", "gp", "none"},
            {"hpod GP (ParEGO) + MO-ASHA", "gp", asha}};
  }
  return {fallback,
          {"hpod random", "random", "none"},
          {"hpod random + ASHA", "random", asha},
          {"hpod random + Hyperband", "random", hyperband},
          {"hpod genetic", "{name: genetic, population: 16}", "none"},
          {"hpod TPE", "{name: tpe}", "none"},
          {"hpod TPE + ASHA", "{name: tpe}", asha},
          {"hpod TPE + Hyperband", "{name: tpe}", hyperband},
          {"hpod GP", "gp", "none"},
          {"hpod GP + ASHA", "gp", asha},
          {"hpod GP + Hyperband", "gp", hyperband},
          {"hpod genetic + ASHA", "{name: genetic, population: 16}", asha},
          {"hpod TPE univariate + ASHA", "{name: tpe, multivariate: false}", asha},
          // Optuna's side runs SuccessiveHalving with the same bootstrap_count.
          {"hpod TPE + ASHA bootstrap 5", "{name: tpe}", asha_bootstrap},
          {"hpod random + ASHA predictive rungs", "random", asha_predictive},
          {"hpod TPE + ASHA predictive rungs", "{name: tpe}", asha_predictive},
          {"hpod TPE + ASHA bootstrap 5 (rungs off once shown not to predict)", "{name: tpe}",
           asha_predictive_stop},
          {"hpod random + ASHA bootstrap 5 (rungs off once shown not to predict)", "random",
           asha_predictive_stop}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "search_quality: regret or hypervolume against budget and simulated wall time, "
      "hpod vs Optuna 3.1"};
  std::string src = HPO_SOURCE_DIR;
  int seeds = 10;
  std::vector<int> budgets = {1000}, multi_budgets = {2700};
  std::vector<int> workers = {1, 8};
  bool no_optuna = false;
  std::vector<std::string> only = {"hartmann6", "digits", "zdt1", "dtlz2", "cancer"};
  std::vector<std::string> tables, directives, objectives;
  app.add_option("--problems", only,
                 "hartmann6, digits, zdt1, dtlz2, cancer (the tables in bench/data), or none (only "
                 "the --table ones)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--table", tables,
                 "more problems: tables of learning curves in the CSV format of bench/README.md");
  app.add_option("--directive", directives,
                 "for --table: 'param NAME float|int|categorical [log]', 'step NAME', 'metric "
                 "NAME minimize|maximize' (over the file's own)");
  app.add_option("--objectives", objectives,
                 "for --table: the metrics to optimize, as a,b or repeated (default: all)")
      ->delimiter(',');
  app.add_option("--src", src, "source tree (bench/optuna_quality.py, bench/data)");
  app.add_option("--seeds", seeds, "seeds per method")->capture_default_str();
  app.add_option("--budget", budgets,
                 "steps per run, one objective; several (1000,2000): each is scored, from one run "
                 "at the largest")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--multi-budget", multi_budgets, "steps per run, several objectives (as --budget)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--workers", workers, "simulated workers (several runs)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_flag("--no-optuna", no_optuna, "skip Optuna");
  std::vector<std::string> method_filter;
  app.add_option("--methods", method_filter,
                 "only these hpod methods (a,b), besides hpod's default and random search (the "
                 "yardstick of normalized regret): a method's whole name "
                 "selects it alone, another text every method whose name contains it, none only "
                 "the default (default: all)")
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);  // the controller's per-trial log lines

  // Each problem with the arguments that give the Optuna side the same one.
  std::vector<std::pair<Problem, std::string>> problems;
  auto table = [&](const std::string& path, const std::vector<std::string>& d,
                   const std::vector<std::string>& o) {
    absl::StatusOr<Problem> p = hpo::bench::LoadTable(path, d, o);
    if (!p.ok()) {
      std::fprintf(stderr, "search_quality: %s\n", std::string(p.status().message()).c_str());
      std::exit(2);
    }
    std::string args = absl::StrCat("--table ", path);
    for (const std::string& x : d) absl::StrAppend(&args, " --directive '", x, "'");
    if (!o.empty()) absl::StrAppend(&args, " --objectives ", absl::StrJoin(o, ","));
    problems.emplace_back(*std::move(p), args);
  };
  for (const std::string& key : only) {
    if (key == "hartmann6") {
      problems.emplace_back(hpo::bench::Hartmann6Curve(), "--problem hartmann6");
    } else if (key == "zdt1") {
      problems.emplace_back(hpo::bench::Zdt1Curve(), "--problem zdt1");
    } else if (key == "dtlz2") {
      problems.emplace_back(hpo::bench::Dtlz2Curve(), "--problem dtlz2");
    } else if (key == "digits") {
      table(src + "/bench/data/digits_mlp_curves.csv", {}, {});
    } else if (key == "cancer") {
      table(src + "/bench/data/cancer_gbt_curves.csv", {}, {"val_loss", "fit_seconds"});
    } else if (key != "none") {
      return std::fprintf(stderr, "search_quality: unknown problem %s\n", key.c_str()), 2;
    }
  }
  for (const std::string& path : tables) table(path, directives, objectives);

  // --methods: each text selects the method of that name, or else every method whose name
  // contains it; each must select one on some problem.
  std::set<std::string> names;
  for (const auto& [problem, optuna_args] : problems) {
    for (const Method& m : Methods(problem)) names.insert(m.name);
  }
  auto selects = [&](const std::string& f, const std::string& name) {
    return names.count(f) ? name == f : name.find(f) != std::string::npos;
  };
  for (const std::string& f : method_filter) {
    if (f == "none" || std::any_of(names.begin(), names.end(),
                                   [&](const std::string& n) { return selects(f, n); })) {
      continue;
    }
    std::fprintf(stderr, "search_quality: --methods '%s' names no hpod method here; they are: %s\n",
                 f.c_str(), absl::StrJoin(names, ", ").c_str());
    return 2;
  }
  std::string root = "hpo-quality";  // each run's data directory: a temp dir of this prefix
  for (const auto& [problem, optuna_args] : problems) {
    std::vector<Method> methods = Methods(problem);
    if (!method_filter.empty()) {
      std::erase_if(methods, [&](const Method& m) {
        if (m.algorithm.empty() && m.stopper.empty()) return false;  // hpod's default stays
        if (m.name == kRandom) return false;  // ... and random search, the regret's yardstick
        return std::none_of(method_filter.begin(), method_filter.end(),
                            [&](const std::string& f) { return selects(f, m.name); });
      });
    }
    std::vector<int> marks = problem.multi() ? multi_budgets : budgets;
    std::sort(marks.begin(), marks.end());
    const int b = marks.back();
    for (int w : workers) {
      Results results;
      for (const Method& m : methods) {
        for (int s = 1; s <= seeds; ++s) {
          results[m.name].push_back(Simulate(problem, m, w, static_cast<uint64_t>(s), b, root));
        }
      }
      Results optuna;
      if (!no_optuna) {
        optuna = RunOptuna(src, problem, optuna_args, w, seeds, b);
        for (auto& [name, runs] : optuna) results[name] = runs;
      }
      for (int budget : marks) {
        Table(problem, w, budget, results, false);
        Table(problem, w, budget, results, true);
        if (!optuna.empty()) Summary(problem, w, budget, methods, results, optuna);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
