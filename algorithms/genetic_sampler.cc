#include "algorithms/genetic_sampler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "algorithms/random_sampler.h"

namespace hpo::algorithms {
namespace {

double Gaussian(Rng& rng) {  // Box-Muller; Uniform() is in [0, 1)
  double u1 = 1.0 - rng.Uniform();
  double u2 = rng.Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// x reflected into [lo, hi].
double Reflect(double x, double lo, double hi) {
  if (hi <= lo) return lo;
  double span = hi - lo;
  double y = std::fmod(x - lo, 2 * span);
  if (y < 0) y += 2 * span;
  return lo + (y <= span ? y : 2 * span - y);
}

struct Member {
  const HistoryEntry* entry;
  double objective;
};

}  // namespace

absl::Status GeneticSampler::Validate(const GeneticOptions& o) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("genetic: ", what));
  };
  if (o.population < 2) return bad("population must be at least 2");
  if (o.tournament < 1) return bad("tournament must be at least 1");
  if (!(o.crossover_rate >= 0 && o.crossover_rate <= 1))
    return bad("crossover_rate must be between 0 and 1");
  if (!(o.mutation_rate >= 0 && o.mutation_rate <= 1))
    return bad("mutation_rate must be between 0 and 1");
  if (!(o.mutation_scale > 0 && o.mutation_scale <= 10))
    return bad("mutation_scale must be above 0 (and at most 10)");
  if (o.elitism < 0 || o.elitism >= o.population)
    return bad("elitism must be from 0 to population - 1");
  if (o.demes < 1 || o.demes * 2 > o.population)
    return bad("demes must be from 1 to population / 2");
  if (o.migration_interval < 0) return bad("migration_interval must be 0 (none) or more");
  return absl::OkStatus();
}

ParamValue GeneticSampler::Mutate(const ParamDef& p, const ParamValue& v, double scale, Rng& rng) {
  switch (p.type) {
    case ParamType::kFixed:
      return p.value;
    case ParamType::kCategorical: {
      if (p.choices.size() < 2) return p.choices.front();
      // Another choice, uniformly.
      size_t current =
          static_cast<size_t>(std::find(p.choices.begin(), p.choices.end(), v) - p.choices.begin());
      size_t pick = rng.Below(p.choices.size() - (current < p.choices.size() ? 1 : 0));
      if (current < p.choices.size() && pick >= current) ++pick;
      return p.choices[pick];
    }
    case ParamType::kInt:
    case ParamType::kFloat:
      break;
  }
  std::optional<double> x0 = NumericValue(v);
  if (!x0) return RandomSampler::Draw(p, rng);
  double x;
  if (p.log) {
    double lo = std::log(p.low), hi = std::log(p.high);
    x = std::exp(
        Reflect(std::log(std::max(*x0, p.low)) + Gaussian(rng) * scale * (hi - lo), lo, hi));
  } else {
    x = Reflect(*x0 + Gaussian(rng) * scale * (p.high - p.low), p.low, p.high);
  }
  if (p.step) x = p.low + std::round((x - p.low) / *p.step) * *p.step;
  if (p.type == ParamType::kInt) {
    double step = p.step.value_or(1);
    x = std::round(x);
    if (x == *x0 && p.high > p.low) x += (rng.Uniform() < 0.5 ? -step : step);  // an int must move
    if (x < p.low) x = *x0 + step;
    if (x > p.high) x = *x0 - step;
    return static_cast<int64_t>(std::clamp(x, p.low, p.high));
  }
  return std::clamp(x, p.low, p.high);
}

absl::StatusOr<std::optional<Params>> GeneticSampler::Suggest(const SuggestRequest& req) const {
  const SearchSpace& space = *req.space;
  const std::vector<HistoryEntry>& history = *req.history;
  const GeneticOptions& o = options_;
  Rng rng(req.seed, static_cast<uint64_t>(req.trial_number));
  auto random = [&]() {
    Params out;
    for (const ParamDef& p : space.params) out[p.name] = RandomSampler::Draw(p, rng);
    return out;
  };
  if (req.trial_number < o.population) return random();

  const int64_t demes = o.demes;
  const int64_t deme = req.trial_number % demes;
  const size_t per_deme = static_cast<size_t>((o.population + o.demes - 1) / o.demes);
  auto better = [&](const Member& a, const Member& b) {
    if (a.objective != b.objective) return IsBetter(a.objective, b.objective, req.direction);
    return a.entry->number < b.entry->number;
  };

  // The deme's most recently finished trials (by number: the store's order), and its elites.
  std::vector<Member> population;
  std::vector<Member> elites;
  std::optional<Member> migrant;
  const int64_t prev_deme = (deme + demes - 1) % demes;
  const bool migrate = demes > 1 && o.migration_interval > 0 &&
                       (req.trial_number / demes) % o.migration_interval == 0;
  // One pass from the newest trial back (this is the cost at 100,000 trials: keep it lean).
  const uint64_t udemes = static_cast<uint64_t>(demes);
  const uint64_t udeme = static_cast<uint64_t>(deme), uprev = static_cast<uint64_t>(prev_deme);
  const size_t elitism = static_cast<size_t>(o.elitism);
  // With the request's objective column the pass reads 8 bytes per trial, not whole entries
  // (at 100,000 trials the entries are megabytes, and memory bandwidth was the cost).
  const std::vector<double>* column =
      req.objectives != nullptr && req.objectives->size() == history.size() ? req.objectives
                                                                            : nullptr;
  auto objective_of = [&](size_t i) {
    return column != nullptr ? (*column)[i] : ObjectiveColumn(history[i]);
  };
  // Trials come in number order, so each one's deme follows from the last one's without a
  // division.
  bool first = true;
  int64_t last_number = 0;
  uint64_t d = 0;
  for (size_t i = history.size(); i-- > 0;) {
    int64_t number = column != nullptr ? static_cast<int64_t>(i) : history[i].number;
    if (udemes > 1) {
      if (!first && number == last_number - 1)
        d = d == 0 ? udemes - 1 : d - 1;
      else
        d = static_cast<uint64_t>(number) % udemes;
      first = false;
      last_number = number;
    }
    if (d != udeme && !(migrate && d == uprev)) continue;
    double objective = objective_of(i);
    if (std::isnan(objective)) continue;
    Member m{&history[i], objective};
    if (d == udeme) {
      if (population.size() < per_deme) population.push_back(m);
      // Keep the best `elitism` of the whole deme (a small sorted list).
      if (elitism > 0 && (elites.size() < elitism || better(m, elites.back()))) {
        elites.insert(std::lower_bound(elites.begin(), elites.end(), m, better), m);
        if (elites.size() > elitism) elites.pop_back();
      }
    } else if (migrate && d == uprev && (!migrant || better(m, *migrant))) {
      migrant = m;
    }
  }
  if (population.size() < 2) return random();
  for (const Member& e : elites) {
    bool present = std::any_of(population.begin(), population.end(),
                               [&](const Member& m) { return m.entry == e.entry; });
    if (!present) population.push_back(e);
  }
  if (migrant) population.push_back(*migrant);

  auto tournament = [&]() -> const Member& {
    const Member* best = nullptr;
    for (int i = 0; i < o.tournament; ++i) {
      const Member& c = population[rng.Below(population.size())];
      if (best == nullptr || better(c, *best)) best = &c;
    }
    return *best;
  };
  const Member& a = tournament();
  Params child = a.entry->params;
  if (rng.Uniform() < o.crossover_rate) {
    const Member& b = tournament();
    for (const ParamDef& p : space.params) {
      auto it = b.entry->params.find(p.name);
      if (it != b.entry->params.end() && rng.Uniform() < 0.5) child[p.name] = it->second;
    }
  }
  // Parameters added to the space since a parent ran get a random value.
  for (const ParamDef& p : space.params) {
    if (!child.count(p.name)) child[p.name] = RandomSampler::Draw(p, rng);
  }
  std::vector<const ParamDef*> mutable_params;
  for (const ParamDef& p : space.params) {
    if (p.type != ParamType::kFixed && p.Cardinality().value_or(2) > 1)
      mutable_params.push_back(&p);
  }
  if (o.mutation_rate > 0) {
    for (const ParamDef* p : mutable_params) {
      if (rng.Uniform() < o.mutation_rate)
        child[p->name] = Mutate(*p, child[p->name], o.mutation_scale, rng);
    }
    if (child == a.entry->params && !mutable_params.empty()) {
      const ParamDef* p = mutable_params[rng.Below(mutable_params.size())];
      child[p->name] = Mutate(*p, child[p->name], o.mutation_scale, rng);
    }
  }
  // Keep only the space's parameters (a parent may carry ones since removed).
  Params out;
  for (const ParamDef& p : space.params) out[p.name] = child[p.name];
  return out;
}

absl::Status PbtSampler::Validate(const PbtOptions& o) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("pbt: ", what));
  };
  if (o.population < 2) return bad("population must be at least 2");
  if (!(o.quantile > 0 && o.quantile <= 0.5))
    return bad("quantile must be above 0 and at most 0.5");
  if (!(o.resample_rate >= 0 && o.resample_rate <= 1))
    return bad("resample_rate must be between 0 and 1");
  if (!(o.perturb > 0 && o.perturb < 1)) return bad("perturb must be between 0 and 1 (exclusive)");
  return absl::OkStatus();
}

ParamValue PbtSampler::Explore(const ParamDef& p, const ParamValue& v, const PbtOptions& o,
                               Rng& rng) {
  if (p.type == ParamType::kFixed) return p.value;
  if (rng.Uniform() < o.resample_rate) return RandomSampler::Draw(p, rng);
  if (p.type == ParamType::kCategorical) return v;
  std::optional<double> x0 = NumericValue(v);
  if (!x0) return RandomSampler::Draw(p, rng);
  double factor = rng.Uniform() < 0.5 ? 1 - o.perturb : 1 + o.perturb;
  double x = std::clamp(*x0 * factor, p.low, p.high);
  if (p.step) x = std::clamp(p.low + std::round((x - p.low) / *p.step) * *p.step, p.low, p.high);
  if (p.type == ParamType::kInt) {
    x = std::round(x);
    double step = p.step.value_or(1);
    if (x == *x0) x += factor > 1 ? step : -step;  // small ints still move
    return static_cast<int64_t>(std::clamp(x, p.low, p.high));
  }
  return x;
}

absl::StatusOr<std::optional<Params>> PbtSampler::Suggest(const SuggestRequest& req) const {
  const SearchSpace& space = *req.space;
  const std::vector<HistoryEntry>& history = *req.history;
  const int64_t members = options_.population;
  Rng rng(req.seed, static_cast<uint64_t>(req.trial_number));
  SuggestOutput ignored;
  SuggestOutput& out = req.output != nullptr ? *req.output : ignored;
  if (req.trial_number < members) {
    out.parent = -1;
    out.lineage = req.trial_number;
    Params p;
    for (const ParamDef& d : space.params) p[d.name] = RandomSampler::Draw(d, rng);
    return p;
  }
  // Each member's latest segment, and its latest finished one with an objective.
  std::vector<const HistoryEntry*> latest(static_cast<size_t>(members), nullptr);
  std::vector<const HistoryEntry*> scored(static_cast<size_t>(members), nullptr);
  for (const HistoryEntry& h : history) {
    if (h.lineage < 0 || h.lineage >= members) continue;
    size_t l = static_cast<size_t>(h.lineage);
    if (latest[l] == nullptr || h.number > latest[l]->number) latest[l] = &h;
    if (h.finished && h.objective && std::isfinite(*h.objective) &&
        (scored[l] == nullptr || h.number > scored[l]->number)) {
      scored[l] = &h;
    }
  }
  // The member to continue: the one whose last segment finished (longest ago, by number).
  int64_t lineage = -1;
  for (int64_t l = 0; l < members; ++l) {
    const HistoryEntry* h = latest[static_cast<size_t>(l)];
    if (h != nullptr && h->finished &&
        (lineage < 0 || h->number < latest[static_cast<size_t>(lineage)]->number))
      lineage = l;
  }
  if (lineage < 0)
    lineage = req.trial_number % members;  // every member busy (more slots than members)
  const HistoryEntry* mine = latest[static_cast<size_t>(lineage)];

  std::vector<const HistoryEntry*> ranked;
  for (const HistoryEntry* h : scored) {
    if (h != nullptr) ranked.push_back(h);
  }
  std::sort(ranked.begin(), ranked.end(), [&](const HistoryEntry* a, const HistoryEntry* b) {
    if (*a->objective != *b->objective)
      return IsBetter(*a->objective, *b->objective, req.direction);
    return a->number < b->number;
  });
  size_t cut = std::max<size_t>(
      1, static_cast<size_t>(std::floor(options_.quantile * static_cast<double>(ranked.size()))));
  bool has_score =
      mine != nullptr && mine->finished && mine->objective && std::isfinite(*mine->objective);
  bool bottom = !has_score;
  if (has_score && ranked.size() >= 2) {
    size_t rank =
        static_cast<size_t>(std::find(ranked.begin(), ranked.end(), mine) - ranked.begin());
    bottom = rank >= ranked.size() - cut;
  }
  out.lineage = lineage;
  if (!bottom || ranked.empty()) {
    if (mine == nullptr) {  // nothing to continue (a member whose first segment never ran)
      Params p;
      for (const ParamDef& d : space.params) p[d.name] = RandomSampler::Draw(d, rng);
      out.parent = -1;
      return p;
    }
    out.parent = has_score || mine->finished ? mine->number : -1;
    return mine->params;
  }
  // Exploit a top member, then explore around its parameters.
  const HistoryEntry* donor = ranked[rng.Below(std::min(cut, ranked.size()))];
  out.parent = donor->number;
  Params p;
  for (const ParamDef& d : space.params) {
    auto it = donor->params.find(d.name);
    p[d.name] = it == donor->params.end() ? RandomSampler::Draw(d, rng)
                                          : Explore(d, it->second, options_, rng);
  }
  return p;
}

}  // namespace hpo::algorithms
