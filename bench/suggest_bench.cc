// suggest_bench: how long one suggestion takes with a long history — random and genetic at 100,000
// trials, TPE at 100 to 100,000, and with two objectives NSGA-II and multi-objective TPE at 1,000 —
// and Optuna 3.1's TPE, NSGA-II and multi-objective TPE at 1,000 in the same run. Then the whole
// ask path as a client sees it: a gRPC Ask to a real hpod on an external sweep with 1,000 finished
// trials (the suggestion made, the trial stored durably, the reply), against Optuna's ask() on
// its SQLite storage with as many. Prints tables.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "algorithms/genetic_sampler.h"
#include "algorithms/gp_sampler.h"
#include "algorithms/nsga2_sampler.h"
#include "algorithms/random_sampler.h"
#include "algorithms/tpe_sampler.h"
#include "bench/bench_daemon.h"
#include "client/client.h"
#include "client/trial_reporter.h"

namespace {

using hpo::algorithms::Direction;
using hpo::algorithms::HistoryEntry;
using hpo::algorithms::ParamDef;
using hpo::algorithms::Params;
using hpo::algorithms::ParamType;
using hpo::algorithms::SearchSpace;

SearchSpace Space() {
  SearchSpace s;
  s.params.push_back(
      {"lr", ParamType::kFloat, 1e-4, 1e-1, true, std::nullopt, {}, {}, std::nullopt});
  s.params.push_back({"units", ParamType::kInt, 16, 256, false, 16.0, {}, {}, std::nullopt});
  s.params.push_back({"act",
                      ParamType::kCategorical,
                      0,
                      0,
                      false,
                      std::nullopt,
                      {std::string("relu"), std::string("tanh"), std::string("gelu")},
                      {},
                      std::nullopt});
  s.params.push_back(
      {"drop", ParamType::kFloat, 0.0, 0.5, false, std::nullopt, {}, {}, std::nullopt});
  return s;
}

std::vector<HistoryEntry> History(const SearchSpace& space, int n) {
  hpo::algorithms::RandomSampler random;
  std::vector<HistoryEntry> empty, out;
  for (int i = 0; i < n; ++i) {
    hpo::algorithms::SuggestRequest req{&space, &empty, i, 1, Direction::kMinimize};
    Params p = **random.Suggest(req);
    double lr = std::get<double>(p["lr"]), drop = std::get<double>(p["drop"]);
    double units = static_cast<double>(std::get<int64_t>(p["units"]));
    double y = std::pow(std::log10(lr) + 2, 2) + drop + (units - 128) * (units - 128) / 1e4;
    out.push_back({i, p, true, y});
    out.back().values = {y, drop + units / 256};  // a second objective, for NSGA-II and MOTPE
  }
  return out;
}

const std::vector<Direction> kTwo = {Direction::kMinimize, Direction::kMinimize};

double MedianMs(const hpo::algorithms::Sampler& s, const SearchSpace& space,
                const std::vector<HistoryEntry>& history, int repeats, bool two = false) {
  // The objective column the controller keeps next to the history.
  std::vector<double> objectives;
  for (const HistoryEntry& h : history) objectives.push_back(hpo::algorithms::ObjectiveColumn(h));
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    hpo::algorithms::SuggestRequest req{&space, &history, static_cast<int64_t>(history.size()) + r,
                                        7, Direction::kMinimize};
    req.objectives = &objectives;
    if (two) req.directions = &kTwo;
    auto t0 = std::chrono::steady_clock::now();
    auto p = s.Suggest(req);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!p.ok()) std::exit(1);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// What the history's trials score (as History computes it), from a trial's parameters.
double Score(const hpo::v1::Trial& t) {
  double lr = t.params().at("lr").float_value(), drop = t.params().at("drop").float_value();
  double units = static_cast<double>(t.params().at("units").int_value());
  return std::pow(std::log10(lr) + 2, 2) + drop + (units - 128) * (units - 128) / 1e4;
}

struct AskPath {
  double median_ms = 0, p90_ms = 0;
  std::string error;
};

// A real hpod, an external TPE sweep over Space(); `history` trials asked, reported and told
// through the API; then `repeats` more, each Ask timed from the call to the reply.
AskPath MeasureAskPath(int history, int repeats) {
  AskPath out;
  hpo::bench::BenchDaemon hpod;
  if (!hpod.Start("suggest", {"--cpus=2"})) {
    out.error = hpod.error();
    return out;
  }
  hpo::client::Client client(hpod.dir().socket_target(), *hpod.dir().ReadToken());
  hpo::v1::SubmitSweepRequest req;
  req.set_spec_yaml(absl::StrCat(
      "name: suggest-bench\nbackend: external\nalgorithm: tpe\nseed: 1\n",
      "parameters:\n  lr: {type: float, low: 1.0e-4, high: 1.0e-1, log: true}\n",
      "  units: {type: int, low: 16, high: 256, step: 16}\n  act: [relu, tanh, gelu]\n",
      "  drop: {type: float, low: 0.0, high: 0.5}\n",
      "objective: {metric: loss, direction: minimize}\n",
      "budget: {max_trials: ", history + repeats, ", max_concurrent: 1}\n"));
  req.set_source("suggest-bench.yaml");
  req.set_base_dir(hpod.data());
  absl::StatusOr<hpo::v1::Sweep> sweep = client.Submit(req);
  if (!sweep.ok()) {
    out.error = sweep.status().ToString();
    return out;
  }
  std::vector<double> ms;
  for (int i = 0; i < history + repeats; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<hpo::v1::AskResponse> asked = client.Ask(sweep->id());
    double took =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!asked.ok()) {
      out.error = absl::StrCat("ask ", i, ": ", asked.status().ToString());
      return out;
    }
    if (i >= history) ms.push_back(took);
    hpo::client::TrialReporter reporter(hpod.endpoint(), asked->trial().id(), asked->token(), "",
                                        hpod.tls_ca_pem());
    auto reported = reporter.Report(1, {{"loss", Score(asked->trial())}}, absl::Seconds(30));
    hpo::v1::TellRequest tell;
    tell.set_trial_id(asked->trial().id());
    tell.set_state(hpo::v1::TRIAL_STATE_COMPLETED);
    absl::StatusOr<hpo::v1::Trial> told = client.Tell(tell);
    if (!reported.ok() || reported->delivered != 1 || !told.ok()) {
      out.error = absl::StrCat("trial ", i, ": the report or the tell failed");
      return out;
    }
  }
  std::sort(ms.begin(), ms.end());
  out.median_ms = ms[ms.size() / 2];
  out.p90_ms = ms[ms.size() * 9 / 10];
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"suggest_bench: time per suggestion with a long history, hpod vs Optuna 3.1"};
  std::string src = HPO_SOURCE_DIR;
  bool no_optuna = false, no_ask = false;
  app.add_option("--src", src, "source tree (for bench/optuna_suggest.py)");
  app.add_flag("--no-optuna", no_optuna, "skip Optuna");
  app.add_flag("--no-ask-path", no_ask, "skip the whole ask path (a real hpod)");
  CLI11_PARSE(app, argc, argv);

  SearchSpace space = Space();
  hpo::algorithms::RandomSampler random;
  hpo::algorithms::TpeSampler tpe({10, 24});
  hpo::algorithms::GeneticSampler genetic({20, 3, 0.5, 0.3, 0.1, 2, 4, 10});
  auto big = History(space, 100'000);
  auto small = std::vector<HistoryEntry>(big.begin(), big.begin() + 1000);
  std::printf("\n| sampler | history (finished trials) | ms per suggestion (median) | target |\n");
  std::printf("|---|---:|---:|---|\n");
  std::printf("| hpod random | 100,000 | %.4f | < 1 ms |\n", MedianMs(random, space, big, 50));
  std::printf("| hpod genetic (population 20, 4 demes) | 100,000 | %.4f | < 1 ms |\n",
              MedianMs(genetic, space, big, 50));
  // TPE models at most 1,000 trials (the 900 most recent and the 100 best of the others), so
  // its cost levels off past 1,000.
  for (auto [n, shown] : {std::pair{100, "100"}, std::pair{1'000, "1,000"},
                          std::pair{10'000, "10,000"}, std::pair{100'000, "100,000"}}) {
    auto history = std::vector<HistoryEntry>(big.begin(), big.begin() + n);
    std::printf("| hpod TPE | %s | %.3f | < 1 ms |\n", shown, MedianMs(tpe, space, history, 20));
  }
  // The GP refits its model at every suggestion over at most 256 finished trials (the 96 best and
  // the most recent others): its cost levels off past 256.
  hpo::algorithms::GpSampler gp({10});
  for (auto [n, shown] : {std::pair{100, "100"}, std::pair{1'000, "1,000"},
                          std::pair{10'000, "10,000"}, std::pair{100'000, "100,000"}}) {
    auto history = std::vector<HistoryEntry>(big.begin(), big.begin() + n);
    std::printf("| hpod GP | %s | %.1f | bounded |\n", shown, MedianMs(gp, space, history, 5));
  }
  std::printf("| hpod GP, 2 objectives | 1,000 | %.1f | bounded |\n",
              MedianMs(gp, space, small, 5, true));
  hpo::algorithms::Nsga2Sampler nsga2({20, 0.9, 0});
  std::printf("| hpod NSGA-II, 2 objectives (population 20) | 1,000 | %.4f | < 1 ms |\n",
              MedianMs(nsga2, space, small, 50, true));
  std::printf("| hpod multi-objective TPE, 2 objectives | 1,000 | %.3f | < 10 ms |\n",
              MedianMs(tpe, space, small, 20, true));
  if (!no_optuna) {
    std::string cmd =
        absl::StrCat("/usr/bin/python3 ", src, "/bench/optuna_suggest.py --history 1000 --multi");
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[256];
      const std::vector<std::pair<std::string, std::string>> rows = {
          {"optuna_tpe_ms=", "Optuna 3.1 TPE"},
          {"optuna_nsga2_ms=", "Optuna 3.1 NSGA-II, 2 objectives (population 20)"},
          {"optuna_motpe_ms=", "Optuna 3.1 multi-objective TPE, 2 objectives"}};
      while (std::fgets(buf, sizeof(buf), p) != nullptr) {
        std::string line(buf);
        for (const auto& [key, name] : rows) {
          if (auto pos = line.find(key); pos != std::string::npos) {
            std::printf("| %s | 1,000 | %.3f | (peer) |\n", name.c_str(),
                        std::stod(line.substr(pos + key.size())));
          }
        }
      }
      ::pclose(p);
    }
  }
  if (no_ask) return 0;
  constexpr int kHistory = 1000, kRepeats = 40;
  AskPath ask = MeasureAskPath(kHistory, kRepeats);
  if (!ask.error.empty()) {
    std::fprintf(stderr, "suggest_bench: hpod's ask path failed: %s\n", ask.error.c_str());
    return 2;
  }
  std::printf(
      "\n| the whole ask path (TPE, 1,000 finished trials) | ms per ask (median) | p90 ms |\n");
  std::printf("|---|---:|---:|\n");
  std::printf("| hpod: gRPC Ask on an external sweep (trial stored durably) | %.2f | %.2f |\n",
              ask.median_ms, ask.p90_ms);
  if (no_optuna) return 0;
  std::string cmd =
      absl::StrCat("/usr/bin/python3 ", src,
                   "/bench/optuna_suggest.py --history 1000 --suggestions 40 --storage sqlite");
  double optuna_ms = -1, optuna_p90 = -1;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof(buf), p) != nullptr) {
      std::string line(buf);
      if (auto pos = line.find("optuna_sqlite_ask_ms="); pos != std::string::npos) {
        optuna_ms = std::stod(line.substr(pos + 21));
      }
      if (auto pos = line.find("p90_ms="); pos != std::string::npos) {
        optuna_p90 = std::stod(line.substr(pos + 7));
      }
    }
    if (::pclose(p) != 0) optuna_ms = -1;
  }
  if (optuna_ms < 0) {  // a failed peer run is an error, not a missing row
    std::fprintf(stderr, "suggest_bench: Optuna's run failed: %s\n", cmd.c_str());
    return 2;
  }
  std::printf("| Optuna 3.1: study.ask() + 4 suggest calls, SQLite storage | %.2f | %.2f |\n",
              optuna_ms, optuna_p90);
  std::printf("\nratio (Optuna / hpod, median): %.1fx\n", optuna_ms / ask.median_ms);
  return 0;
}
