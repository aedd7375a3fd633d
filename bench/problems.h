#pragma once
// The problems bench/search_quality searches: a space, one or more objectives and the value of
// each after every step (epoch) of a configuration — synthetic functions with learning curves,
// or any table of real learning curves in the documented CSV format (LoadTable) — and how a run
// on them is scored.
//
// Scoring, lower is better and 0 is the best possible:
// - one objective: regret, the best value seen so far (every step of every trial counts: a
//   checkpoint at that step is a model one could keep) minus the problem's best;
// - several: the hypervolume gap, the hypervolume of the problem's front minus that of the
//   points seen so far, every objective scaled to [0, 1] by the problem's range (minimized) and
//   the reference point 1.1 in each.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/pareto.h"
#include "algorithms/search_space.h"

namespace hpo::bench {

struct Problem {
  std::string key;   // for the Optuna side and for --problems: "zdt1", "table:<path>", ...
  std::string name;  // for the tables' titles
  algorithms::SearchSpace space;
  std::vector<std::string> metrics;  // the objectives' metric names, as trials report them
  std::vector<algorithms::Direction> directions;
  int steps = 27;
  // The objectives' values of a configuration after `step` (1..steps), as reported.
  std::function<std::vector<double>(const algorithms::Params&, int step)> value;
  // Minimized scale of each objective (several objectives): lo..hi maps to 0..1.
  std::vector<double> lo, hi;
  double best = 0;  // one objective: its best value (minimized); several: the front's volume
  bool multi() const { return metrics.size() > 1; }
};

// Hartmann-6 whose value approaches H6(x) as 2 exp(-epoch (0.5 + x1) / 9): configurations with
// a small x1 learn slowly and look worse early than they end.
Problem Hartmann6Curve();
// ZDT1 (6 variables; scaled over [0, 1] x [0, 6]) and DTLZ2 (three objectives, 6 variables;
// scaled over [0, 2] in each), every objective approaching its value as
// 0.3 exp(-epoch (0.5 + x1) / 9).
Problem Zdt1Curve();
Problem Dtlz2Curve();

// A table of learning curves (bench/README.md has the format): `# name TITLE`,
// `# param NAME TYPE [log]`, `# step NAME` and `# metric NAME DIRECTION` lines (or the same in
// `directives`, as from the command line, which take precedence), then CSV with a header.
// `objectives` picks the metrics that are the objectives (default: every metric). A suggestion runs
// the table's configuration nearest to it (each numeric parameter scaled to [0, 1] over the table's
// range, log scale for log parameters; a categorical one that differs counts 1; ties to the earlier
// row). INVALID_ARGUMENT saying where the file is wrong.
absl::StatusOr<Problem> LoadTable(const std::string& path,
                                  const std::vector<std::string>& directives,
                                  const std::vector<std::string>& objectives);

// The score of one run as points arrive (see above).
class Score {
 public:
  explicit Score(const Problem& problem) : problem_(problem) {}
  // A step's values; returns the score after it.
  double Add(const std::vector<double>& values);

 private:
  const Problem& problem_;
  double best_ = 1e300;       // one objective
  algorithms::Points front_;  // several: the non-dominated points seen, scaled
  double volume_ = 0;
};

// The volume of the scaled points up to the reference (1.1 in each objective).
double ScaledVolume(const algorithms::Points& scaled);

// The sweep file's `parameters:` for a space, and its objective(s) for a problem.
std::string ParametersYaml(const algorithms::SearchSpace& space);
std::string ObjectivesYaml(const Problem& problem);
// A trial's parameters, read back from its `--name=value` arguments (`pass_params: flags`).
algorithms::Params ParamsFromArgv(const algorithms::SearchSpace& space,
                                  const std::vector<std::string>& argv);

}  // namespace hpo::bench
