#include "algorithms/auto_sampler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "algorithms/grid_sampler.h"
#include "algorithms/tpe_sampler.h"

namespace hpo::algorithms {

AutoChoice ChooseSampler(const AlgorithmSpec& given, const SearchSpace& space, bool pareto) {
  AutoChoice c;
  c.spec = given;
  const int64_t budget = given.max_trials;
  // 1. A finite space that fits in the budget: each configuration once.
  int64_t size = 1, widest = 1;
  bool finite = true;
  for (const ParamDef& p : space.params) {
    std::optional<int64_t> n = p.Cardinality();
    if (!n) {
      finite = false;
      break;
    }
    widest = std::max(widest, *n);
    size = *n > 0 && size > kMaxGridSize / *n ? kMaxGridSize + 1 : size * *n;
  }
  if (finite && budget > 0 && size <= budget) {
    c.spec.name = "grid";
    c.spec.grid_points = static_cast<int>(std::min<int64_t>(widest, 1'000'000));
    c.spec.grid_shuffle = true;
    c.why = absl::StrCat("all ", size, " configurations of the space fit in budget.max_trials (",
                         budget, "): grid, each once, in a seeded random order");
    return c;
  }
  // 2. Too few trials, or all at once: nothing comes back in time for a model.
  const int64_t startup = given.startup_trials;
  if (budget > 0 && budget <= startup) {
    c.spec.name = "random";
    c.why = absl::StrCat("budget.max_trials (", budget, ") is no more than TPE's ", startup,
                         " random start-up trials: random search");
    return c;
  }
  if (budget > 0 && given.concurrency >= budget) {
    c.spec.name = "random";
    c.why = absl::StrCat("all ", budget, " trials run at once (budget.max_concurrent ",
                         given.concurrency,
                         "): no result comes back before the last starts, random search");
    return c;
  }
  // 3. TPE.
  c.spec.name = "tpe";
  c.spec.tpe_multivariate = true;
  c.why = absl::StrCat(
      pareto ? "several objectives or constraints: multi-objective TPE" : "TPE, multivariate", " (",
      space.params.size(), space.params.size() == 1 ? " parameter" : " parameters",
      budget > 0 ? absl::StrCat(", ", budget, " trials") : "", ")");
  return c;
}

std::string AutoSampler::Choice(const SuggestRequest& req) const {
  std::string now = chosen_->Name();
  if (const auto* tpe = dynamic_cast<const TpeSampler*>(chosen_.get())) {
    int startup = tpe->options().startup_trials;
    now = !TpeSampler::ModelsAtLeast(req, static_cast<size_t>(std::max(startup, 0)))
              ? absl::StrCat("tpe: random draws until ", startup, " trials have reported")
              : "tpe: modelling the trials that reported";
  }
  return absl::StrCat(now, "; chosen because ", choice_.why);
}

}  // namespace hpo::algorithms
