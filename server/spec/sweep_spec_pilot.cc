// PilotYaml: a sweep file turned into the short pilot `hpo plan --pilot` runs to measure a trial's
// time. The parsing is in sweep_spec.cc.
#include <algorithm>
#include <exception>

#include "absl/strings/str_cat.h"
#include "server/spec/sweep_spec.h"
#include "yaml-cpp/yaml.h"

namespace hpo::server {

absl::StatusOr<std::string> PilotYaml(const std::string& yaml, int64_t trials, int64_t steps,
                                      int64_t full) {
  if (trials < 1 || trials > 64) {
    return absl::InvalidArgumentError(absl::StrCat("a pilot runs 1 to 64 trials, not ", trials));
  }
  if (full < 0 || full > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("a pilot runs 0 to 4 trials to their end, not ", full));
  }
  if (steps < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a pilot's trials report at least 2 steps (the time between reports is what it "
        "measures), not ",
        steps));
  }
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("the sweep file does not parse: ", e.what()));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError("the sweep file is not a map");
  if (root["backend"] && root["backend"].IsScalar() && root["backend"].Scalar() == "external") {
    return absl::InvalidArgumentError(
        "a pilot runs trials hpod launches; an external sweep's trials are launched elsewhere");
  }
  std::string name = root["name"] && root["name"].IsScalar() ? root["name"].as<std::string>() : "";
  root["name"] = name.empty() ? std::string("pilot") : absl::StrCat(name, "-pilot");
  // Its own few configurations, drawn at random from the sweep's space, run at the sweep's
  // concurrency, the full ones first: what the sweep's trials cost, not where its search goes.
  root["algorithm"] = "random";
  root["early_stopping"] = "none";
  for (const char* key : {"enqueue", "warm_start", "plan", "pilot"}) root.remove(key);
  const int64_t all = full + trials;
  int64_t concurrent = 1;
  YAML::Node budget = root["budget"];
  if (budget && budget.IsMap() && budget["max_concurrent"]) {
    try {
      concurrent = budget["max_concurrent"].as<int64_t>();
    } catch (const std::exception&) {
      // ParseSweepSpec reports it.
    }
  }
  YAML::Node pilot_budget;
  pilot_budget["max_trials"] = all;
  pilot_budget["max_concurrent"] = std::clamp<int64_t>(concurrent, 1, all);
  pilot_budget["max_failed"] = all;
  // The file's cap on a trial's steps ends a full trial too (and a short one before its step).
  if (budget && budget.IsMap() && budget["max_trial_steps"]) {
    pilot_budget["max_trial_steps"] = budget["max_trial_steps"];
  }
  root["budget"] = pilot_budget;
  YAML::Node pilot;
  pilot["steps"] = steps;
  pilot["full_trials"] = full;
  root["pilot"] = pilot;
  YAML::Emitter out;
  out << root;
  if (!out.good()) return absl::InternalError(out.GetLastError());
  return absl::StrCat("# The pilot of a sweep, written by hpo plan --pilot.\n", out.c_str(), "\n");
}

}  // namespace hpo::server
