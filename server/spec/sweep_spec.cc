#include "server/spec/sweep_spec.h"

#include <cctype>
#include <cmath>
#include <csignal>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/duration.h"
#include "common/files.h"
#include "common/pattern.h"
#include "common/shell_quote.h"
#include "server/spec/sweep_spec_parser.h"
#include "yaml-cpp/yaml.h"

namespace hpo::server::spec_parse {

const std::set<std::string> kReservedPlaceholders = {"trial_id", "trial_number",  "trial_dir",
                                                     "sweep_id", "checkpoint_in", "checkpoint_out"};

std::optional<ParamDef> Parser::Parameter(const std::string& name, const YAML::Node& node) {
  ParamDef p;
  p.name = name;
  std::string where = absl::StrCat("parameter '", name, "'");
  static const std::regex kName("[A-Za-z_][A-Za-z0-9_.-]{0,127}");
  if (!std::regex_match(name, kName)) {
    Error(node, absl::StrCat("parameter name '", name,
                             "' must start with a letter or _ and use letters, digits, _ . -"));
    return std::nullopt;
  }
  if (node.IsScalar()) {  // shorthand: a fixed value
    auto v = Value(node, where);
    if (!v) return std::nullopt;
    p.type = ParamType::kFixed;
    p.value = *v;
    return p;
  }
  if (node.IsSequence()) {  // shorthand: categorical choices
    p.type = ParamType::kCategorical;
    for (const auto& c : node) {
      auto v = Value(c, where);
      if (!v) return std::nullopt;
      p.choices.push_back(*v);
    }
    if (p.choices.empty()) Error(node, absl::StrCat(where, " needs at least one value"));
    return p;
  }
  if (!ExpectMap(node, where)) return std::nullopt;
  CheckKeys(node, where, {"type", "low", "high", "log", "step", "values", "value", "default"});
  std::string type;
  if (node["type"]) {
    type = String(node["type"], where + " type").value_or("");
  } else if (node["values"]) {
    type = "categorical";
  } else if (node["value"]) {
    type = "fixed";
  } else {
    Error(node, absl::StrCat(where, " needs a type: float, int, categorical or fixed"));
    return std::nullopt;
  }
  if (type == "float" || type == "int") {
    p.type = type == "float" ? ParamType::kFloat : ParamType::kInt;
    if (!node["low"] || !node["high"]) {
      Error(node, absl::StrCat(where, " (", type, ") needs low and high"));
      return std::nullopt;
    }
    auto low = Number(node["low"], where + " low");
    auto high = Number(node["high"], where + " high");
    if (!low || !high) return std::nullopt;
    p.low = *low;
    p.high = *high;
    if (node["log"]) p.log = Bool(node["log"], where + " log").value_or(false);
    if (node["step"]) {
      auto step = Number(node["step"], where + " step");
      if (!step) return std::nullopt;
      p.step = *step;
    }
    if (node["values"] || node["value"]) {
      Error(node, absl::StrCat(where, ": values/value belong to categorical/fixed parameters"));
    }
  } else if (type == "categorical") {
    p.type = ParamType::kCategorical;
    const YAML::Node& values = node["values"];
    if (!values || !values.IsSequence() || values.size() == 0) {
      Error(values ? values : node,
            absl::StrCat(where, " needs 'values: [a, b, ...]' with at least one value"));
      return std::nullopt;
    }
    for (const auto& c : values) {
      auto v = Value(c, where);
      if (!v) return std::nullopt;
      for (const auto& existing : p.choices) {
        if (existing == *v)
          Error(c, absl::StrCat(where, ": value '", c.Scalar(), "' is listed twice"));
      }
      p.choices.push_back(*v);
    }
  } else if (type == "fixed") {
    p.type = ParamType::kFixed;
    if (!node["value"]) {
      Error(node, absl::StrCat(where, " (fixed) needs value"));
      return std::nullopt;
    }
    auto v = Value(node["value"], where);
    if (!v) return std::nullopt;
    p.value = *v;
  } else {
    Error(node["type"], absl::StrCat(where, ": unknown type '", type,
                                     "' (known: float, int, categorical, fixed)"));
    return std::nullopt;
  }
  algorithms::SearchSpace one;
  one.params.push_back(p);
  if (absl::Status s = one.Validate(); !s.ok()) {
    Error(node, s.message());
    return std::nullopt;
  }
  if (const YAML::Node& d = node["default"]) {
    absl::StatusOr<ParamValue> v =
        d.IsScalar()
            ? algorithms::ParseValue(p, d.Scalar())
            : absl::InvalidArgumentError(absl::StrCat(where, " default must be one value"));
    if (!v.ok()) {
      Error(d, absl::StrCat(where, " default: ", v.status().message()));
      return std::nullopt;
    }
    p.default_value = *v;
  }
  return p;
}

void Parser::Parameters(const YAML::Node& node, SweepSpec& spec) {
  if (!ExpectMap(node, "parameters")) return;
  if (node.size() == 0) Error(node, "parameters is empty: a sweep needs at least one parameter");
  if (node.size() > kMaxParameters) {
    Error(node, absl::StrCat("parameters has ", node.size(), " entries; at most ", kMaxParameters));
    return;
  }
  for (const auto& kv : node) {
    std::string name = kv.first.Scalar();
    if (kReservedPlaceholders.count(name) || name.rfind("checkpoint", 0) == 0) {
      Error(kv.first, absl::StrCat("parameter name '", name, "' is reserved"));
      continue;
    }
    if (auto p = Parameter(name, kv.second)) spec.space.params.push_back(*p);
  }
}

void Parser::CheckPlaceholders(const YAML::Node& node, const std::string& text,
                               const SweepSpec& spec) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '{' && i + 1 < text.size() && text[i + 1] == '{') {
      ++i;
      continue;
    }
    if (text[i] == '}' && i + 1 < text.size() && text[i + 1] == '}') {
      ++i;
      continue;
    }
    if (text[i] != '{') continue;
    size_t end = text.find('}', i);
    if (end == std::string::npos) {
      Error(node,
            absl::StrCat("command: unclosed '{' in '", text, "' (write {{ for a literal brace)"));
      return;
    }
    std::string name = text.substr(i + 1, end - i - 1);
    if (!kReservedPlaceholders.count(name) && spec.space.Find(name) == nullptr) {
      Error(node,
            absl::StrCat(
                "command: unknown placeholder {", name,
                "}: not a parameter nor one of {trial_id} {trial_number} {trial_dir} {sweep_id}"));
    }
    i = end;
  }
}

void Parser::Command(const YAML::Node& node, SweepSpec& spec) {
  if (node.IsScalar()) {
    spec.command_is_shell = true;
    spec.command = {node.Scalar()};
    if (node.Scalar().empty()) Error(node, "command is empty");
    CheckPlaceholders(node, node.Scalar(), spec);
  } else if (node.IsSequence()) {
    if (node.size() == 0) Error(node, "command is an empty list");
    for (const auto& arg : node) {
      if (!arg.IsScalar()) {
        Error(arg, "command list entries must be strings");
        continue;
      }
      spec.command.push_back(arg.Scalar());
      CheckPlaceholders(arg, arg.Scalar(), spec);
    }
  } else {
    Error(node, "command must be a string (run by /bin/sh) or a list (argv)");
  }
}

void Parser::Resources(const YAML::Node& node, SweepSpec& spec) {
  if (!ExpectMap(node, "resources")) return;
  CheckKeys(node, "resources",
            {"gpus", "gpus_per_task", "cpus", "nodes", "tasks_per_node", "time_limit"});
  auto& r = spec.resources;
  if (const YAML::Node g = node["gpus"]) {
    static const std::regex kRef(R"(\{([A-Za-z_][A-Za-z0-9_]*)\})");
    std::smatch m;
    if (g.IsScalar() && std::regex_match(g.Scalar(), m, kRef)) {
      // Each trial's GPU count is one of its parameters: int, or categorical of integers.
      spec.gpus_param = m[1];
      const algorithms::ParamDef* def = spec.space.Find(spec.gpus_param);
      if (def == nullptr) {
        Error(g, absl::StrCat("resources gpus: no parameter '", spec.gpus_param, "'"));
      } else if (def->type == ParamType::kInt && !def->log && def->Cardinality() &&
                 *def->Cardinality() <= 64) {
        double step = def->step.value_or(1);
        for (double v = def->low; v <= def->high + 1e-9; v += step)
          spec.gpu_options.push_back(static_cast<int>(v));
      } else if (def->type == ParamType::kCategorical || def->type == ParamType::kFixed) {
        std::vector<ParamValue> values =
            def->type == ParamType::kFixed ? std::vector<ParamValue>{def->value} : def->choices;
        for (const ParamValue& v : values) {
          const int64_t* i = std::get_if<int64_t>(&v);
          if (i == nullptr || *i < 0 || *i > 1024) {
            Error(g, absl::StrCat("resources gpus: parameter '", spec.gpus_param,
                                  "' has the value ", algorithms::FormatValue(v),
                                  "; GPU counts are integers from 0 to 1024"));
            spec.gpu_options.clear();
            break;
          }
          spec.gpu_options.push_back(static_cast<int>(*i));
        }
      } else {
        Error(g, absl::StrCat(
                     "resources gpus: parameter '", spec.gpus_param,
                     "' must be an int (linear, at most 64 values) or a categorical of integers"));
      }
      for (int v : spec.gpu_options) {
        if (v < 0 || v > 1024) {
          Error(g, absl::StrCat("resources gpus: parameter '", spec.gpus_param, "' reaches ", v,
                                "; GPU counts are 0 to 1024"));
          spec.gpu_options.clear();
          break;
        }
      }
      std::sort(spec.gpu_options.begin(), spec.gpu_options.end());
      spec.gpu_options.erase(std::unique(spec.gpu_options.begin(), spec.gpu_options.end()),
                             spec.gpu_options.end());
      if (!spec.gpu_options.empty()) r.gpus = spec.gpu_options.back();
    } else {
      r.gpus = static_cast<int>(Integer(g, "resources gpus", 0, 1024).value_or(0));
    }
  }
  if (spec.gpu_options.empty()) spec.gpu_options = {r.gpus};
  if (node["cpus"])
    r.cpus = static_cast<int>(Integer(node["cpus"], "resources cpus", 1, 4096).value_or(1));
  if (node["nodes"])
    r.nodes = static_cast<int>(Integer(node["nodes"], "resources nodes", 1, 4096).value_or(1));
  if (node["tasks_per_node"])
    r.tasks_per_node = static_cast<int>(
        Integer(node["tasks_per_node"], "resources tasks_per_node", 1, 4096).value_or(1));
  if (const YAML::Node g = node["gpus_per_task"]) {
    if (node["gpus"]) Error(g, "resources: give gpus (per node) or gpus_per_task, not both");
    r.gpus_per_task = static_cast<int>(Integer(g, "resources gpus_per_task", 1, 64).value_or(1));
    r.gpus = r.gpus_per_task * r.tasks_per_node;
    spec.gpu_options = {r.gpus};
  }
  if (const YAML::Node t = node["time_limit"]) {
    if (std::optional<absl::Duration> d = Duration(t, "resources time_limit")) {
      if (*d < absl::Minutes(1)) {
        Error(t, "resources time_limit must be at least 1m (Slurm counts time limits in minutes)");
      } else {
        r.time_limit = absl::Minutes(std::ceil(absl::ToDoubleMinutes(*d)));
      }
    }
  }
}

void Parser::Enqueue(const YAML::Node& node, SweepSpec& spec) {
  if (!node.IsSequence()) {
    Error(node, "enqueue must be a list of configurations ({name: value, ...})");
    return;
  }
  for (const YAML::Node& entry : node) {
    if (!ExpectMap(entry, "an enqueue entry")) continue;
    std::map<std::string, std::string> texts;
    for (const auto& kv : entry) {
      if (!kv.second.IsScalar()) {
        Error(kv.second, absl::StrCat("enqueue: ", kv.first.Scalar(), " must be a single value"));
        continue;
      }
      texts[kv.first.Scalar()] = kv.second.Scalar();
    }
    absl::StatusOr<algorithms::Params> point = spec.space.ParsePoint(texts);
    if (!point.ok()) {
      Error(entry, absl::StrCat("enqueue: ", point.status().message()));
      continue;
    }
    spec.enqueue.push_back(*std::move(point));
  }
}

void Parser::Checkpoint(const YAML::Node& node, SweepSpec& spec) {
  if (!ExpectMap(node, "checkpoint")) return;
  CheckKeys(node, "checkpoint", {"signal", "grace", "max_segments"});
  Checkpointing& c = spec.checkpoint;
  c.resumable = true;
  if (const YAML::Node s = node["signal"]) {
    std::string sig = String(s, "checkpoint signal").value_or("");
    if (std::optional<int> n = SignalNumber(sig); n && *n != SIGKILL) {
      c.signal = *n;
    } else {
      Error(s, absl::StrCat("checkpoint signal must be a signal a trial can catch, like SIGUSR1, "
                            "not '",
                            sig, "'"));
    }
  }
  if (const YAML::Node g = node["grace"]) {
    if (std::optional<absl::Duration> d = Duration(g, "checkpoint grace")) {
      // Slurm's --signal takes at most 65535 seconds.
      if (*d < absl::Seconds(1) || *d > absl::Seconds(65535)) {
        Error(g, "checkpoint grace must be between 1s and 18h");
      } else {
        c.grace = *d;
      }
    }
  }
  if (const YAML::Node m = node["max_segments"]) {
    c.max_segments =
        static_cast<int>(Integer(m, "checkpoint max_segments", 1, 100'000).value_or(100));
  }
}

void Parser::HealthSection(const YAML::Node& node, SweepSpec& spec) {
  if (!ExpectMap(node, "health")) return;
  CheckKeys(
      node, "health",
      {"report_timeout", "factor", "floor", "signal", "grace", "fail_fast", "fail_fast_within"});
  Health& h = spec.health;
  if (const YAML::Node t = node["report_timeout"]) {
    std::string text = t.IsScalar() ? t.Scalar() : "";
    if (text == "auto") {
      h.mode = Health::Mode::kAuto;
    } else if (text == "none") {
      h.mode = Health::Mode::kNone;
    } else if (std::optional<absl::Duration> d = Duration(t, "health report_timeout")) {
      if (*d < absl::Seconds(1)) {
        Error(t, "health report_timeout must be at least 1s (or auto, or none)");
      } else {
        h.mode = Health::Mode::kFixed;
        h.timeout = *d;
      }
    }
  }
  if (const YAML::Node f = node["factor"]) {
    if (std::optional<double> v = Number(f, "health factor"); v && (*v < 2 || *v > 1000)) {
      Error(f, "health factor must be between 2 and 1000 (times the trial's usual interval)");
    } else if (v) {
      h.factor = *v;
    }
  }
  if (const YAML::Node f = node["floor"]) {
    if (std::optional<absl::Duration> d = Duration(f, "health floor")) {
      if (*d < absl::Seconds(1)) {
        Error(f, "health floor must be at least 1s");
      } else {
        h.floor = *d;
      }
    }
  }
  if (const YAML::Node s = node["signal"]) {
    std::string sig = String(s, "health signal").value_or("");
    if (sig == "none") {
      h.signal = 0;
    } else if (std::optional<int> n = SignalNumber(sig); n && *n != SIGKILL) {
      h.signal = *n;
    } else {
      Error(s, absl::StrCat("health signal must be a signal a trial can catch, like SIGUSR1 "
                            "(or none), not '",
                            sig, "'"));
    }
  }
  if (const YAML::Node g = node["grace"]) {
    if (std::optional<absl::Duration> d = Duration(g, "health grace")) h.grace = *d;
  }
  if (const YAML::Node k = node["fail_fast"]) {
    h.fail_fast = static_cast<int>(Integer(k, "health fail_fast", 0, 1000).value_or(h.fail_fast));
  }
  if (const YAML::Node w = node["fail_fast_within"]) {
    if (std::optional<absl::Duration> d = Duration(w, "health fail_fast_within")) {
      h.fail_fast_within = *d;
    }
  }
}

std::optional<int> SignalNumber(const std::string& text) {
  static const std::map<std::string, int> kSignals = {
      {"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
      {"USR2", SIGUSR2}, {"KILL", SIGKILL}, {"CONT", SIGCONT}, {"ALRM", SIGALRM}};
  std::string up;
  for (char c : text) up += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (up.rfind("SIG", 0) == 0) up = up.substr(3);
  auto it = kSignals.find(up);
  if (it != kSignals.end()) return it->second;
  int n = 0;
  if (absl::SimpleAtoi(text, &n) && n >= 1 && n <= 64) return n;
  return std::nullopt;
}

void Parser::Slurm(const YAML::Node& node) {
  if (!ExpectMap(node, "slurm")) return;
  CheckKeys(node, "slurm",
            {"mode", "partition", "account", "qos", "constraint", "reservation", "time_limit",
             "allocation", "exclusive", "comment", "licenses"});
  slurm::SlurmPlacement& p = slurm_;
  if (node["mode"]) {
    p.mode = String(node["mode"], "slurm mode").value_or("");
    if (p.mode != "jobs" && p.mode != "steps")
      Error(node["mode"], "slurm mode must be steps or jobs");
  }
  for (auto [key, field] : {std::pair{"partition", &p.partition},
                            {"account", &p.account},
                            {"qos", &p.qos},
                            {"constraint", &p.constraint},
                            {"reservation", &p.reservation},
                            {"comment", &p.comment},
                            {"licenses", &p.licenses}}) {
    if (node[key]) *field = String(node[key], absl::StrCat("slurm ", key)).value_or("");
  }
  if (node["exclusive"]) p.exclusive = Bool(node["exclusive"], "slurm exclusive").value_or(false);
  if (node["time_limit"]) {
    auto d = Duration(node["time_limit"], "slurm time_limit");
    if (d) p.time_limit_minutes = static_cast<int>(std::ceil(absl::ToDoubleMinutes(*d)));
  }
  if (const YAML::Node a = node["allocation"]; a && ExpectMap(a, "slurm allocation")) {
    CheckKeys(a, "slurm allocation",
              {"nodes", "gpus_per_node", "cpus_per_node", "memory", "max", "idle_timeout", "job"});
    auto& shape = p.allocation;
    if (a["job"]) {
      shape.job = static_cast<uint32_t>(
          Integer(a["job"], "slurm allocation job", 1, 0xfffffff0).value_or(0));
      if (a["max"])
        Error(a["max"],
              "slurm allocation: max has no meaning with job (hpod uses that one allocation)");
    }
    if (a["nodes"])
      allocation_nodes_ =
          static_cast<int>(Integer(a["nodes"], "slurm allocation nodes", 1, 4096).value_or(1));
    if (a["gpus_per_node"])
      allocation_gpus_ = static_cast<int>(
          Integer(a["gpus_per_node"], "slurm allocation gpus_per_node", 0, 1024).value_or(0));
    if (a["cpus_per_node"])
      allocation_cpus_ = static_cast<int>(
          Integer(a["cpus_per_node"], "slurm allocation cpus_per_node", 1, 100000).value_or(1));
    if (a["max"])
      allocation_max_ =
          static_cast<int>(Integer(a["max"], "slurm allocation max", 1, 1000).value_or(1));
    if (a["idle_timeout"])
      shape.idle_timeout =
          Duration(a["idle_timeout"], "slurm allocation idle_timeout").value_or(absl::Seconds(30));
    if (a["memory"]) {
      std::string m = String(a["memory"], "slurm allocation memory").value_or("");
      std::optional<int64_t> mb = MemoryMb(m);
      if (!mb)
        Error(
            a["memory"],
            absl::StrCat("slurm allocation memory must be a size like 64G or 512M, not '", m, "'"));
      else
        shape.memory_mb = *mb;
    }
    allocation_node_ = a;
  }
}

// "64G", "512M", "1T", "1024" (MB, as Slurm reads it).
std::optional<int64_t> Parser::MemoryMb(const std::string& text) {
  std::smatch m;
  static const std::regex kSize(R"(([0-9]+)\s*([KkMmGgTt]?)[Bb]?)");
  if (!std::regex_match(text, m, kSize)) return std::nullopt;
  int64_t n = 0;
  if (!absl::SimpleAtoi(m[1].str(), &n)) return std::nullopt;
  char unit = m[2].str().empty()
                  ? 'M'
                  : static_cast<char>(std::toupper(static_cast<unsigned char>(m[2].str()[0])));
  switch (unit) {
    case 'K':
      return std::max<int64_t>(1, n / 1024);
    case 'M':
      return n;
    case 'G':
      return n * 1024;
    default:
      return n * 1024 * 1024;
  }
}

// Steps mode: the allocation's shape, from the file where it says so and else from the trials.
void Parser::ResolveAllocation(SweepSpec& spec) {
  slurm::SlurmPlacement& p = slurm_;
  slurm::AllocationShape& a = p.allocation;
  const backend::Resources& r = spec.resources;  // gpus is the largest a trial asks for
  a.nodes = allocation_nodes_.value_or(r.nodes);
  a.gpus_per_node = allocation_gpus_.value_or(r.gpus);
  int min_gpus = spec.gpu_options.front();
  int trials_per_node = 1;
  if (allocation_gpus_ && min_gpus > 0) trials_per_node = std::max(1, *allocation_gpus_ / min_gpus);
  a.cpus_per_node = allocation_cpus_.value_or(r.cpus * r.tasks_per_node * trials_per_node);
  int per_allocation = std::max(1, trials_per_node * (a.nodes / std::max(1, r.nodes)));
  a.max = allocation_max_.value_or(static_cast<int>(
      std::min<int64_t>(16, (spec.budget.max_concurrent + per_allocation - 1) / per_allocation)));
  if (a.job != 0) a.max = 1;
  if (p.mode != "steps") return;
  const YAML::Node& where = allocation_node_ ? allocation_node_ : YAML::Node();
  if (r.nodes > a.nodes) {
    Error(where, absl::StrCat("slurm allocation has ", a.nodes, " node(s) but a trial asks for ",
                              r.nodes));
  }
  if (r.gpus > a.gpus_per_node) {
    Error(where, absl::StrCat("slurm allocation has ", a.gpus_per_node,
                              " GPU(s) per node but a trial asks for up to ", r.gpus));
  }
  if (r.cpus * r.tasks_per_node > a.cpus_per_node) {
    Error(where, absl::StrCat("slurm allocation has ", a.cpus_per_node,
                              " CPU(s) per node but a trial asks for ", r.cpus * r.tasks_per_node,
                              " per node (cpus x tasks_per_node)"));
  }
}

void Parser::Algorithm(const YAML::Node& node, SweepSpec& spec) {
  if (node.IsScalar()) {
    spec.algorithm.name = node.Scalar();
  } else if (ExpectMap(node, "algorithm")) {
    CheckKeys(node, "algorithm",
              {"name", "points", "shuffle", "startup_trials", "candidates", "multivariate",
               "population", "tournament", "crossover_rate", "mutation_rate", "mutation_scale",
               "elitism", "demes", "migration_interval", "quantile", "resample_rate", "perturb"});
    if (!node["name"])
      Error(node, "algorithm needs name: auto, random, grid, tpe, gp, genetic, pbt or nsga2");
    else if (node["name"].IsScalar() && node["name"].Scalar() == "auto" && node.size() > 1)
      Error(node,
            "algorithm auto chooses its own settings; name a sampler (tpe, grid, ...) to "
            "set them");
    else
      spec.algorithm.name = String(node["name"], "algorithm name").value_or("");
    if (node["points"])
      spec.algorithm.grid_points =
          static_cast<int>(Integer(node["points"], "algorithm points", 1, 10'000).value_or(5));
    if (node["shuffle"])
      spec.algorithm.grid_shuffle = Bool(node["shuffle"], "algorithm shuffle").value_or(false);
    if (node["startup_trials"])
      spec.algorithm.startup_trials = static_cast<int>(
          Integer(node["startup_trials"], "algorithm startup_trials", 1, 100000).value_or(10));
    if (node["candidates"])
      spec.algorithm.tpe_candidates = static_cast<int>(
          Integer(node["candidates"], "algorithm candidates", 1, 10000).value_or(24));
    if (node["multivariate"])
      spec.algorithm.tpe_multivariate =
          Bool(node["multivariate"], "algorithm multivariate").value_or(true);
    auto& a = spec.algorithm;
    for (auto [key, field, lo, hi] : {std::tuple{"population", &a.population, 2, 100000},
                                      {"tournament", &a.tournament, 1, 1000},
                                      {"elitism", &a.elitism, 0, 100000},
                                      {"demes", &a.demes, 1, 1000},
                                      {"migration_interval", &a.migration_interval, 0, 1000000}}) {
      if (node[key])
        *field = static_cast<int>(
            Integer(node[key], absl::StrCat("algorithm ", key), lo, hi).value_or(*field));
    }
    for (auto [key, field, lo, hi] : {std::tuple{"crossover_rate", &a.crossover_rate, 0.0, 1.0},
                                      {"mutation_rate", &a.mutation_rate, 0.0, 1.0},
                                      {"mutation_scale", &a.mutation_scale, 1e-9, 10.0},
                                      {"quantile", &a.pbt_quantile, 1e-9, 0.5},
                                      {"resample_rate", &a.pbt_resample_rate, 0.0, 1.0},
                                      {"perturb", &a.pbt_perturb, 1e-9, 0.999}}) {
      if (!node[key]) continue;
      std::optional<double> v = Number(node[key], absl::StrCat("algorithm ", key));
      if (v && (*v < lo || *v > hi))
        Error(node[key], absl::StrCat("algorithm ", key, " must be between ", lo, " and ", hi));
      else if (v)
        *field = *v;
    }
    if (spec.algorithm.name == "pbt" && !node["population"]) spec.algorithm.population = 8;
    if (spec.algorithm.name == "nsga2") {  // its own defaults for the genetic keys it shares
      a.nsga2_crossover_rate = node["crossover_rate"] ? a.crossover_rate : 0.9;
      a.nsga2_mutation_rate = node["mutation_rate"] ? a.mutation_rate : 0.0;
    }
    if (spec.algorithm.name == "genetic") {
      if (a.elitism >= a.population)
        Error(node["elitism"] ? node["elitism"] : node,
              "algorithm elitism must be below population");
      if (a.demes * 2 > a.population)
        Error(node["demes"] ? node["demes"] : node,
              "algorithm demes must be at most population / 2");
    }
  }
  const auto& names = algorithms::SamplerNames();
  if (std::find(names.begin(), names.end(), spec.algorithm.name) == names.end()) {
    Error(node.IsMap() && node["name"] ? node["name"] : node,
          absl::StrCat("unknown algorithm '", spec.algorithm.name,
                       "' (known: ", absl::StrJoin(names, ", "), ")"));
  }
}

void Parser::EarlyStopping(const YAML::Node& node, SweepSpec& spec) {
  if (node.IsScalar()) {
    spec.early_stopping.name = node.Scalar();
  } else if (ExpectMap(node, "early_stopping")) {
    CheckKeys(node, "early_stopping",
              {"name", "min_resource", "max_resource", "reduction_factor", "brackets", "bootstrap",
               "min_correlation", "unmeasured", "grace_steps", "min_trials"});
    auto& e = spec.early_stopping;
    if (node["name"]) e.name = String(node["name"], "early_stopping name").value_or("");
    constexpr int64_t kBig = int64_t{1} << 40;
    if (node["min_resource"])
      e.min_resource =
          Integer(node["min_resource"], "early_stopping min_resource", 1, kBig).value_or(1);
    if (node["max_resource"])
      e.max_resource =
          Integer(node["max_resource"], "early_stopping max_resource", 2, kBig).value_or(0);
    if (node["reduction_factor"])
      e.reduction_factor =
          Integer(node["reduction_factor"], "early_stopping reduction_factor", 2, 100).value_or(3);
    if (node["brackets"])
      e.brackets =
          static_cast<int>(Integer(node["brackets"], "early_stopping brackets", 1, 20).value_or(3));
    if (node["bootstrap"])
      e.bootstrap =
          Integer(node["bootstrap"], "early_stopping bootstrap", 0, 1'000'000).value_or(0);
    if (node["min_correlation"]) {
      std::optional<double> c = Number(node["min_correlation"], "early_stopping min_correlation");
      if (c && (*c < 0 || *c > 1)) {
        Error(node["min_correlation"], "early_stopping min_correlation must be between 0 and 1");
      } else if (c) {
        e.min_correlation = *c;
      }
      if (e.min_correlation > 0 && !node["max_resource"]) {
        Error(node["min_correlation"],
              "early_stopping min_correlation needs max_resource: the trials that reach it say "
              "which rungs predict their end");
      }
    }
    if (node["unmeasured"]) {
      std::string u = String(node["unmeasured"], "early_stopping unmeasured").value_or("");
      if (u != "stop" && u != "pass") {
        Error(node["unmeasured"], "early_stopping unmeasured must be stop or pass");
      } else if (e.min_correlation <= 0) {
        Error(node["unmeasured"], "early_stopping unmeasured goes with min_correlation");
      }
      e.unmeasured_stop = u == "stop";
    }
    if (node["grace_steps"])
      e.grace_steps =
          Integer(node["grace_steps"], "early_stopping grace_steps", 0, kBig).value_or(1);
    if (node["min_trials"])
      e.min_trials = static_cast<int>(
          Integer(node["min_trials"], "early_stopping min_trials", 1, 100000).value_or(3));
    if (e.max_resource != 0 && e.max_resource <= e.min_resource) {
      Error(node["max_resource"], "early_stopping max_resource must exceed min_resource");
    }
  }
  if (spec.early_stopping.name == "auto" && node.IsMap() && node.size() > 1) {
    Error(node,
          "early_stopping auto chooses its own settings; name a rule (asha, hyperband, "
          "median) to set them");
  }
  const auto& names = algorithms::StopperNames();
  if (std::find(names.begin(), names.end(), spec.early_stopping.name) == names.end()) {
    Error(node, absl::StrCat("unknown early_stopping '", spec.early_stopping.name,
                             "' (known: ", absl::StrJoin(names, ", "), ")"));
  }
}

void Parser::CheckTimes(const YAML::Node& root, const SweepSpec& spec) {
  const slurm::SlurmPlacement& p = slurm_;
  if (p.time_limit_minutes <= 0) return;
  absl::Duration limit = absl::Minutes(p.time_limit_minutes);
  const YAML::Node slurm = root["slurm"];
  if (p.mode == "steps" && spec.resources.time_limit > limit) {
    Error(root["resources"]["time_limit"],
          absl::StrCat("resources time_limit (", absl::FormatDuration(spec.resources.time_limit),
                       ") exceeds slurm time_limit (", absl::FormatDuration(limit),
                       "): no allocation would hold a trial"));
  }
  if (p.mode == "jobs" && spec.resources.time_limit > absl::ZeroDuration()) {
    Error(slurm["time_limit"],
          "in jobs mode a trial's job has one time limit: give resources time_limit or slurm "
          "time_limit, not both");
  }
  absl::Duration segment = spec.resources.time_limit > absl::ZeroDuration()
                               ? std::min(spec.resources.time_limit, limit)
                               : limit;
  if (spec.checkpoint.resumable && spec.checkpoint.grace >= segment) {
    Error(root["checkpoint"]["grace"] ? root["checkpoint"]["grace"] : root["checkpoint"],
          absl::StrCat("checkpoint grace (", absl::FormatDuration(spec.checkpoint.grace),
                       ") must be shorter than the time limit (", absl::FormatDuration(segment),
                       "): a trial would be told to checkpoint before it started"));
  }
}

void Parser::Top(const YAML::Node& root, SweepSpec& spec) {
  if (!root.IsMap()) {
    Error(root, "a sweep file must be a mapping with at least parameters, objective and command");
    return;
  }
  CheckKeys(root, "the sweep",
            {"name",      "parameters",  "objective",   "objectives",     "constraints",
             "command",   "pass_params", "env",         "workdir",        "budget",
             "resources", "slurm",       "algorithm",   "early_stopping", "seed",
             "fom_regex", "stop_grace",  "stop_signal", "max_retries",    "checkpoint",
             "backend",   "enqueue",     "warm_start",  "external",       "health",
             "failures",  "plan",        "pilot"});
  if (root["name"]) spec.name = String(root["name"], "name").value_or("");
  if (spec.name.size() > 200) Error(root["name"], "name is longer than 200 characters");
  // Parameters first: the command's placeholders are checked against them.
  if (root["parameters"])
    Parameters(root["parameters"], spec);
  else
    Error(root, "missing parameters (the search space)");
  if (root["objective"] && root["objectives"]) {
    Error(root["objectives"], "give objective (one) or objectives (several), not both");
  } else if (root["objective"]) {
    Objective_(root["objective"], spec);
  } else if (root["objectives"]) {
    Objectives(root["objectives"], spec);
  } else {
    Error(root, "missing objective (metric and direction), or objectives");
  }
  if (root["constraints"]) Constraints(root["constraints"], spec);
  const bool external =
      root["backend"] && root["backend"].IsScalar() && root["backend"].Scalar() == "external";
  if (root["command"])
    Command(root["command"], spec);
  else if (!external)
    Error(root, "missing command (the trial program)");
  if (const YAML::Node& x = root["external"]; x && ExpectMap(x, "external")) {
    CheckKeys(x, "external", {"timeout"});
    if (!external) Error(x, "external: belongs to a sweep with backend: external");
    if (x["timeout"]) {
      std::optional<absl::Duration> d = Duration(x["timeout"], "external timeout");
      if (d && *d <= absl::ZeroDuration())
        Error(x["timeout"], "external timeout must be above 0");
      else if (d)
        spec.external_timeout = *d;
    }
  }
  if (root["pass_params"]) {
    std::string mode = String(root["pass_params"], "pass_params").value_or("");
    if (mode == "flags")
      spec.pass_flags = true;
    else if (mode != "none")
      Error(root["pass_params"], "pass_params must be flags or none");
  }
  if (root["env"] && ExpectMap(root["env"], "env")) {
    for (const auto& kv : root["env"]) {
      std::string key = kv.first.Scalar();
      if (key.empty() || key.find('=') != std::string::npos)
        Error(kv.first, absl::StrCat("env: bad variable name '", key, "'"));
      else if (key.rfind("HPO_", 0) == 0)
        Error(kv.first, absl::StrCat("env: ", key, " is set by hpod"));
      else if (auto v = String(kv.second, absl::StrCat("env ", key)))
        spec.env[key] = *v;
    }
  }
  spec.workdir = base_dir_;
  if (root["workdir"]) {
    if (auto w = String(root["workdir"], "workdir")) spec.workdir = AbsolutePath(*w, base_dir_);
  }
  if (root["budget"]) Budget_(root["budget"], spec);
  if (root["resources"]) Resources(root["resources"], spec);
  if (root["slurm"]) Slurm(root["slurm"]);
  // Where it runs: as the file says; a sweep with a slurm: section asks for Slurm; else the
  // daemon's default (left empty here).
  if (root["backend"]) {
    spec.placement.backend = String(root["backend"], "backend").value_or("");
    if (spec.placement.backend != "local" && spec.placement.backend != "slurm" &&
        spec.placement.backend != "external")
      Error(root["backend"], "backend must be local, slurm or external");
  } else if (root["slurm"]) {
    spec.placement.backend = "slurm";
  }
  if (spec.gpu_options.empty()) spec.gpu_options = {spec.resources.gpus};
  ResolveAllocation(spec);
  spec.placement.details = std::make_shared<const slurm::SlurmPlacement>(slurm_);
  if (root["algorithm"]) Algorithm(root["algorithm"], spec);
  if (spec.algorithm.name == "pbt" && spec.budget.max_concurrent > spec.algorithm.population) {
    Error(root["budget"] ? root["budget"] : root,
          absl::StrCat("pbt trains ", spec.algorithm.population,
                       " members, one segment each at a time: budget.max_concurrent (",
                       spec.budget.max_concurrent, ") must not exceed algorithm population"));
  }
  if (root["early_stopping"]) EarlyStopping(root["early_stopping"], spec);
  if (root["seed"])
    spec.seed = static_cast<uint64_t>(Integer(root["seed"], "seed", 0, INT64_MAX).value_or(0));
  spec.fom_regex = kDefaultFomRegex;
  if (root["fom_regex"]) {
    std::string re = String(root["fom_regex"], "fom_regex").value_or("");
    if (auto compiled = CompilePattern(re, /*ignore_case=*/true); !compiled.ok()) {
      Error(root["fom_regex"], absl::StrCat("fom_regex is not a valid regular expression: ",
                                            compiled.status().message()));
    } else if (Groups(**compiled) < 1) {
      Error(root["fom_regex"], "fom_regex needs a capture group ( ) around the number");
    } else {
      spec.fom_regex = re;
    }
  }
  if (root["stop_grace"])
    spec.stop_grace = Duration(root["stop_grace"], "stop_grace").value_or(spec.stop_grace);
  if (root["stop_signal"]) {
    std::string sig = String(root["stop_signal"], "stop_signal").value_or("");
    if (std::optional<int> n = SignalNumber(sig))
      spec.stop_signal = *n;
    else
      Error(root["stop_signal"],
            absl::StrCat("stop_signal must be a signal name like SIGTERM or SIGUSR1, not '", sig,
                         "'"));
  }
  if (root["max_retries"])
    spec.max_retries = static_cast<int>(
        Integer(root["max_retries"], "max_retries", 0, 100).value_or(spec.max_retries));
  if (root["checkpoint"]) Checkpoint(root["checkpoint"], spec);
  if (root["health"]) HealthSection(root["health"], spec);
  if (root["failures"]) Failures(root["failures"], spec);
  if (root["plan"]) PlanSection(root["plan"], spec);
  if (root["pilot"]) PilotSection(root["pilot"], spec);
  if (root["enqueue"]) Enqueue(root["enqueue"], spec);
  if (const YAML::Node& w = root["warm_start"]; w && ExpectMap(w, "warm_start")) {
    CheckKeys(w, "warm_start", {"sweep"});
    if (!w["sweep"])
      Error(w, "warm_start needs sweep: the id of the earlier sweep");
    else
      spec.warm_start_sweep = Integer(w["sweep"], "warm_start sweep", 1, INT64_MAX).value_or(0);
  }
  CheckTimes(root, spec);
  CheckGpuBudget(root, spec);
  if (spec.Pareto() && spec.early_stopping.name == "median") {
    Error(root["early_stopping"],
          "early_stopping median compares one objective; with several objectives or constraints "
          "use asha or hyperband (multi-objective ASHA)");
  }
  if (spec.Pareto() && spec.objective.goal) {
    Error(root["objective"]["goal"], "objective goal does not go with constraints");
  }

  // What `auto` chooses by: the budget, and a trial's length when the file says.
  spec.algorithm.max_trials = spec.budget.max_trials;
  spec.algorithm.concurrency = spec.budget.max_concurrent;
  if (spec.plan.steps > 0) {
    spec.early_stopping.steps = spec.plan.steps;
    spec.early_stopping.steps_from = "plan.steps";
  }
  if (spec.algorithm.name == "pbt") {
    spec.early_stopping.none_because =
        "pbt decides itself which members train on, from their checkpoints";
  }
  if (spec.budget.max_trial_steps > 0 &&
      (spec.early_stopping.steps == 0 || spec.budget.max_trial_steps < spec.early_stopping.steps)) {
    spec.early_stopping.steps = spec.budget.max_trial_steps;
    spec.early_stopping.steps_from = "budget.max_trial_steps";
  }

  if (!errors_.empty()) return;
  auto sampler = algorithms::MakeSampler(spec.algorithm, spec.space, spec.Pareto());
  if (!sampler.ok()) {
    Error(root["algorithm"] ? root["algorithm"] : root, sampler.status().message());
    return;
  }
  sampler_ = std::move(*sampler);
  if (spec.budget.max_trials > 0 &&
      static_cast<int64_t>(spec.enqueue.size()) > spec.budget.max_trials) {
    Error(root["enqueue"], absl::StrCat("enqueue: ", spec.enqueue.size(),
                                        " configurations, more than budget.max_trials (",
                                        spec.budget.max_trials, "); they count toward it"));
  } else if (spec.budget.max_trials == 0 && !sampler_->MaxTrials(spec.space) &&
             !spec.budget.wall_time) {
    Error(root["budget"] ? root["budget"] : root,
          absl::StrCat(
              spec.algorithm.name,
              " search never runs out of trials: set budget.max_trials or budget.wall_time"));
  }
}

}  // namespace hpo::server::spec_parse

namespace hpo::server {

using spec_parse::Parser;

void Parser::CheckDuplicateKeys(const YAML::Node& root) {
  std::vector<YAML::Node> stack = {root};  // not recursion: nesting may be deep
  // Each collection once, known by where it starts: aliases share nodes, and a file of aliases
  // of aliases would otherwise be walked exponentially often.
  std::set<std::pair<int, bool>> seen;
  std::vector<std::pair<YAML::Mark, std::string>> twice;
  while (!stack.empty()) {
    YAML::Node node = stack.back();
    stack.pop_back();
    if ((node.IsSequence() || node.IsMap()) &&
        !seen.emplace(node.Mark().pos, node.IsMap()).second) {
      continue;
    }
    if (node.IsSequence()) {
      for (const YAML::Node& item : node) stack.push_back(item);
    } else if (node.IsMap()) {
      std::map<std::string, int> first_line;
      for (const auto& kv : node) {
        if (kv.first.IsScalar()) {
          auto [it, fresh] = first_line.emplace(kv.first.Scalar(), kv.first.Mark().line + 1);
          if (!fresh) {
            twice.emplace_back(kv.first.Mark(),
                               absl::StrCat("'", kv.first.Scalar(),
                                            "' is given twice (first on line ", it->second, ")"));
          }
        }
        stack.push_back(kv.second);
      }
    }
  }
  std::sort(twice.begin(), twice.end(),
            [](const auto& a, const auto& b) { return a.first.pos < b.first.pos; });
  for (const auto& [mark, msg] : twice) Error(mark, msg);
}

const std::vector<SpecDefaults>& SpecDefaultVersions() {
  // Version 1: auto sampler and stopper, the hang watchdog at the trial's own pace, fail-fast,
  // the built-in infrastructure rules; quarantine without a cap or an end, no budget for
  // infrastructure failures.
  // Version 2: quarantine of at most half the sweep's nodes, for an hour; a pause at every 20
  // trials lost to the infrastructure.
  static const std::vector<SpecDefaults> versions = [] {
    SpecDefaults v1;
    v1.version = 1;
    v1.quarantine_max_share = 1;
    v1.quarantine_for = absl::ZeroDuration();
    v1.max_infrastructure = 0;
    SpecDefaults v2;
    v2.version = 2;
    return std::vector<SpecDefaults>{v1, v2};
  }();
  return versions;
}

namespace {

// A new spec with the defaults of `d` filled in.
SweepSpec WithDefaults(const SpecDefaults& d) {
  SweepSpec spec;
  spec.algorithm.name = d.algorithm;
  spec.early_stopping.name = d.early_stopping;
  spec.budget.max_concurrent = d.max_concurrent;
  spec.budget.max_failed = d.max_failed;
  spec.stop_grace = d.stop_grace;
  spec.stop_signal = d.stop_signal;
  spec.max_retries = d.max_retries;
  spec.checkpoint = d.checkpoint;
  spec.health = d.health;
  spec.failures.defaults = d.failure_rules;
  spec.failures.quarantine_after = d.quarantine_after;
  spec.failures.quarantine_max_share = d.quarantine_max_share;
  spec.failures.quarantine_for = d.quarantine_for;
  spec.failures.max_infrastructure = d.max_infrastructure;
  spec.external_timeout = d.external_timeout;
  return spec;
}

}  // namespace

ParseResult ParseSweepSpec(const std::string& yaml, const std::string& source,
                           const std::string& base_dir, const ParseOptions& options) {
  ParseResult result;
  std::string name = source.empty() ? "<spec>" : source;
  if (yaml.size() > kMaxSpecBytes) {
    result.errors.push_back(
        absl::StrCat(name, ": the sweep file is ", yaml.size(), " bytes; at most ", kMaxSpecBytes));
    return result;
  }
  Parser parser(name, AbsolutePath(base_dir.empty() ? "." : base_dir), options.lenient);
  SweepSpec spec =
      WithDefaults(options.defaults != nullptr ? *options.defaults : SpecDefaultVersions().back());
  spec.source = name;
  spec.base_dir = AbsolutePath(base_dir.empty() ? "." : base_dir);
  try {
    YAML::Node root = YAML::Load(yaml);
    if (!root || root.IsNull()) {
      result.errors.push_back(absl::StrCat(name, ":1:1: the sweep file is empty"));
      return result;
    }
    parser.CheckDuplicateKeys(root);
    if (parser.errors().empty()) parser.Top(root, spec);
  } catch (const YAML::Exception& e) {
    parser.Error(e.mark, absl::StrCat("YAML syntax error: ", e.msg));
  }
  result.errors = std::move(parser.errors());
  result.warnings = std::move(parser.warnings());
  // Lenient: what could not be read does not keep a sweep from running; only a spec no sampler
  // can be built for does (its warnings are then the errors).
  if (options.lenient && result.errors.empty() && parser.sampler() == nullptr) {
    result.errors = std::move(result.warnings);
    result.warnings.clear();
    if (result.errors.empty()) result.errors.push_back(name + ": no sampler can run it");
  }
  if (result.errors.empty()) {
    result.spec = std::move(spec);
    result.sampler = std::move(parser.sampler());
  }
  return result;
}

}  // namespace hpo::server
