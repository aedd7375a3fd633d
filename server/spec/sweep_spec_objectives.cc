// The sweep file's objectives, constraints and budget (see sweep_spec_parser.h).
#include <regex>
#include <set>

#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "server/spec/sweep_spec_parser.h"

namespace hpo::server {

bool IsMeasuredMetric(const std::string& metric) {
  return metric == kRuntimeMetric || metric == kGpuHoursMetric;
}

double Constraint::Violation(double value) const {
  return std::max(0.0, at_most ? value - bound : bound - value);
}

std::string Constraint::Text() const {
  return absl::StrFormat("%s %s %g", metric, at_most ? "<=" : ">=", bound);
}

std::vector<algorithms::Direction> SweepSpec::Directions() const {
  std::vector<algorithms::Direction> out;
  for (const Objective& o : objectives) out.push_back(o.direction);
  return out;
}

bool SweepSpec::Uses(const std::string& metric) const {
  for (const Objective& o : objectives) {
    if (o.metric == metric) return true;
  }
  for (const Constraint& c : constraints) {
    if (c.metric == metric) return true;
  }
  return false;
}

namespace spec_parse {

std::optional<std::string> Parser::Metric(const YAML::Node& node, absl::string_view what,
                                          bool measured_ok) {
  std::optional<std::string> name = String(node, what);
  if (!name) return std::nullopt;
  static const std::regex kMetric("[A-Za-z_][A-Za-z0-9_./-]{0,127}");
  if (!std::regex_match(*name, kMetric)) {
    Error(node, absl::StrCat(what, " must be a name of letters, digits, _ . /, -"));
    return std::nullopt;
  }
  if (absl::StartsWith(*name, kMeasuredPrefix)) {
    if (!IsMeasuredMetric(*name)) {
      Error(node, absl::StrCat(what, " '", *name, "': names under ", kMeasuredPrefix,
                               " are the metrics hpod measures: ", kRuntimeMetric, ", ",
                               kGpuHoursMetric));
      return std::nullopt;
    }
    if (!measured_ok) {
      Error(node, absl::StrCat(what, " '", *name,
                               "' is measured by hpod: it can be one of several objectives "
                               "(objectives:) or a constraint, not the one objective"));
      return std::nullopt;
    }
  }
  return name;
}

std::optional<algorithms::Direction> Parser::DirectionOf(const YAML::Node& node,
                                                         absl::string_view what) {
  if (!node) return std::nullopt;
  std::string d = String(node, absl::StrCat(what, " direction")).value_or("");
  if (d == "minimize" || d == "min") return algorithms::Direction::kMinimize;
  if (d == "maximize" || d == "max") return algorithms::Direction::kMaximize;
  Error(node, absl::StrCat(what, " direction must be minimize or maximize, not '", d, "'"));
  return std::nullopt;
}

void Parser::Objective_(const YAML::Node& node, SweepSpec& spec) {
  if (!ExpectMap(node, "objective")) return;
  CheckKeys(node, "objective", {"metric", "direction", "goal", "use"});
  if (!node["metric"]) {
    Error(node, "objective needs metric (the reported metric to optimize)");
  } else {
    spec.objective.metric =
        Metric(node["metric"], "objective metric", /*measured_ok=*/false).value_or("");
  }
  if (!node["direction"]) Error(node, "objective needs direction: minimize or maximize");
  if (auto d = DirectionOf(node["direction"], "objective")) spec.objective.direction = *d;
  if (node["goal"]) spec.objective.goal = Number(node["goal"], "objective goal");
  if (node["use"]) {
    std::string use = String(node["use"], "objective use").value_or("");
    if (use == "best")
      spec.objective.use_best = true;
    else if (use != "last")
      Error(node["use"], "objective use must be last or best");
  }
  spec.objectives = {spec.objective};
}

void Parser::Objectives(const YAML::Node& node, SweepSpec& spec) {
  if (!node.IsSequence() || node.size() == 0) {
    Error(node,
          "objectives must be a list of {metric, direction}, e.g. "
          "[{metric: val_acc, direction: maximize}, {metric: hpo.gpu_hours, direction: minimize}]");
    return;
  }
  if (node.size() > 8) Error(node, "objectives: at most 8");
  std::set<std::string> seen;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node& o = node[i];
    std::string where = absl::StrCat("objectives[", i + 1, "]");
    if (!ExpectMap(o, where)) continue;
    CheckKeys(o, where, {"metric", "direction"});
    Objective objective;
    if (!o["metric"]) {
      Error(o, absl::StrCat(where, " needs metric"));
    } else if (auto m = Metric(o["metric"], absl::StrCat(where, " metric"), true)) {
      objective.metric = *m;
      if (!seen.insert(*m).second) Error(o["metric"], absl::StrCat(where, ": ", *m, " twice"));
    }
    if (!o["direction"]) Error(o, absl::StrCat(where, " needs direction: minimize or maximize"));
    if (auto d = DirectionOf(o["direction"], where)) objective.direction = *d;
    spec.objectives.push_back(std::move(objective));
  }
  if (!spec.objectives.empty()) spec.objective = spec.objectives.front();
}

void Parser::Constraints(const YAML::Node& node, SweepSpec& spec) {
  if (!node.IsSequence() || node.size() == 0) {
    Error(node, "constraints must be a list of bounds such as \"latency_ms <= 20\"");
    return;
  }
  static const std::regex kLine(R"(\s*(\S+)\s*(<=|>=)\s*(\S+)\s*)");
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node& c = node[i];
    std::string where = absl::StrCat("constraints[", i + 1, "]");
    std::optional<std::string> text = String(c, where);
    std::smatch m;
    if (!text) continue;
    if (!std::regex_match(*text, m, kLine)) {
      Error(c,
            absl::StrCat(where, " '", *text, "' must read METRIC <= NUMBER or METRIC >= NUMBER"));
      continue;
    }
    Constraint constraint;
    std::optional<std::string> metric = m[1].str();
    static const std::regex kMetric("[A-Za-z_][A-Za-z0-9_./-]{0,127}");
    if (!std::regex_match(*metric, kMetric) ||
        (absl::StartsWith(*metric, kMeasuredPrefix) && !IsMeasuredMetric(*metric))) {
      Error(c, absl::StrCat(where, ": '", *metric, "' is not a metric name (letters, digits, _ . /",
                            " -; under hpo. only ", kRuntimeMetric, " and ", kGpuHoursMetric, ")"));
      continue;
    }
    double bound = 0;
    if (!absl::SimpleAtod(m[3].str(), &bound) || !std::isfinite(bound)) {
      Error(c, absl::StrCat(where, ": '", m[3].str(), "' is not a finite number"));
      continue;
    }
    constraint.metric = *metric;
    constraint.at_most = m[2].str() == "<=";
    constraint.bound = bound;
    spec.constraints.push_back(std::move(constraint));
  }
}

void Parser::Budget_(const YAML::Node& node, SweepSpec& spec) {
  if (!ExpectMap(node, "budget")) return;
  CheckKeys(node, "budget",
            {"max_trials", "max_concurrent", "max_failed", "wall_time", "gpu_hours", "node_hours",
             "max_trial_steps"});
  constexpr int64_t kBig = 100'000'000;
  if (node["max_trials"])
    spec.budget.max_trials = Integer(node["max_trials"], "budget max_trials", 1, kBig).value_or(1);
  if (node["max_concurrent"])
    spec.budget.max_concurrent =
        Integer(node["max_concurrent"], "budget max_concurrent", 1, 100'000)
            .value_or(spec.budget.max_concurrent);
  if (node["max_failed"])
    spec.budget.max_failed =
        Integer(node["max_failed"], "budget max_failed", 0, kBig).value_or(spec.budget.max_failed);
  if (node["wall_time"]) spec.budget.wall_time = Duration(node["wall_time"], "budget wall_time");
  spec.budget.gpu_hours = Hours(node["gpu_hours"], "gpu_hours", "GPU-hours");
  spec.budget.node_hours = Hours(node["node_hours"], "node_hours", "node-hours");
  if (node["max_trial_steps"]) {
    spec.budget.max_trial_steps =
        Integer(node["max_trial_steps"], "budget max_trial_steps", 1, int64_t{1} << 53).value_or(0);
  }
}

std::optional<double> Parser::Hours(const YAML::Node& node, const char* key, const char* unit) {
  if (!node) return std::nullopt;
  std::optional<double> h = Number(node, absl::StrCat("budget ", key));
  if (h && (*h <= 0 || *h > 1e9)) {
    Error(node, absl::StrCat("budget ", key, " must be a number of ", unit, " above 0"));
    return std::nullopt;
  }
  return h;
}

void Parser::CheckGpuBudget(const YAML::Node& root, const SweepSpec& spec) {
  int most = spec.gpu_options.empty() ? spec.resources.gpus : spec.gpu_options.back();
  if (spec.budget.gpu_hours && most == 0) {
    Error(root["budget"]["gpu_hours"], "budget gpu_hours: the sweep's trials use no GPUs");
  }
}

}  // namespace spec_parse
}  // namespace hpo::server
