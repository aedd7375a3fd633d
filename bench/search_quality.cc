// search_quality: how fast each search method finds a good configuration, in virtual time, side
// by side with Optuna 3.1 on the same problems with the same simulated parallelism.
//
// A cluster of W workers where one epoch costs one time unit. Each free worker starts the trial
// the method suggests; after every epoch the trial reports its value and the stopper decides
// whether it goes on (up to 27 epochs). Problems: (a) Hartmann-6 with an analytic learning curve
// whose speed depends on the configuration (so early epochs mislead a little); (b) a table of real
// learning curves, scikit-learn's MLP on the digits data (bench/data/digits_mlp_curves.csv, made
// once by bench/make_curves.py); suggestions snap to the table's grid. Regret: best value seen
// so far minus the problem's best. The methods run hpod's own Sampler and Stopper code (the code
// the controller calls); bench/optuna_quality.py runs Optuna's TPE with its SuccessiveHalving and
// Hyperband pruners through the same loop. Prints markdown tables: median [quartiles] over seeds.

#include <algorithm>
#include <cmath>
#include <cstdio>
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
#include "algorithms/sampler.h"
#include "algorithms/stopper.h"
#include "bench/functions.h"

namespace {

using hpo::algorithms::AlgorithmSpec;
using hpo::algorithms::Curve;
using hpo::algorithms::Direction;
using hpo::algorithms::HistoryEntry;
using hpo::algorithms::ParamDef;
using hpo::algorithms::Params;
using hpo::algorithms::ParamType;
using hpo::algorithms::ParamValue;
using hpo::algorithms::SearchSpace;
using hpo::algorithms::StopperSpec;

constexpr int kEpochs = 27;

struct Problem {
  std::string name;
  SearchSpace space;
  std::function<double(const Params&, int epoch)> value;  // minimized
  double best = 0;
};

double Num(const Params& p, const std::string& k) { return *hpo::algorithms::NumericValue(p.at(k)); }

// Hartmann-6 whose value approaches H6(x) as 2 exp(-epoch (0.5 + x1) / 9): configurations with a
// small x1 learn slowly and look worse early than they end.
Problem Hartmann6Curve() {
  Problem p;
  p.name = "Hartmann-6 with learning curves (synthetic)";
  for (int i = 1; i <= 6; ++i) p.space.params.push_back({"x" + std::to_string(i), ParamType::kFloat, 0, 1, false, std::nullopt, {}, {}});
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
    if (!absl::SimpleAtod(f[1], &k.lr) || !absl::SimpleAtod(f[2], &k.hidden) || !absl::SimpleAtod(f[3], &k.alpha) ||
        !absl::SimpleAtod(f[4], &k.batch) || !absl::SimpleAtod(f[5], &epoch) || !absl::SimpleAtod(f[6], &acc)) {
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
  p.space.params.push_back({"lr", ParamType::kFloat, lrs.front(), lrs.back(), true, std::nullopt, {}, {}});
  p.space.params.push_back({"hidden", ParamType::kInt, hiddens.front(), hiddens.back(), true, std::nullopt, {}, {}});
  p.space.params.push_back({"alpha", ParamType::kFloat, alphas.front(), alphas.back(), true, std::nullopt, {}, {}});
  std::vector<ParamValue> bs;
  for (double b : batches) bs.push_back(static_cast<int64_t>(b));
  p.space.params.push_back({"batch", ParamType::kCategorical, 0, 0, false, std::nullopt, bs, {}});
  // A suggestion is the grid point nearest in log space.
  auto snap = [](const std::vector<double>& grid, double v) {
    double best = grid.front();
    for (double g : grid) {
      if (std::abs(std::log(g) - std::log(v)) < std::abs(std::log(best) - std::log(v))) best = g;
    }
    return best;
  };
  p.value = [=](const Params& x, int epoch) {
    Key k{snap(lrs, Num(x, "lr")), snap(hiddens, Num(x, "hidden")), snap(alphas, Num(x, "alpha")), Num(x, "batch")};
    return curves->at(k)[static_cast<size_t>(epoch) - 1];
  };
  return p;
}

struct Method {
  std::string name;
  AlgorithmSpec algorithm;
  StopperSpec stopper;
};

// Best regret after each epoch spent: (epochs spent, virtual time, regret).
struct Point {
  double spent, time, regret;
};

std::vector<Point> Simulate(const Problem& problem, const Method& method, int workers, uint64_t seed, int budget) {
  auto sampler = *hpo::algorithms::MakeSampler(method.algorithm, problem.space);
  auto stopper = *hpo::algorithms::MakeStopper(method.stopper);
  std::vector<HistoryEntry> history;
  std::vector<std::vector<std::pair<int64_t, double>>> curves;
  curves.reserve(100000);
  struct Running {
    int64_t number;
    int epoch;
    double next;  // time its next epoch ends
  };
  std::vector<Running> running;
  std::vector<Point> out;
  double best = INFINITY;
  int spent = 0;
  double now = 0;
  while (spent < budget) {
    while (static_cast<int>(running.size()) < workers) {
      int64_t n = static_cast<int64_t>(history.size());
      hpo::algorithms::SuggestRequest req{&problem.space, &history, n, seed, Direction::kMinimize};
      auto params = sampler->Suggest(req);
      if (!params.ok() || !params->has_value()) std::exit(3);
      history.push_back({n, **params, false, std::nullopt});
      curves.emplace_back();
      // Like the controller: samplers see curves when the sweep keeps them (it has a stopper).
      if (method.stopper.name != "none") history.back().curve = &curves.back();
      running.push_back({n, 0, now + 1});
    }
    auto it = std::min_element(running.begin(), running.end(), [](const Running& a, const Running& b) {
      return a.next != b.next ? a.next < b.next : a.number < b.number;
    });
    now = it->next;
    int64_t n = it->number;
    int epoch = ++it->epoch;
    double y = problem.value(history[static_cast<size_t>(n)].params, epoch);
    curves[static_cast<size_t>(n)].emplace_back(epoch, y);
    ++spent;
    best = std::min(best, y);
    out.push_back({static_cast<double>(spent), now, best - problem.best});
    bool stop = epoch >= kEpochs;
    if (!stop) {
      Curve mine{n, curves[static_cast<size_t>(n)], false};
      std::vector<Curve> other_curves;
      other_curves.reserve(curves.size());
      for (size_t i = 0; i < curves.size(); ++i) {
        if (static_cast<int64_t>(i) != n) other_curves.push_back({static_cast<int64_t>(i), curves[i], history[i].finished});
      }
      std::vector<const Curve*> others;
      for (const Curve& c : other_curves) others.push_back(&c);
      stop = stopper->Decide(mine, others, Direction::kMinimize).decision == hpo::algorithms::Decision::kStop;
    }
    if (stop) {
      history[static_cast<size_t>(n)].finished = true;
      history[static_cast<size_t>(n)].objective = y;
      running.erase(it);
    } else {
      it->next = now + 1;
    }
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
  std::printf("\n%s, W = %d: regret (median [q1, q3] over %zu seeds) after %s\n\n", problem.name.c_str(), workers,
              results.begin()->second.size(), by_time ? "simulated wall time (epoch = 1)" : "epochs spent");
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
Results RunOptuna(const std::string& src, const std::string& problem, int workers, int seeds, int budget) {
  Results out;
  std::string cmd = absl::StrCat("/usr/bin/python3 ", src, "/bench/optuna_quality.py --problem ", problem,
                                 " --workers ", workers, " --seeds ", seeds, " --budget ", budget, " --table ", src,
                                 "/bench/data/digits_mlp_curves.csv");
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
  int tpe_startup = 10, min_resource = 1;
  app.add_option("--tpe-startup", tpe_startup, "hpod TPE's random trials before the model (Optuna's default is 10)")
      ->capture_default_str();
  app.add_option("--min-resource", min_resource, "first rung of hpod's ASHA / Hyperband")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  StopperSpec none;
  StopperSpec asha{"asha", 1, kEpochs, 3, 3, 1, 3};
  StopperSpec hyperband{"hyperband", 1, kEpochs, 3, 3, 1, 3};
  AlgorithmSpec random, tpe, genetic;
  tpe.name = "tpe";
  AlgorithmSpec tpe_univariate = tpe;
  tpe_univariate.tpe_multivariate = false;
  genetic.name = "genetic";
  genetic.population = 16;
  std::vector<Method> methods = {{"hpod random", random, none},       {"hpod random + ASHA", random, asha},
                                 {"hpod random + Hyperband", random, hyperband}, {"hpod genetic", genetic, none},
                                 {"hpod TPE", tpe, none},             {"hpod TPE + ASHA", tpe, asha},
                                 {"hpod TPE + Hyperband", tpe, hyperband}, {"hpod genetic + ASHA", genetic, asha},
                                 {"hpod TPE univariate + ASHA", tpe_univariate, asha}};
  for (Method& m : methods) {
    m.algorithm.tpe_startup_trials = tpe_startup;
    if (m.stopper.name != "none") m.stopper.min_resource = min_resource;
  }
  std::vector<std::pair<std::string, Problem>> problems;
  for (const std::string& key : only) {
    if (key == "hartmann6") problems.emplace_back(key, Hartmann6Curve());
    else if (key == "digits") problems.emplace_back(key, DigitsTable(src + "/bench/data/digits_mlp_curves.csv"));
    else return std::fprintf(stderr, "unknown problem %s\n", key.c_str()), 2;
  }
  for (const auto& [key, problem] : problems) {
    for (int w : workers) {
      Results results;
      for (const Method& m : methods) {
        for (int s = 1; s <= seeds; ++s) results[m.name].push_back(Simulate(problem, m, w, static_cast<uint64_t>(s), budget));
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
        if (best_optuna.empty() || final_median(runs) < final_median(optuna[best_optuna])) best_optuna = name;
      }
      double target = final_median(optuna[best_optuna]);
      // Every hpod method against Optuna's best: the budget it needs to reach Optuna's final
      // regret, and where it ends. "Best" is the method that gets there soonest.
      std::printf("\nW = %d: Optuna's best is %s, median final regret %.4f after %d epochs. Each hpod method:\n\n",
                  w, best_optuna.c_str(), target, budget);
      std::printf("| hpod method | final regret (median) | epochs to reach %.4f | share of Optuna's budget |\n", target);
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
        std::printf("\nW = %d: no hpod method reaches %.4f within %d epochs (target: within 50%%)\n", w, target, budget);
      } else {
        std::printf("\nW = %d: hpod's best (%s) reaches Optuna's final regret %.4f after %.0f epochs (%.0f%% of "
                    "Optuna's budget; target <= 50%%) and ends at %.4f\n",
                    w, best_ours.c_str(), target, best_need, 100 * best_need / budget, final_median(results[best_ours]));
      }
    }
  }
  return 0;
}
