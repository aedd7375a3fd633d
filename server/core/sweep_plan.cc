#include "server/core/sweep_plan.h"

#include "absl/strings/str_cat.h"

namespace hpo::server {

std::string PlacementError(const SweepSpec& spec, absl::string_view message) {
  return absl::StrCat(spec.source, ": resources/slurm (", spec.placement.backend,
                      " backend): ", message);
}

PlanResult PlanSweep(const std::string& yaml, const std::string& source,
                     const std::string& base_dir, backend::Backend* backend,
                     const ParseOptions& parse) {
  PlanResult result;
  ParseResult parsed = ParseSweepSpec(yaml, source, base_dir, parse);
  result.errors = std::move(parsed.errors);
  result.warnings = std::move(parsed.warnings);
  if (!parsed.spec) return result;
  if (backend != nullptr) {
    backend::Placement& placement = parsed.spec->placement;
    absl::StatusOr<std::string> where = backend->Resolve(placement);
    if (!where.ok()) {
      result.errors.push_back(
          absl::StrCat(parsed.spec->source, ": backend: ", where.status().message()));
      return result;
    }
    placement.backend = *where;
    absl::Status fits = backend->CheckFits(parsed.spec->MaxResources(), placement);
    if (!fits.ok()) {
      result.errors.push_back(PlacementError(*parsed.spec, fits.message()));
      return result;
    }
  }
  absl::StatusOr<std::unique_ptr<algorithms::Stopper>> stopper = algorithms::MakeStopper(
      parsed.spec->early_stopping,
      parsed.spec->Pareto() ? parsed.spec->Directions() : std::vector<algorithms::Direction>{});
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
  if (plan.spec.Pareto()) plan.directions = plan.spec.Directions();
  plan.warnings = result.warnings;
  result.plan = std::move(plan);
  return result;
}

}  // namespace hpo::server
