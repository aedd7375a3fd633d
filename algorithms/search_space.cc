#include "algorithms/search_space.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace hpo::algorithms {

std::optional<int64_t> ParamDef::Cardinality() const {
  switch (type) {
    case ParamType::kFixed:
      return 1;
    case ParamType::kCategorical:
      return static_cast<int64_t>(choices.size());
    case ParamType::kInt:
      return static_cast<int64_t>(std::floor((high - low) / step.value_or(1.0) + 1e-9)) + 1;
    case ParamType::kFloat:
      if (!step) return std::nullopt;
      return static_cast<int64_t>(std::floor((high - low) / *step + 1e-9)) + 1;
  }
  return std::nullopt;
}

absl::Status SearchSpace::Validate() const {
  if (params.empty()) return absl::InvalidArgumentError("the search space has no parameters");
  std::set<std::string> names;
  for (const ParamDef& p : params) {
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name, "': ", what));
    };
    if (!names.insert(p.name).second) return bad("defined twice");
    if (p.type == ParamType::kFloat || p.type == ParamType::kInt) {
      if (!std::isfinite(p.low) || !std::isfinite(p.high)) return bad("bounds must be finite");
      if (p.low > p.high) return bad("low must not exceed high");
      if (p.log && p.low <= 0) return bad("log scale needs low > 0");
      if (p.step && !(*p.step > 0)) return bad("step must be > 0");
      if (p.step && p.log) return bad("step and log cannot be combined");
      if (p.type == ParamType::kInt) {
        if (p.low != std::floor(p.low) || p.high != std::floor(p.high)) {
          return bad("int bounds must be integers");
        }
        if (p.step && *p.step != std::floor(*p.step)) return bad("int step must be an integer");
        if (std::fabs(p.low) > 9e15 || std::fabs(p.high) > 9e15) return bad("int bounds too large");
      }
    }
    if (p.type == ParamType::kCategorical && p.choices.empty())
      return bad("needs at least one value");
  }
  return absl::OkStatus();
}

const ParamDef* SearchSpace::Find(const std::string& name) const {
  for (const ParamDef& p : params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

bool SearchSpace::Contains(const Params& values) const {
  if (values.size() != params.size()) return false;
  for (const ParamDef& p : params) {
    auto it = values.find(p.name);
    if (it == values.end()) return false;
    const ParamValue& v = it->second;
    switch (p.type) {
      case ParamType::kFloat: {
        const double* d = std::get_if<double>(&v);
        if (d == nullptr || *d < p.low || *d > p.high) return false;
        break;
      }
      case ParamType::kInt: {
        const int64_t* i = std::get_if<int64_t>(&v);
        if (i == nullptr || *i < p.low || *i > p.high) return false;
        break;
      }
      case ParamType::kCategorical: {
        bool found = false;
        for (const ParamValue& c : p.choices) found = found || c == v;
        if (!found) return false;
        break;
      }
      case ParamType::kFixed:
        if (!(v == p.value)) return false;
        break;
    }
  }
  return true;
}

absl::StatusOr<ParamValue> ParseValue(const ParamDef& def, const std::string& text) {
  auto bounds = [&] {
    return absl::StrCat(" (", def.name, " is ", def.type == ParamType::kInt ? "an int" : "a float",
                        " in [", FormatValue(def.low), ", ", FormatValue(def.high), "]",
                        def.step ? absl::StrCat(" with step ", FormatValue(*def.step)) : "", ")");
  };
  auto on_step = [&](double v) {
    if (!def.step) return true;
    double k = (v - def.low) / *def.step;
    return std::abs(k - std::round(k)) < 1e-9 * std::max(1.0, std::abs(k));
  };
  switch (def.type) {
    case ParamType::kFloat: {
      double d = 0;
      if (!absl::SimpleAtod(text, &d) || !std::isfinite(d)) {
        return absl::InvalidArgumentError(
            absl::StrCat(def.name, "=", text, " is not a number", bounds()));
      }
      if (d < def.low || d > def.high || !on_step(d)) {
        return absl::InvalidArgumentError(
            absl::StrCat(def.name, "=", text, " is outside the space", bounds()));
      }
      return ParamValue(d);
    }
    case ParamType::kInt: {
      int64_t i = 0;
      if (!absl::SimpleAtoi(text, &i)) {
        return absl::InvalidArgumentError(
            absl::StrCat(def.name, "=", text, " is not an integer", bounds()));
      }
      if (i < def.low || i > def.high || !on_step(static_cast<double>(i))) {
        return absl::InvalidArgumentError(
            absl::StrCat(def.name, "=", text, " is outside the space", bounds()));
      }
      return ParamValue(i);
    }
    case ParamType::kCategorical: {
      std::vector<std::string> names;
      for (const ParamValue& c : def.choices) {
        if (FormatValue(c) == text) return c;
        names.push_back(FormatValue(c));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          def.name, "=", text, " is not one of its choices (", absl::StrJoin(names, ", "), ")"));
    }
    case ParamType::kFixed:
      if (FormatValue(def.value) == text) return def.value;
      return absl::InvalidArgumentError(
          absl::StrCat(def.name, " is fixed at ", FormatValue(def.value), ", not ", text));
  }
  return absl::InternalError("unknown parameter type");
}

absl::StatusOr<Params> SearchSpace::ParsePoint(
    const std::map<std::string, std::string>& texts) const {
  Params out;
  for (const auto& [name, text] : texts) {
    const ParamDef* def = Find(name);
    if (def == nullptr) {
      std::vector<std::string> names;
      for (const ParamDef& p : params) names.push_back(p.name);
      return absl::InvalidArgumentError(absl::StrCat("no parameter '", name, "' in the space (",
                                                     absl::StrJoin(names, ", "), ")"));
    }
    absl::StatusOr<ParamValue> v = ParseValue(*def, text);
    if (!v.ok()) return v.status();
    out[name] = *std::move(v);
  }
  for (const ParamDef& p : params) {
    if (out.count(p.name)) continue;
    if (p.type != ParamType::kFixed) {
      return absl::InvalidArgumentError(absl::StrCat("no value for parameter '", p.name, "'"));
    }
    out[p.name] = p.value;
  }
  return out;
}

std::string FormatValue(const ParamValue& v) {
  struct Visitor {
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const {
      char buf[64];
      auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
      return ec == std::errc() ? std::string(buf, end) : std::to_string(d);
    }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
  };
  return std::visit(Visitor{}, v);
}

std::optional<double> NumericValue(const ParamValue& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* b = std::get_if<bool>(&v)) return *b ? 1.0 : 0.0;
  return std::nullopt;
}

double ToUnit(const ParamDef& p, const ParamValue& v) {
  double x = *NumericValue(v);
  if (p.high <= p.low) return 0;
  if (p.log) return (std::log(x) - std::log(p.low)) / (std::log(p.high) - std::log(p.low));
  return (x - p.low) / (p.high - p.low);
}

ParamValue FromUnit(const ParamDef& p, double u) {
  u = std::clamp(u, 0.0, 1.0);
  double x = p.log ? std::exp(std::log(p.low) + u * (std::log(p.high) - std::log(p.low)))
                   : p.low + u * (p.high - p.low);
  if (p.step) x = p.low + std::round((x - p.low) / *p.step) * *p.step;
  x = std::clamp(x, p.low, p.high);
  if (p.type == ParamType::kInt) return static_cast<int64_t>(std::llround(x));
  return x;
}

}  // namespace hpo::algorithms
