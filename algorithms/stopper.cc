#include "algorithms/stopper.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "algorithms/asha_stopper.h"
#include "algorithms/auto_stopper.h"
#include "algorithms/median_stopper.h"
#include "algorithms/mo_asha_stopper.h"

namespace hpo::algorithms {

const std::vector<std::string>& StopperNames() {
  static const std::vector<std::string> names = {"auto", "none", "asha", "hyperband", "median"};
  return names;
}

absl::StatusOr<std::unique_ptr<Stopper>> MakeStopper(const StopperSpec& spec,
                                                     const std::vector<Direction>& directions) {
  if (spec.name == "none") return std::make_unique<NoStopper>();
  if (spec.name == "auto") return std::make_unique<AutoStopper>(spec, directions);
  if (!directions.empty() && spec.name == "median") {
    return absl::InvalidArgumentError(
        "median compares one objective; with several objectives or constraints use asha or "
        "hyperband (multi-objective ASHA)");
  }
  if (spec.name == "asha" || spec.name == "hyperband") {
    if (spec.min_resource < 1) return absl::InvalidArgumentError("min_resource must be >= 1");
    if (spec.reduction_factor < 2)
      return absl::InvalidArgumentError("reduction_factor must be >= 2");
    if (spec.max_resource != 0 && spec.max_resource <= spec.min_resource) {
      return absl::InvalidArgumentError("max_resource must exceed min_resource");
    }
    if (spec.name == "hyperband" && spec.brackets < 1)
      return absl::InvalidArgumentError("brackets must be >= 1");
    AshaOptions o;
    o.min_resource = spec.min_resource;
    o.max_resource = spec.max_resource;
    o.reduction_factor = spec.reduction_factor;
    o.brackets = spec.name == "hyperband" ? spec.brackets : 1;
    if (spec.bootstrap < 0) return absl::InvalidArgumentError("bootstrap must be >= 0");
    o.bootstrap = spec.bootstrap;
    if (spec.min_correlation < 0 || spec.min_correlation > 1)
      return absl::InvalidArgumentError("min_correlation must be between 0 and 1");
    if (spec.min_correlation > 0 && spec.max_resource <= 0)
      return absl::InvalidArgumentError(
          "min_correlation needs max_resource: the trials that reach it say which rungs predict");
    if (spec.min_correlation > 0 && !directions.empty())
      return absl::InvalidArgumentError("min_correlation is for one objective");
    o.min_correlation = spec.min_correlation;
    o.unmeasured_stop = spec.unmeasured_stop;
    if (!directions.empty()) return std::make_unique<MoAshaStopper>(o, directions);
    return std::make_unique<AshaStopper>(o);
  }
  if (spec.name == "median") {
    if (spec.min_trials < 1) return absl::InvalidArgumentError("min_trials must be >= 1");
    return std::make_unique<MedianStopper>(MedianOptions{spec.grace_steps, spec.min_trials});
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown early_stopping '", spec.name,
                                                 "' (known: ", absl::StrJoin(StopperNames(), ", "),
                                                 ")"));
}

}  // namespace hpo::algorithms
