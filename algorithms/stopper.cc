#include "algorithms/stopper.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hpo::algorithms {

const std::vector<std::string>& StopperNames() {
  static const std::vector<std::string> names = {"none"};
  return names;
}

absl::StatusOr<std::unique_ptr<Stopper>> MakeStopper(const StopperSpec& spec) {
  if (spec.name == "none") return std::make_unique<NoStopper>();
  return absl::InvalidArgumentError(absl::StrCat("unknown early_stopping '", spec.name,
                                                 "' (known: ", absl::StrJoin(StopperNames(), ", "),
                                                 ")"));
}

}  // namespace hpo::algorithms
