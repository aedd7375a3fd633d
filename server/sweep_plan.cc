#include "server/sweep_plan.h"

#include "absl/strings/str_cat.h"

namespace hpo::server {

PlanResult PlanSweep(const std::string& yaml, const std::string& source,
                     const std::string& base_dir, backend::Capacity* capacity,
                     const std::string& backend_name) {
  PlanResult result;
  ParseResult parsed = ParseSweepSpec(yaml, source, base_dir);
  result.errors = std::move(parsed.errors);
  if (!parsed.spec) return result;
  if (capacity != nullptr) {
    absl::Status fits = capacity->CheckFits(parsed.spec->MaxResources(), parsed.spec->placement);
    if (!fits.ok()) {
      result.errors.push_back(absl::StrCat(parsed.spec->source, ": resources/slurm (", backend_name,
                                           " backend): ", fits.message()));
      return result;
    }
  }
  absl::StatusOr<std::unique_ptr<algorithms::Stopper>> stopper =
      algorithms::MakeStopper(parsed.spec->early_stopping);
  if (!stopper.ok()) {  // the parser checked the settings; this is a bug
    result.errors.push_back(
        absl::StrCat(parsed.spec->source, ": early_stopping: ", stopper.status().message()));
    return result;
  }
  SweepPlan plan;
  plan.spec = std::move(*parsed.spec);
  plan.sampler = std::move(parsed.sampler);
  plan.stopper = std::move(*stopper);
  plan.limit = plan.spec.TrialLimit(*plan.sampler);
  plan.keeps_curves = plan.stopper->Name() != "none";
  result.plan = std::move(plan);
  return result;
}

}  // namespace hpo::server
