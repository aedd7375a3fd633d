#pragma once
// The sweep-file parser's insides, shared by the files that parse its sections (sweep_spec.cc,
// sweep_spec_objectives.cc). Not an interface: everything else goes through ParseSweepSpec
// (sweep_spec.h).

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/duration.h"
#include "server/spec/sweep_spec.h"
#include "slurm_backend/slurm_placement.h"
#include "yaml-cpp/yaml.h"

namespace hpo::server::spec_parse {

using algorithms::ParamDef;
using algorithms::ParamType;
using algorithms::ParamValue;

inline size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Walks the YAML tree, collecting "file:line:col: message" errors.
// "SIGUSR1", "USR1", "usr1" or a number.
std::optional<int> SignalNumber(const std::string& text);

class Parser {
 public:
  Parser(std::string source, std::string base_dir, bool lenient = false)
      : source_(std::move(source)), base_dir_(std::move(base_dir)), lenient_(lenient) {}

  std::vector<std::string>& errors() { return errors_; }
  std::vector<std::string>& warnings() { return warnings_; }

  // A problem with the file: an error, or (lenient) a warning, the spec read on without it.
  void Error(const YAML::Mark& mark, absl::string_view msg) {
    std::vector<std::string>& to = lenient_ ? warnings_ : errors_;
    if (mark.line < 0) {
      to.push_back(absl::StrCat(source_, ": ", msg));
    } else {
      to.push_back(absl::StrCat(source_, ":", mark.line + 1, ":", mark.column + 1, ": ", msg));
    }
  }
  void Error(const YAML::Node& node, absl::string_view msg) { Error(node.Mark(), msg); }

  // Reports every key given twice in one mapping anywhere in `root` (YAML leaves it to the
  // reader; a parameter given twice would be two parameters of one name).
  void CheckDuplicateKeys(const YAML::Node& root);

  // Reports keys of `map` not in `allowed`, suggesting the nearest allowed key.
  void CheckKeys(const YAML::Node& map, const std::string& where,
                 const std::vector<std::string>& allowed) {
    for (const auto& kv : map) {
      std::string key = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      std::string best;
      size_t best_d = 3;
      for (const auto& a : allowed) {
        size_t d = EditDistance(key, a);
        if (d < best_d) best_d = d, best = a;
      }
      std::string msg = absl::StrCat("unknown key '", key, "' in ", where);
      if (!best.empty())
        absl::StrAppend(&msg, " (did you mean '", best, "'?)");
      else
        absl::StrAppend(&msg, " (allowed: ", absl::StrJoin(allowed, ", "), ")");
      Error(kv.first, msg);
    }
  }

  bool ExpectMap(const YAML::Node& n, absl::string_view what) {
    if (n.IsMap()) return true;
    Error(n, absl::StrCat(what, " must be a mapping (key: value lines)"));
    return false;
  }

  std::optional<std::string> String(const YAML::Node& n, absl::string_view what) {
    if (!n.IsScalar()) {
      Error(n, absl::StrCat(what, " must be a single value"));
      return std::nullopt;
    }
    return n.Scalar();
  }

  std::optional<double> Number(const YAML::Node& n, absl::string_view what) {
    double d = 0;
    if (!n.IsScalar() || n.Tag() == "!" || !absl::SimpleAtod(n.Scalar(), &d) || !std::isfinite(d)) {
      Error(n, absl::StrCat(what, " must be a finite number, not '",
                            n.IsScalar() ? n.Scalar() : "(a structure)", "'"));
      return std::nullopt;
    }
    return d;
  }

  std::optional<int64_t> Integer(const YAML::Node& n, absl::string_view what, int64_t min,
                                 int64_t max) {
    int64_t i = 0;
    if (!n.IsScalar() || n.Tag() == "!" || !absl::SimpleAtoi(n.Scalar(), &i)) {
      Error(n, absl::StrCat(what, " must be an integer, not '",
                            n.IsScalar() ? n.Scalar() : "(a structure)", "'"));
      return std::nullopt;
    }
    if (i < min || i > max) {
      Error(n, absl::StrCat(what, " must be between ", min, " and ", max, ", not ", i));
      return std::nullopt;
    }
    return i;
  }

  // The sweep's `slurm:` section as parsed; Top hands it to the spec's placement.
  slurm::SlurmPlacement slurm_;
  std::optional<int> allocation_nodes_, allocation_gpus_, allocation_cpus_, allocation_max_;
  YAML::Node allocation_node_;
  static std::optional<int64_t> MemoryMb(const std::string& text);
  void ResolveAllocation(SweepSpec& spec);

  std::optional<bool> Bool(const YAML::Node& n, absl::string_view what) {
    if (n.IsScalar() && n.Tag() != "!") {
      const std::string& s = n.Scalar();
      if (s == "true" || s == "True" || s == "yes") return true;
      if (s == "false" || s == "False" || s == "no") return false;
    }
    Error(n, absl::StrCat(what, " must be true or false"));
    return std::nullopt;
  }

  std::optional<absl::Duration> Duration(const YAML::Node& n, absl::string_view what) {
    if (!n.IsScalar()) {
      Error(n, absl::StrCat(what, " must be a duration such as 30s, 15m or 2h"));
      return std::nullopt;
    }
    auto d = ParseDuration(n.Scalar());
    if (!d.ok()) {
      Error(n, absl::StrCat(what, ": ", d.status().message()));
      return std::nullopt;
    }
    return *d;
  }

  // A categorical or fixed value: plain scalars are typed (bool, int, float, string);
  // quoted scalars stay strings.
  std::optional<ParamValue> Value(const YAML::Node& n, absl::string_view what) {
    if (!n.IsScalar()) {
      Error(n, absl::StrCat(what, " must be a single value"));
      return std::nullopt;
    }
    const std::string& s = n.Scalar();
    if (n.Tag() == "!") return ParamValue(s);
    if (s == "true" || s == "True") return ParamValue(true);
    if (s == "false" || s == "False") return ParamValue(false);
    int64_t i = 0;
    if (absl::SimpleAtoi(s, &i)) return ParamValue(i);
    double d = 0;
    if (s.find_first_of("0123456789") != std::string::npos && absl::SimpleAtod(s, &d) &&
        std::isfinite(d)) {
      return ParamValue(d);
    }
    return ParamValue(s);
  }

  void Parameters(const YAML::Node& node, SweepSpec& spec);
  std::optional<ParamDef> Parameter(const std::string& name, const YAML::Node& node);
  // A metric's name (`what` for messages): letters, digits, _ . / -; under "hpo." only the
  // metrics hpod measures, and only where `measured_ok`.
  std::optional<std::string> Metric(const YAML::Node& node, absl::string_view what,
                                    bool measured_ok);
  std::optional<algorithms::Direction> DirectionOf(const YAML::Node& node, absl::string_view what);
  void Objective_(const YAML::Node& node, SweepSpec& spec);
  void Objectives(const YAML::Node& node, SweepSpec& spec);
  void Constraints(const YAML::Node& node, SweepSpec& spec);
  void Command(const YAML::Node& node, SweepSpec& spec);
  void CheckPlaceholders(const YAML::Node& node, const std::string& text, const SweepSpec& spec);
  void Budget_(const YAML::Node& node, SweepSpec& spec);
  void Resources(const YAML::Node& node, SweepSpec& spec);
  void Algorithm(const YAML::Node& node, SweepSpec& spec);
  // The `slurm:` section, into slurm_.
  void Slurm(const YAML::Node& node);
  void EarlyStopping(const YAML::Node& node, SweepSpec& spec);
  void Checkpoint(const YAML::Node& node, SweepSpec& spec);
  void HealthSection(const YAML::Node& node, SweepSpec& spec);
  void Failures(const YAML::Node& node, SweepSpec& spec);
  void PlanSection(const YAML::Node& node, SweepSpec& spec);
  void PilotSection(const YAML::Node& node, SweepSpec& spec);
  void Enqueue(const YAML::Node& node, SweepSpec& spec);
  // What `resources.time_limit` and `checkpoint.grace` must agree with in `slurm:`.
  void CheckTimes(const YAML::Node& root, const SweepSpec& spec);
  // budget.gpu_hours or budget.node_hours (`key`, in `unit`): a number above 0.
  std::optional<double> Hours(const YAML::Node& node, const char* key, const char* unit);
  // A GPU-hour budget needs trials that use GPUs.
  void CheckGpuBudget(const YAML::Node& root, const SweepSpec& spec);
  void Top(const YAML::Node& root, SweepSpec& spec);
  // The sampler Top built to check the spec against it (set once it parsed without errors).
  std::unique_ptr<algorithms::Sampler>& sampler() { return sampler_; }

 private:
  std::string source_;
  std::string base_dir_;
  bool lenient_ = false;
  std::vector<std::string> errors_;
  std::vector<std::string> warnings_;
  std::unique_ptr<algorithms::Sampler> sampler_;
};

}  // namespace hpo::server::spec_parse
