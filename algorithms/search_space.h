#pragma once
// The search space of a sweep and the values its parameters take.
//
// Pure data with validation; thread-compatible.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hpo::algorithms {

// A parameter's value. Float parameters hold double, int parameters int64_t, categorical ones
// whatever their choices are (string, bool, int64_t or double).
using ParamValue = std::variant<int64_t, double, std::string, bool>;
// One configuration: parameter name -> value, ordered by name.
using Params = std::map<std::string, ParamValue>;

enum class ParamType { kFloat, kInt, kCategorical, kFixed };

struct ParamDef {
  std::string name;
  ParamType type = ParamType::kFloat;
  double low = 0;  // float/int: inclusive bounds
  double high = 0;
  bool log = false;                 // sample uniformly in log space (low > 0)
  std::optional<double> step;       // float/int: values are low + k * step
  std::vector<ParamValue> choices;  // categorical
  ParamValue value;                 // fixed
  // `default:`: the value this parameter takes in trials of an earlier sweep that did not have
  // it (warm_start, hpo fork). A fixed parameter's is its value.
  std::optional<ParamValue> default_value = std::nullopt;

  // Number of distinct values, or nullopt when continuous.
  std::optional<int64_t> Cardinality() const;
};

struct SearchSpace {
  std::vector<ParamDef> params;

  // INVALID_ARGUMENT naming the parameter when a definition is impossible
  // (low > high, log with low <= 0, step <= 0, no choices, duplicate names).
  [[nodiscard]] absl::Status Validate() const;
  const ParamDef* Find(const std::string& name) const;
  // True when every value of `params` lies in the space and has its parameter's type.
  bool Contains(const Params& params) const;
  // A point given as name -> text (`hpo enqueue lr=0.01 act=relu`, an `enqueue:` entry): every
  // parameter once, each value read by ParseValue; a fixed parameter may be left out.
  // INVALID_ARGUMENT naming the first parameter that is unknown, missing or out of the space.
  [[nodiscard]] absl::StatusOr<Params> ParsePoint(
      const std::map<std::string, std::string>& texts) const;
};

// `text` as a value of `def`: a number within a float's or an int's bounds (and on its step), one
// of a categorical's choices (as FormatValue writes it), a fixed parameter's value.
// INVALID_ARGUMENT saying why not.
[[nodiscard]] absl::StatusOr<ParamValue> ParseValue(const ParamDef& def, const std::string& text);

// Shortest text that reads back as the same value ("0.001", "64", "relu", "true").
std::string FormatValue(const ParamValue& v);
// The value as a double when numeric (bools as 0/1), else nullopt.
std::optional<double> NumericValue(const ParamValue& v);

// A numeric parameter's value as a fraction of its range (of its logarithm's, for a log
// parameter), and back: a fraction is clamped to [0, 1] and its value snapped to the step and
// bounds, an int's rounded. What samplers that work in a unit cube (nsga2, gp) move in.
double ToUnit(const ParamDef& p, const ParamValue& v);
ParamValue FromUnit(const ParamDef& p, double u);

enum class Direction { kMinimize, kMaximize };
// True when objective `a` is strictly better than `b`.
inline bool IsBetter(double a, double b, Direction d) {
  return d == Direction::kMinimize ? a < b : a > b;
}

}  // namespace hpo::algorithms
