#include "bench/problems.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/functions.h"

namespace hpo::bench {
namespace {

using algorithms::Direction;
using algorithms::ParamDef;
using algorithms::Params;
using algorithms::ParamType;
using algorithms::ParamValue;

constexpr double kPi = 3.14159265358979323846;
constexpr double kReference = 1.1;

double Num(const Params& p, const std::string& k) { return *algorithms::NumericValue(p.at(k)); }

ParamDef Unit(const std::string& name) {
  ParamDef p;
  p.name = name;
  p.low = 0;
  p.high = 1;
  return p;
}

// A synthetic problem over x1..x6 in [0, 1] whose `metrics` are all minimized.
Problem Synthetic(const std::string& key, const std::string& name,
                  const std::vector<std::string>& metrics) {
  Problem p;
  p.key = key;
  p.name = name;
  for (int i = 1; i <= 6; ++i) p.space.params.push_back(Unit("x" + std::to_string(i)));
  p.metrics = metrics;
  p.directions.assign(metrics.size(), Direction::kMinimize);
  return p;
}

// How far a synthetic configuration's curve is from its end value at `epoch`.
double Lag(const Params& x, int epoch) {
  return 0.3 * std::exp(-epoch * (0.5 + Num(x, "x1")) / 9.0);
}

// The scaled volume of points given as rows of minimized values.
double FrontVolume(const Problem& p, const std::vector<std::vector<double>>& rows) {
  algorithms::Points scaled;
  scaled.k = p.metrics.size();
  for (const auto& r : rows) {
    std::vector<double> s;
    for (size_t j = 0; j < r.size(); ++j) s.push_back((r[j] - p.lo[j]) / (p.hi[j] - p.lo[j]));
    scaled.Add(s, {});
  }
  return ScaledVolume(scaled);
}

// A parameter value as the table writes it: an integer, a number, or text.
ParamValue Typed(const std::string& text) {
  int64_t i = 0;
  double d = 0;
  if (absl::SimpleAtoi(text, &i)) return i;
  if (absl::SimpleAtod(text, &d)) return d;
  return text;
}

}  // namespace

double ScaledVolume(const algorithms::Points& scaled) {
  std::vector<double> reference(scaled.k, kReference);
  return algorithms::Hypervolume(scaled, reference);
}

Problem Hartmann6Curve() {
  Problem p = Synthetic("hartmann6", "Hartmann-6 with learning curves (synthetic)", {"value"});
  p.value = [](const Params& x, int epoch) {
    return std::vector<double>{Hartmann6(x) + 2.0 * std::exp(-epoch * (0.5 + Num(x, "x1")) / 9.0)};
  };
  // The optimum's x1 is 0.2017: its curve ends 2 exp(-27 * 0.7017 / 9) above H6's minimum.
  p.best = -3.32237 + 2.0 * std::exp(-27 * 0.7017 / 9.0);
  return p;
}

Problem Zdt1Curve() {
  Problem p =
      Synthetic("zdt1", "ZDT1 with learning curves (synthetic, two objectives)", {"f1", "f2"});
  p.value = [](const Params& x, int epoch) {
    double f1 = Num(x, "x1"), sum = 0;
    for (int i = 2; i <= 6; ++i) sum += Num(x, "x" + std::to_string(i));
    double g = 1 + 9 * sum / 5, lag = Lag(x, epoch);
    return std::vector<double>{f1 + lag, g * (1 - std::sqrt(f1 / g)) + lag};
  };
  // f2 of a random configuration is about 5: the scale takes in most of what a search sees.
  p.lo = {0, 0};
  p.hi = {1, 6};
  // The front: g = 1 (x2..x6 = 0), every x1, at the last epoch.
  std::vector<std::vector<double>> front;
  for (int i = 0; i <= 10000; ++i) {
    Params x = {{"x1", i / 10000.0}};
    for (int j = 2; j <= 6; ++j) x["x" + std::to_string(j)] = 0.0;
    front.push_back(p.value(x, p.steps));
  }
  p.best = FrontVolume(p, front);
  return p;
}

Problem Dtlz2Curve() {
  Problem p = Synthetic("dtlz2", "DTLZ2 with learning curves (synthetic, three objectives)",
                        {"f1", "f2", "f3"});
  p.value = [](const Params& x, int epoch) {
    double g = 0;
    for (int i = 3; i <= 6; ++i) g += std::pow(Num(x, "x" + std::to_string(i)) - 0.5, 2);
    double a = Num(x, "x1") * kPi / 2, b = Num(x, "x2") * kPi / 2, lag = Lag(x, epoch);
    return std::vector<double>{(1 + g) * std::cos(a) * std::cos(b) + lag,
                               (1 + g) * std::cos(a) * std::sin(b) + lag,
                               (1 + g) * std::sin(a) + lag};
  };
  p.lo = {0, 0, 0};
  p.hi = {2, 2, 2};
  // The front: g = 0 (x3..x6 = 1/2), on a 201 x 201 grid of (x1, x2), at the last epoch.
  std::vector<std::vector<double>> front;
  for (int i = 0; i <= 200; ++i) {
    for (int j = 0; j <= 200; ++j) {
      Params x = {{"x1", i / 200.0}, {"x2", j / 200.0}};
      for (int k = 3; k <= 6; ++k) x["x" + std::to_string(k)] = 0.5;
      front.push_back(p.value(x, p.steps));
    }
  }
  p.best = FrontVolume(p, front);
  return p;
}

absl::StatusOr<Problem> LoadTable(const std::string& path,
                                  const std::vector<std::string>& directives,
                                  const std::vector<std::string>& objectives) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", path));
  struct Param {
    std::string name, type;
    bool log = false;
  };
  std::vector<Param> params;
  std::string step_column;
  std::vector<std::pair<std::string, Direction>> metrics;
  std::string description;
  auto directive = [&](const std::string& text, const std::string& where) -> absl::Status {
    std::vector<std::string> w = absl::StrSplit(text, ' ', absl::SkipWhitespace());
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": '", text, "': ", why));
    };
    if (w.empty()) return absl::OkStatus();
    if (w[0] == "param") {
      if (w.size() < 3 || (w[2] != "float" && w[2] != "int" && w[2] != "categorical") ||
          (w.size() == 4 && w[3] != "log") || w.size() > 4) {
        return bad("give param NAME float|int|categorical [log]");
      }
      params.erase(std::remove_if(params.begin(), params.end(),
                                  [&](const Param& p) { return p.name == w[1]; }),
                   params.end());
      params.push_back({w[1], w[2], w.size() == 4});
    } else if (w[0] == "step") {
      if (w.size() != 2) return bad("give step NAME");
      step_column = w[1];
    } else if (w[0] == "metric") {
      if (w.size() != 3 || (w[2] != "minimize" && w[2] != "maximize")) {
        return bad("give metric NAME minimize|maximize");
      }
      metrics.erase(std::remove_if(metrics.begin(), metrics.end(),
                                   [&](const auto& m) { return m.first == w[1]; }),
                    metrics.end());
      metrics.emplace_back(w[1], w[2] == "maximize" ? Direction::kMaximize : Direction::kMinimize);
    }
    return absl::OkStatus();
  };
  std::string line;
  std::vector<std::string> header;
  int line_no = 0;
  // Rows by configuration (the parameter columns' text), in the order first seen.
  std::vector<std::string> order;
  std::map<std::string, std::map<int64_t, std::vector<double>>> rows;
  std::map<std::string, std::vector<std::string>> config_text;
  std::vector<int> param_col, metric_col;
  int step_col = -1;
  while (std::getline(in, line)) {
    ++line_no;
    std::string where = absl::StrCat(path, ":", line_no);
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::string text(absl::StripAsciiWhitespace(line.substr(1)));
      if (absl::StartsWith(text, "param ") || absl::StartsWith(text, "step ") ||
          absl::StartsWith(text, "metric ")) {
        if (absl::Status s = directive(text, where); !s.ok()) return s;
      } else if (absl::StartsWith(text, "name ")) {
        description = std::string(absl::StripAsciiWhitespace(text.substr(5)));
      }
      continue;
    }
    std::vector<std::string> f = absl::StrSplit(line, ',');
    if (header.empty()) {
      header = f;
      for (const std::string& d : directives) {
        if (absl::Status s = directive(d, "--directive"); !s.ok()) return s;
      }
      auto column = [&](const std::string& name) -> int {
        auto it = std::find(header.begin(), header.end(), name);
        return it == header.end() ? -1 : static_cast<int>(it - header.begin());
      };
      for (const Param& p : params) {
        param_col.push_back(column(p.name));
        if (param_col.back() < 0) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": no column for param ", p.name));
        }
      }
      step_col = column(step_column);
      if (step_col < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": no step column ('", step_column, "'; give # step NAME)"));
      }
      if (!objectives.empty()) {  // the chosen metrics, in the order given
        std::vector<std::pair<std::string, Direction>> chosen;
        for (const std::string& o : objectives) {
          auto it = std::find_if(metrics.begin(), metrics.end(),
                                 [&](const auto& m) { return m.first == o; });
          if (it == metrics.end()) {
            return absl::InvalidArgumentError(
                absl::StrCat(path, ": objective ", o, " is not a metric of the table"));
          }
          chosen.push_back(*it);
        }
        metrics = chosen;
      }
      if (params.empty() || metrics.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": the table needs # param and # metric lines"));
      }
      for (const auto& [name, direction] : metrics) {
        metric_col.push_back(column(name));
        if (metric_col.back() < 0) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": no column for metric ", name));
        }
      }
      continue;
    }
    if (f.size() != header.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", f.size(), " fields, the header has ", header.size()));
    }
    std::vector<std::string> key_parts;
    for (int c : param_col) key_parts.push_back(f[static_cast<size_t>(c)]);
    std::string key = absl::StrJoin(key_parts, ",");
    int64_t step = 0;
    if (!absl::SimpleAtoi(f[static_cast<size_t>(step_col)], &step)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": step '", f[static_cast<size_t>(step_col)], "' is not an integer"));
    }
    std::vector<double> values;
    for (int c : metric_col) {
      double v = 0;
      if (!absl::SimpleAtod(f[static_cast<size_t>(c)], &v) || !std::isfinite(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": '", f[static_cast<size_t>(c)], "' is not a finite number"));
      }
      values.push_back(v);
    }
    if (!rows.count(key)) {
      order.push_back(key);
      config_text[key] = key_parts;
    }
    rows[key][step] = std::move(values);
  }
  if (order.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no rows"));

  Problem p;
  p.key = "table:" + path;
  p.name = description.empty() ? path : description;
  for (const auto& [name, direction] : metrics) {
    p.metrics.push_back(name);
    p.directions.push_back(direction);
  }
  if (p.metrics.size() > 1 || !objectives.empty()) {  // which metrics are the objectives
    absl::StrAppend(&p.name, ": ", absl::StrJoin(p.metrics.begin(), p.metrics.end() - 1, ", "),
                    p.metrics.size() > 1 ? " and " : "", p.metrics.back());
  }
  // Every configuration has every step.
  std::vector<int64_t> steps;
  for (const auto& [s, v] : rows[order.front()]) steps.push_back(s);
  for (const std::string& key : order) {
    if (rows[key].size() != steps.size()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": configuration ", key, " has ",
                                                     rows[key].size(), " steps, the first ",
                                                     steps.size()));
    }
  }
  p.steps = static_cast<int>(steps.size());
  // The space: each numeric parameter over the table's range; categorical choices as seen.
  for (size_t i = 0; i < params.size(); ++i) {
    ParamDef d;
    d.name = params[i].name;
    if (params[i].type == "categorical") {
      d.type = ParamType::kCategorical;
      for (const std::string& key : order) {
        ParamValue v = Typed(config_text[key][i]);
        if (std::find(d.choices.begin(), d.choices.end(), v) == d.choices.end())
          d.choices.push_back(v);
      }
    } else {
      d.type = params[i].type == "int" ? ParamType::kInt : ParamType::kFloat;
      d.log = params[i].log;
      d.low = 1e300;
      d.high = -1e300;
      for (const std::string& key : order) {
        double v = 0;
        if (!absl::SimpleAtod(config_text[key][i], &v) || (d.log && v <= 0)) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": ", d.name, " = '", config_text[key][i],
                           d.log ? "' is not a number above 0" : "' is not a number"));
        }
        d.low = std::min(d.low, v);
        d.high = std::max(d.high, v);
      }
    }
    p.space.params.push_back(d);
  }
  // Each configuration as coordinates, and its curves.
  struct Config {
    std::vector<double> unit;             // numeric parameters, scaled to [0, 1]
    std::vector<ParamValue> category;     // categorical ones
    std::vector<std::vector<double>> at;  // [step index][metric]
  };
  const algorithms::SearchSpace space = p.space;
  auto coordinates = [space](const std::vector<ParamValue>& values, Config& c) {
    for (size_t i = 0; i < space.params.size(); ++i) {
      const ParamDef& d = space.params[i];
      if (d.type == ParamType::kCategorical) {
        c.category.push_back(values[i]);
        continue;
      }
      double v = *algorithms::NumericValue(values[i]);
      double lo = d.log ? std::log(d.low) : d.low, hi = d.log ? std::log(d.high) : d.high;
      c.unit.push_back(hi > lo ? ((d.log ? std::log(v) : v) - lo) / (hi - lo) : 0.0);
    }
  };
  auto configs = std::make_shared<std::vector<Config>>();
  for (const std::string& key : order) {
    Config c;
    std::vector<ParamValue> values;
    for (const std::string& t : config_text[key]) values.push_back(Typed(t));
    coordinates(values, c);
    for (int64_t s : steps) c.at.push_back(rows[key][s]);
    configs->push_back(std::move(c));
  }
  p.value = [configs, coordinates, space](const Params& x, int step) {
    Config want;
    std::vector<ParamValue> values;
    for (const ParamDef& d : space.params) values.push_back(x.at(d.name));
    coordinates(values, want);
    size_t nearest = 0;
    double best = 1e300;
    for (size_t i = 0; i < configs->size(); ++i) {
      const Config& c = (*configs)[i];
      double d2 = 0;
      for (size_t j = 0; j < c.unit.size(); ++j) d2 += std::pow(c.unit[j] - want.unit[j], 2);
      for (size_t j = 0; j < c.category.size(); ++j)
        d2 += c.category[j] == want.category[j] ? 0 : 1;
      if (d2 < best) best = d2, nearest = i;
    }
    return (*configs)[nearest].at[static_cast<size_t>(step - 1)];
  };
  // What is best: one objective, its best value; several, the volume of every point's front.
  std::vector<std::vector<double>> all;
  for (const Config& c : *configs) {
    for (const auto& v : c.at) {
      std::vector<double> m;
      for (size_t j = 0; j < v.size(); ++j)
        m.push_back(algorithms::Minimized(v[j], p.directions[j]));
      all.push_back(std::move(m));
    }
  }
  if (!p.multi()) {
    p.best = 1e300;
    for (const auto& m : all) p.best = std::min(p.best, m[0]);
    return p;
  }
  p.lo.assign(p.metrics.size(), 1e300);
  p.hi.assign(p.metrics.size(), -1e300);
  for (const auto& m : all) {
    for (size_t j = 0; j < m.size(); ++j) {
      p.lo[j] = std::min(p.lo[j], m[j]);
      p.hi[j] = std::max(p.hi[j], m[j]);
    }
  }
  p.best = FrontVolume(p, all);
  return p;
}

double Score::Add(const std::vector<double>& values) {
  const Problem& p = problem_;
  if (!p.multi()) {
    best_ = std::min(best_, algorithms::Minimized(values[0], p.directions[0]));
    return best_ - p.best;
  }
  std::vector<double> s;
  for (size_t j = 0; j < values.size(); ++j) {
    s.push_back((algorithms::Minimized(values[j], p.directions[j]) - p.lo[j]) /
                (p.hi[j] - p.lo[j]));
  }
  front_.k = s.size();
  for (size_t i = 0; i < front_.size(); ++i) {
    const double* f = front_.row(i);
    if (algorithms::Dominates(f, s.data(), s.size()) || std::equal(s.begin(), s.end(), f)) {
      return p.best - volume_;  // nothing new
    }
  }
  algorithms::Points next;
  next.k = s.size();
  for (size_t i = 0; i < front_.size(); ++i) {
    if (!algorithms::Dominates(s.data(), front_.row(i), s.size())) {
      next.Add({front_.row(i), s.size()}, {});
    }
  }
  next.Add(s, {});
  front_ = std::move(next);
  volume_ = ScaledVolume(front_);
  return p.best - volume_;
}

// The sweep file's `parameters:` for a space.
std::string ParametersYaml(const algorithms::SearchSpace& space) {
  std::string out = "parameters:\n";
  for (const algorithms::ParamDef& p : space.params) {
    if (p.type == algorithms::ParamType::kCategorical) {
      std::vector<std::string> v;
      for (const algorithms::ParamValue& c : p.choices) v.push_back(algorithms::FormatValue(c));
      absl::StrAppend(&out, "  ", p.name, ": {type: categorical, values: [", absl::StrJoin(v, ", "),
                      "]}\n");
    } else {
      absl::StrAppend(
          &out, "  ", p.name, ": {type: ", p.type == algorithms::ParamType::kInt ? "int" : "float",
          ", low: ", algorithms::FormatValue(p.low), ", high: ", algorithms::FormatValue(p.high),
          p.log ? ", log: true" : "", "}\n");
    }
  }
  return out;
}

// The sweep file's objective(s) for a problem.
std::string ObjectivesYaml(const Problem& problem) {
  auto dir = [](algorithms::Direction d) {
    return d == algorithms::Direction::kMinimize ? "minimize" : "maximize";
  };
  if (!problem.multi()) {
    return absl::StrCat("objective: {metric: ", problem.metrics[0],
                        ", direction: ", dir(problem.directions[0]), "}\n");
  }
  std::string out = "objectives:\n";
  for (size_t j = 0; j < problem.metrics.size(); ++j) {
    absl::StrAppend(&out, "  - {metric: ", problem.metrics[j],
                    ", direction: ", dir(problem.directions[j]), "}\n");
  }
  return out;
}

// A trial's parameters, read back from its `--name=value` arguments.
algorithms::Params ParamsFromArgv(const algorithms::SearchSpace& space,
                                  const std::vector<std::string>& argv) {
  algorithms::Params out;
  for (const std::string& arg : argv) {
    auto eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) continue;
    std::string name = arg.substr(2, eq - 2), text = arg.substr(eq + 1);
    for (const algorithms::ParamDef& p : space.params) {
      if (p.name != name) continue;
      if (p.type == algorithms::ParamType::kCategorical) {
        for (const algorithms::ParamValue& c : p.choices) {
          if (algorithms::FormatValue(c) == text) out[name] = c;
        }
      } else if (p.type == algorithms::ParamType::kInt) {
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

}  // namespace hpo::bench
