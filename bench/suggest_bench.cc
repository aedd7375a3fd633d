// suggest_bench: how long one suggestion takes with a long history — random and genetic at 100,000
// trials, TPE at 1,000, and with two objectives NSGA-II and multi-objective TPE at 1,000 — and
// Optuna 3.1's TPE, NSGA-II and multi-objective TPE at 1,000 in the same run. Prints a table.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "algorithms/genetic_sampler.h"
#include "algorithms/nsga2_sampler.h"
#include "algorithms/random_sampler.h"
#include "algorithms/tpe_sampler.h"

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"suggest_bench: time per suggestion with a long history, hpod vs Optuna 3.1"};
  std::string src = HPO_SOURCE_DIR;
  bool no_optuna = false;
  app.add_option("--src", src, "source tree (for bench/optuna_suggest.py)");
  app.add_flag("--no-optuna", no_optuna, "skip Optuna");
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
  std::printf("| hpod TPE | 1,000 | %.3f | < 10 ms |\n", MedianMs(tpe, space, small, 20));
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
  return 0;
}
