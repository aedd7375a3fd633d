// search_quality: how fast each search method finds a good configuration, in virtual time, side
// by side with Optuna 3.1 on the same problems with the same simulated parallelism.
//
// Each hpod run is a real sweep: the controller with its SQLite store and trial directories, and
// the simulated backend with W slots in virtual time, where one epoch costs one second. A trial
// reports its value after every epoch over the controller's report path (up to 27 epochs) and
// honours a stop at once. Problems: (a) Hartmann-6 with an analytic learning curve whose speed
// depends on the configuration (so early epochs mislead a little); (b) a table of real learning
// curves, scikit-learn's MLP on the digits data (bench/data/digits_mlp_curves.csv, made once by
// bench/make_curves.py); suggestions snap to the table's grid. Regret: best value seen so far
// minus the problem's best. bench/optuna_quality.py runs Optuna's TPE with its
// SuccessiveHalving and Hyperband pruners through the same event loop. Prints markdown tables:
// median [quartiles] over seeds, and each hpod method's budget to reach Optuna's final regret.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "algorithms/search_space.h"
#include "bench/functions.h"
#include "common/clock.h"
#include "server/controller.h"
#include "spdlog/spdlog.h"
#include "tests/fakes/test_daemon.h"

namespace {

using hpo::algorithms::ParamDef;
using hpo::algorithms::Params;
using hpo::algorithms::ParamType;
using hpo::algorithms::ParamValue;
using hpo::algorithms::SearchSpace;

constexpr int kEpochs = 27;

struct Problem {
  std::string name;
  SearchSpace space;
  std::function<double(const Params&, int epoch)> value;  // minimized
  double best = 0;
};

double Num(const Params& p, const std::string& k) {
  return *hpo::algorithms::NumericValue(p.at(k));
}

// Hartmann-6 whose value approaches H6(x) as 2 exp(-epoch (0.5 + x1) / 9): configurations with a
// small x1 learn slowly and look worse early than they end.
Problem Hartmann6Curve() {
  Problem p;
  p.name = "Hartmann-6 with learning curves (synthetic)";
  for (int i = 1; i <= 6; ++i)
    p.space.params.push_back({"x" + std::to_string(i),
                              ParamType::kFloat,
                              0,
                              1,
                              false,
                              std::nullopt,
                              {},
                              {},
                              std::nullopt});
  p.value = [](const Params& x, int epoch) {
    double h = hpo::bench::Hartmann6(x);
    return h + 2.0 * std::exp(-epoch * (0.5 + Num(x, "x1")) / 9.0);
  };
  // The optimum's x1 is 0.2017: its curve ends 2 exp(-27 * 0.7017 / 9) above H6's minimum.
  p.best = -3.32237 + 2.0 * std::exp(-kEpochs * 0.7017 / 9.0);
  return p;
}

// The digits MLP table: config -> val_acc per epoch; the value is 1 - val_acc.
Problem DigitsTable(const std::string& path) {
  Problem p;
  p.name = "scikit-learn MLP on digits (real learning curves, 180 configurations)";
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s (make it with bench/make_curves.py)\n", path.c_str());
    std::exit(2);
  }
  struct Key {
    double lr, hidden, alpha, batch;
    auto operator<=>(const Key&) const = default;
  };
  auto curves = std::make_shared<std::map<Key, std::vector<double>>>();
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == 'c') continue;
    std::vector<std::string> f = absl::StrSplit(line, ',');
    if (f.size() != 7) continue;
    Key k{};
    double epoch = 0, acc = 0;
    if (!absl::SimpleAtod(f[1], &k.lr) || !absl::SimpleAtod(f[2], &k.hidden) ||
        !absl::SimpleAtod(f[3], &k.alpha) || !absl::SimpleAtod(f[4], &k.batch) ||
        !absl::SimpleAtod(f[5], &epoch) || !absl::SimpleAtod(f[6], &acc)) {
      continue;
    }
    auto& c = (*curves)[k];
    c.resize(kEpochs, 1.0);
    c[static_cast<size_t>(epoch) - 1] = 1.0 - acc;
  }
  std::vector<double> lrs, hiddens, alphas, batches;
  p.best = 1.0;
  for (const auto& [k, c] : *curves) {
    lrs.push_back(k.lr);
    hiddens.push_back(k.hidden);
    alphas.push_back(k.alpha);
    batches.push_back(k.batch);
    for (double v : c) p.best = std::min(p.best, v);
  }
  for (auto* v : {&lrs, &hiddens, &alphas, &batches}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  p.space.params.push_back(
      {"lr", ParamType::kFloat, lrs.front(), lrs.back(), true, std::nullopt, {}, {}, std::nullopt});
  p.space.params.push_back({"hidden",
                            ParamType::kInt,
                            hiddens.front(),
                            hiddens.back(),
                            true,
                            std::nullopt,
                            {},
                            {},
                            std::nullopt});
  p.space.params.push_back({"alpha",
                            ParamType::kFloat,
                            alphas.front(),
                            alphas.back(),
                            true,
                            std::nullopt,
                            {},
                            {},
                            std::nullopt});
  std::vector<ParamValue> bs;
  for (double b : batches) bs.push_back(static_cast<int64_t>(b));
  p.space.params.push_back(
      {"batch", ParamType::kCategorical, 0, 0, false, std::nullopt, bs, {}, std::nullopt});
  // A suggestion is the grid point nearest in log space.
  auto snap = [](const std::vector<double>& grid, double v) {
    double best = grid.front();
    for (double g : grid) {
      if (std::abs(std::log(g) - std::log(v)) < std::abs(std::log(best) - std::log(v))) best = g;
    }
    return best;
  };
  p.value = [=](const Params& x, int epoch) {
    Key k{snap(lrs, Num(x, "lr")), snap(hiddens, Num(x, "hidden")), snap(alphas, Num(x, "alpha")),
          Num(x, "batch")};
    return curves->at(k)[static_cast<size_t>(epoch) - 1];
  };
  return p;
}

struct Method {
  std::string name;
  std::string algorithm;  // the sweep file's `algorithm:` value
  std::string stopper;    // its `early_stopping:` value
};

// The sweep file's `parameters:` for a space.
std::string ParametersYaml(const SearchSpace& space) {
  std::string out = "parameters:\n";
  for (const ParamDef& p : space.params) {
    if (p.type == ParamType::kCategorical) {
      std::vector<std::string> v;
      for (const ParamValue& c : p.choices) v.push_back(hpo::algorithms::FormatValue(c));
      absl::StrAppend(&out, "  ", p.name, ": {type: categorical, values: [", absl::StrJoin(v, ", "),
                      "]}\n");
    } else {
      absl::StrAppend(&out, "  ", p.name, ": {type: ", p.type == ParamType::kInt ? "int" : "float",
                      ", low: ", hpo::algorithms::FormatValue(p.low),
                      ", high: ", hpo::algorithms::FormatValue(p.high), p.log ? ", log: true" : "",
                      "}\n");
    }
  }
  return out;
}

// A trial's parameters, read back from its `--name=value` arguments.
Params ParamsFromArgv(const SearchSpace& space, const std::vector<std::string>& argv) {
  Params out;
  for (const std::string& arg : argv) {
    auto eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) continue;
    std::string name = arg.substr(2, eq - 2), text = arg.substr(eq + 1);
    for (const ParamDef& p : space.params) {
      if (p.name != name) continue;
      if (p.type == ParamType::kCategorical) {
        for (const ParamValue& c : p.choices) {
          if (hpo::algorithms::FormatValue(c) == text) out[name] = c;
        }
      } else if (p.type == ParamType::kInt) {
        int64_t v = 0;
        if (absl::SimpleAtoi(text, &v)) out[name] = v;
      } else {
        double v = 0;
        if (absl::SimpleAtod(text, &v)) out[name] = v;
      }
    }
  }
  return out;
}

// Best regret after each epoch spent: (epochs spent, virtual time, regret).
struct Point {
  double spent, time, regret;
};

// One run: a real controller with its SQLite store and trial directories, and the simulated
// backend with W slots in virtual time. A trial reports its value after each epoch (one virtual
// second) and ends after kEpochs; told to stop, it stops at once (stop_grace 0). Returns after
// `budget` epochs.
std::vector<Point> Simulate(const Problem& problem, const Method& method, int workers,
                            uint64_t seed, int budget, const std::string& dir_prefix) {
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
  daemon.set_script([&](const hpo::backend::LaunchSpec& spec) {
    running[spec.trial_id] = {spec.env.at("HPO_TRIAL_TOKEN"),
                              ParamsFromArgv(problem.space, spec.argv), clock.Now()};
    hpo::backend::SimulatedFate fate;
    fate.run_time = absl::Seconds(kEpochs) + absl::Milliseconds(1);
    return fate;
  });
  daemon.simulated().keep_launched(false);
  hpo::server::Controller& controller = daemon.controller();
  hpo::v1::SubmitSweepRequest req;
  req.set_spec_yaml(absl::StrCat(
      "name: quality\ncommand: [train]\npass_params: flags\n", ParametersYaml(problem.space),
      "objective: {metric: value, direction: minimize}\n",
      "budget: {max_trials: 100000, max_concurrent: ", workers, "}\n",
      "algorithm: ", method.algorithm, "\nearly_stopping: ", method.stopper,
      "\nstop_grace: 0s\nseed: ", seed, "\n"));
  req.set_source("quality.yaml");
  req.set_base_dir(daemon.root());
  if (auto sweep = controller.Submit(req); !sweep.ok()) {
    std::fprintf(stderr, "search_quality: %s\n", sweep.status().ToString().c_str());
    std::exit(2);
  }
  std::vector<Point> out;
  double best = INFINITY;
  int spent = 0;
  while (spent < budget) {
    // Every trial whose next epoch is done reports it; a stop is honoured at once.
    for (auto it = running.begin(); it != running.end() && spent < budget;) {
      Running& r = it->second;
      if (clock.Now() < r.start + absl::Seconds(r.epoch + 1)) {
        ++it;
        continue;
      }
      int epoch = ++r.epoch;
      double y = problem.value(r.params, epoch);
      ++spent;
      best = std::min(best, y);
      out.push_back({static_cast<double>(spent), absl::ToDoubleSeconds(clock.Now() - t0),
                     best - problem.best});
      hpo::v1::ReportRequest report;
      report.set_trial_id(it->first);
      report.set_step(epoch);
      (*report.mutable_metrics())["value"] = y;
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
      // After its last epoch the trial exits (the backend ends it a moment later).
      it = epoch >= kEpochs ? running.erase(it) : std::next(it);
    }
    controller.RunOnce();
    // Until every slot runs a trial the controller needs its ticks; then on to the next report.
    absl::Time next = clock.Now() + absl::Seconds(kEpochs);
    for (const auto& [id, r] : running) next = std::min(next, r.start + absl::Seconds(r.epoch + 1));
    if (static_cast<int>(running.size()) < workers)
      next = std::min(next, clock.Now() + absl::Milliseconds(1));
    if (controller.AllSweepsEnded()) break;
    clock.Set(std::max(next, clock.Now()));
  }
  return out;
}

double RegretAt(const std::vector<Point>& pts, double x, bool by_time) {
  double r = INFINITY;
  for (const Point& p : pts) {
    if ((by_time ? p.time : p.spent) > x + 1e-9) break;
    r = p.regret;
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

// One method's regrets: [checkpoint][seed].
using Results = std::map<std::string, std::vector<std::vector<Point>>>;

void Table(const Problem& problem, int workers, int budget, const Results& results, bool by_time) {
  double horizon = by_time ? static_cast<double>(budget) / workers : budget;
  std::vector<double> marks = {horizon / 8, horizon / 4, horizon / 2, horizon};
  std::printf("\n%s, W = %d: regret (median [q1, q3] over %zu seeds) after %s\n\n",
              problem.name.c_str(), workers, results.begin()->second.size(),
              by_time ? "simulated wall time (epoch = 1)" : "epochs spent");
  std::printf("| method |");
  for (double m : marks) std::printf(" %s %.0f |", by_time ? "t =" : "", m);
  std::printf("\n|---|");
  for (size_t i = 0; i < marks.size(); ++i) std::printf("---:|");
  std::printf("\n");
  for (const auto& [name, runs] : results) {
    std::printf("| %s |", name.c_str());
    for (double m : marks) {
      std::vector<double> r;
      for (const auto& run : runs) r.push_back(RegretAt(run, m, by_time));
      Stats s = Quartiles(r);
      std::printf(" %.4f [%.4f, %.4f] |", s.median, s.q1, s.q3);
    }
    std::printf("\n");
  }
}

// Epochs the method needs for its median regret (over seeds) to reach `target`; -1 if never.
double BudgetToReach(const std::vector<std::vector<Point>>& runs, double target, int budget) {
  for (int b = 1; b <= budget; ++b) {
    std::vector<double> r;
    for (const auto& run : runs) r.push_back(RegretAt(run, b, false));
    if (Quartiles(r).median <= target + 1e-12) return b;
  }
  return -1;
}

// Optuna's runs, from bench/optuna_quality.py: lines "method seed spent time regret".
Results RunOptuna(const std::string& src, const std::string& problem, int workers, int seeds,
                  int budget) {
  Results out;
  std::string cmd = absl::StrCat("/usr/bin/python3 ", src, "/bench/optuna_quality.py --problem ",
                                 problem, " --workers ", workers, " --seeds ", seeds, " --budget ",
                                 budget, " --table ", src, "/bench/data/digits_mlp_curves.csv");
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[512];
  std::map<std::string, std::map<int, std::vector<Point>>> runs;
  while (std::fgets(buf, sizeof(buf), f) != nullptr) {
    std::istringstream in(buf);
    std::string method;
    int seed;
    Point p;
    if (in >> method >> seed >> p.spent >> p.time >> p.regret) {
      std::replace(method.begin(), method.end(), '_', ' ');
      runs[method][seed].push_back(p);
    }
  }
  ::pclose(f);
  for (auto& [m, by_seed] : runs) {
    for (auto& [s, pts] : by_seed) out[m].push_back(std::move(pts));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"search_quality: regret against budget and simulated wall time, hpod vs Optuna 3.1"};
  std::string src = HPO_SOURCE_DIR;
  int seeds = 10, budget = 1000;
  std::vector<int> workers = {1, 8};
  bool no_optuna = false;
  std::vector<std::string> only = {"hartmann6", "digits"};
  app.add_option("--problems", only, "hartmann6, digits")->capture_default_str();
  app.add_option("--src", src, "source tree (bench/optuna_quality.py, bench/data)");
  app.add_option("--seeds", seeds, "seeds per method")->capture_default_str();
  app.add_option("--budget", budget, "epochs per run")->capture_default_str();
  app.add_option("--workers", workers, "simulated workers (several runs)")->capture_default_str();
  app.add_flag("--no-optuna", no_optuna, "skip Optuna");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);  // the controller's per-trial log lines

  std::string asha = "{name: asha, min_resource: 1, max_resource: 27, reduction_factor: 3}";
  std::string hyperband =
      "{name: hyperband, min_resource: 1, max_resource: 27, reduction_factor: 3, brackets: 3}";
  std::vector<Method> methods = {
      {"hpod random", "random", "none"},
      {"hpod random + ASHA", "random", asha},
      {"hpod random + Hyperband", "random", hyperband},
      {"hpod genetic", "{name: genetic, population: 16}", "none"},
      {"hpod TPE", "{name: tpe}", "none"},
      {"hpod TPE + ASHA", "{name: tpe}", asha},
      {"hpod TPE + Hyperband", "{name: tpe}", hyperband},
      {"hpod genetic + ASHA", "{name: genetic, population: 16}", asha},
      {"hpod TPE univariate + ASHA", "{name: tpe, multivariate: false}", asha},
      // Optuna's side runs SuccessiveHalving with the same bootstrap_count.
      {"hpod TPE + ASHA bootstrap 5", "{name: tpe}",
       "{name: asha, min_resource: 1, max_resource: 27, reduction_factor: 3, bootstrap: 5}"}};
  std::string root = "hpo-quality";  // each run's data directory: a temp dir of this prefix
  std::vector<std::pair<std::string, Problem>> problems;
  for (const std::string& key : only) {
    if (key == "hartmann6")
      problems.emplace_back(key, Hartmann6Curve());
    else if (key == "digits")
      problems.emplace_back(key, DigitsTable(src + "/bench/data/digits_mlp_curves.csv"));
    else
      return std::fprintf(stderr, "unknown problem %s\n", key.c_str()), 2;
  }
  for (const auto& [key, problem] : problems) {
    for (int w : workers) {
      Results results;
      for (const Method& m : methods) {
        for (int s = 1; s <= seeds; ++s) {
          results[m.name].push_back(
              Simulate(problem, m, w, static_cast<uint64_t>(s), budget, root));
        }
      }
      Results optuna;
      if (!no_optuna) {
        optuna = RunOptuna(src, key, w, seeds, budget);
        for (auto& [name, runs] : optuna) results[name] = runs;
      }
      Table(problem, w, budget, results, false);
      Table(problem, w, budget, results, true);
      if (optuna.empty()) continue;
      // The target: our best method against Optuna's best, at Optuna's full budget.
      auto final_median = [&](const std::vector<std::vector<Point>>& runs) {
        std::vector<double> r;
        for (const auto& run : runs) r.push_back(RegretAt(run, budget, false));
        return Quartiles(r).median;
      };
      std::string best_optuna;
      for (const auto& [name, runs] : optuna) {
        if (best_optuna.empty() || final_median(runs) < final_median(optuna[best_optuna]))
          best_optuna = name;
      }
      double target = final_median(optuna[best_optuna]);
      // Every hpod method against Optuna's best: the budget it needs to reach Optuna's final
      // regret, and where it ends. "Best" is the method that gets there soonest.
      std::printf(
          "\nW = %d: Optuna's best is %s, median final regret %.4f after %d epochs. Each hpod "
          "method:\n\n",
          w, best_optuna.c_str(), target, budget);
      std::printf(
          "| hpod method | final regret (median) | epochs to reach %.4f | share of Optuna's budget "
          "|\n",
          target);
      std::printf("|---|---:|---:|---:|\n");
      std::string best_ours;
      double best_need = -1;
      for (const Method& m : methods) {
        double need = BudgetToReach(results[m.name], target, budget);
        std::printf("| %s | %.4f | %s | %s |\n", m.name.c_str(), final_median(results[m.name]),
                    need < 0 ? "never" : absl::StrFormat("%.0f", need).c_str(),
                    need < 0 ? "-" : absl::StrFormat("%.0f%%", 100 * need / budget).c_str());
        if (need >= 0 && (best_need < 0 || need < best_need)) best_need = need, best_ours = m.name;
      }
      if (best_ours.empty()) {
        std::printf(
            "\nW = %d: no hpod method reaches %.4f within %d epochs (target: within 50%%)\n", w,
            target, budget);
      } else {
        std::printf(
            "\nW = %d: hpod's best (%s) reaches Optuna's final regret %.4f after %.0f epochs "
            "(%.0f%% of "
            "Optuna's budget; target <= 50%%) and ends at %.4f\n",
            w, best_ours.c_str(), target, best_need, 100 * best_need / budget,
            final_median(results[best_ours]));
      }
    }
  }
  return 0;
}
