#include "algorithms/nsga2_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "algorithms/random_sampler.h"

namespace hpo::algorithms {
namespace {

constexpr double kCrossoverIndex = 15;  // SBX distribution index
constexpr double kMutationIndex = 20;   // polynomial mutation index

// Simulated binary crossover of two unit values: one of the two children, at random.
double Sbx(double a, double b, Rng& rng) {
  if (std::abs(a - b) < 1e-14) return a;
  double u = rng.Uniform();
  double beta = u <= 0.5 ? std::pow(2 * u, 1 / (kCrossoverIndex + 1))
                         : std::pow(1 / (2 * (1 - u)), 1 / (kCrossoverIndex + 1));
  double mid = 0.5 * (a + b), half = 0.5 * std::abs(b - a);
  return rng.Uniform() < 0.5 ? mid - beta * half : mid + beta * half;
}

// Polynomial mutation of a unit value.
double Polynomial(double x, Rng& rng) {
  double u = rng.Uniform();
  double delta = u < 0.5 ? std::pow(2 * u, 1 / (kMutationIndex + 1)) - 1
                         : 1 - std::pow(2 * (1 - u), 1 / (kMutationIndex + 1));
  return std::clamp(x + delta, 0.0, 1.0);
}

struct Candidate {
  const HistoryEntry* entry;
  int rank;
  double crowding;
};

// NSGA-II's order: lower rank, then larger crowding distance, then the older trial.
bool Better(const Candidate& a, const Candidate& b) {
  if (a.rank != b.rank) return a.rank < b.rank;
  if (a.crowding != b.crowding) return a.crowding > b.crowding;
  return a.entry->number < b.entry->number;
}

}  // namespace

absl::Status Nsga2Sampler::Validate(const Nsga2Options& o) {
  if (o.population < 2) return absl::InvalidArgumentError("nsga2: population must be at least 2");
  if (!(o.crossover_rate >= 0 && o.crossover_rate <= 1)) {
    return absl::InvalidArgumentError("nsga2: crossover_rate must be between 0 and 1");
  }
  if (!(o.mutation_rate >= 0 && o.mutation_rate <= 1)) {
    return absl::InvalidArgumentError(
        "nsga2: mutation_rate must be between 0 and 1 (0: 1 / the number of parameters)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Params>> Nsga2Sampler::Suggest(const SuggestRequest& req) const {
  const SearchSpace& space = *req.space;
  Rng rng(req.seed, static_cast<uint64_t>(req.trial_number));
  std::vector<const HistoryEntry*> entries;
  Points points = CompletedPoints(req, entries);
  if (static_cast<int>(entries.size()) < options_.population) {
    Params out;
    for (const ParamDef& p : space.params) out[p.name] = RandomSampler::Draw(p, rng);
    return std::optional<Params>(std::move(out));
  }
  // Survivors: whole fronts while they fit, then the crowding distance cuts the next one.
  std::vector<int> ranks = NonDominatedRanks(points);
  std::vector<Candidate> pool;
  for (const std::vector<size_t>& front : Fronts(ranks)) {
    if (front.empty()) continue;
    std::vector<double> crowding = CrowdingDistances(points, front);
    std::vector<Candidate> members;
    for (size_t n = 0; n < front.size(); ++n) {
      members.push_back({entries[front[n]], ranks[front[n]], crowding[n]});
    }
    std::sort(members.begin(), members.end(), Better);
    size_t room = static_cast<size_t>(options_.population) - pool.size();
    pool.insert(pool.end(), members.begin(),
                members.begin() + static_cast<ptrdiff_t>(std::min(room, members.size())));
    if (pool.size() >= static_cast<size_t>(options_.population)) break;
  }
  auto tournament = [&]() -> const HistoryEntry* {
    const Candidate& a = pool[rng.Below(pool.size())];
    const Candidate& b = pool[rng.Below(pool.size())];
    return Better(a, b) ? a.entry : b.entry;
  };
  const HistoryEntry* mother = tournament();
  const HistoryEntry* father = tournament();
  size_t free_params = 0;
  for (const ParamDef& p : space.params) free_params += p.type != ParamType::kFixed;
  double mutation = options_.mutation_rate > 0
                        ? options_.mutation_rate
                        : 1.0 / static_cast<double>(std::max<size_t>(free_params, 1));

  auto breed = [&](bool force_mutation) {
    bool cross = rng.Uniform() < options_.crossover_rate;
    Params child;
    size_t forced = force_mutation ? rng.Below(std::max<size_t>(free_params, 1)) : free_params;
    size_t index = 0;
    for (const ParamDef& p : space.params) {
      if (p.type == ParamType::kFixed) {
        child[p.name] = p.value;
        continue;
      }
      const ParamValue& a = mother->params.at(p.name);
      const ParamValue& b = father->params.at(p.name);
      bool forced_here = index++ == forced;
      bool mutate = rng.Uniform() < mutation || forced_here;
      if (p.type == ParamType::kCategorical) {
        ParamValue v = cross && rng.Uniform() < 0.5 ? b : a;
        if (mutate) v = p.choices[rng.Below(p.choices.size())];
        child[p.name] = v;
        continue;
      }
      double u = ToUnit(p, a);
      if (cross && rng.Uniform() < 0.5) u = Sbx(u, ToUnit(p, b), rng);
      if (mutate) u = Polynomial(u, rng);
      child[p.name] = FromUnit(p, u);
    }
    return child;
  };
  auto exists = [&](const Params& c) {
    for (const HistoryEntry& h : *req.history) {
      if (h.params == c) return true;
    }
    return false;
  };
  Params child = breed(false);
  for (int tries = 0; tries < 10 && exists(child); ++tries) child = breed(true);
  return std::optional<Params>(std::move(child));
}

}  // namespace hpo::algorithms
