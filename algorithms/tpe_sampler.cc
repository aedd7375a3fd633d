#include "algorithms/tpe_sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <span>

#include "algorithms/random_sampler.h"
#include "algorithms/rng.h"

namespace hpo::algorithms {
namespace {

constexpr double kPi = 3.14159265358979323846;

// A mixture of Gaussians truncated to [low, high], equal weights.
struct Parzen {
  std::vector<double> mus, sigmas;
  double low = 0, high = 1;

  // One component per observation, its width the larger gap to its sorted neighbours (clipped
  // to [range / min(100, n + 1), range]), plus the prior: the middle of the range, full width.
  static Parzen Fit(std::vector<double> obs, double low, double high) {
    Parzen p;
    p.low = low;
    p.high = high;
    double range = high - low;
    double prior = 0.5 * (low + high);
    std::vector<std::pair<double, bool>> pts;  // (value, is the prior)
    for (double x : obs) pts.emplace_back(x, false);
    pts.emplace_back(prior, true);
    std::sort(pts.begin(), pts.end());
    size_t n = pts.size();
    double min_sigma = range / std::min(100.0, 1.0 + static_cast<double>(n));
    for (size_t i = 0; i < n; ++i) {
      double x = pts[i].first;
      double left = i > 0 ? x - pts[i - 1].first : x - low;
      double right = i + 1 < n ? pts[i + 1].first - x : high - x;
      p.mus.push_back(x);
      p.sigmas.push_back(pts[i].second ? range
                                       : std::clamp(std::max(left, right), min_sigma, range));
    }
    return p;
  }

  static double Phi(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

  double LogPdf(double x) const {
    double total = 0;
    for (size_t i = 0; i < mus.size(); ++i) {
      double s = sigmas[i];
      double mass = Phi((high - mus[i]) / s) - Phi((low - mus[i]) / s);
      double z = (x - mus[i]) / s;
      total += std::exp(-0.5 * z * z) / (s * std::sqrt(2 * kPi) * std::max(mass, 1e-12));
    }
    return std::log(std::max(total / static_cast<double>(mus.size()), 1e-300));
  }

  double Sample(Rng& rng) const {
    size_t k = static_cast<size_t>(rng.Below(mus.size()));
    return SampleKernel(mus[k], sigmas[k], low, high, rng);
  }

  // A draw from one Gaussian kernel truncated to [low, high].
  static double SampleKernel(double mu, double sigma, double low, double high, Rng& rng) {
    for (int tries = 0; tries < 100; ++tries) {
      // Box-Muller; redraw until inside the bounds (truncation).
      double u1 = std::max(rng.Uniform(), 1e-300), u2 = rng.Uniform();
      double x = mu + sigma * std::sqrt(-2 * std::log(u1)) * std::cos(2 * kPi * u2);
      if (x >= low && x <= high) return x;
    }
    return std::clamp(mu, low, high);
  }
};

// Numeric parameters in the space TPE models them in (log for log parameters; ints widened by
// half a step so that every value has equal mass).
struct Axis {
  double low, high;
  bool log;
};

Axis AxisOf(const ParamDef& p) {
  double lo = p.low, hi = p.high;
  if (p.type == ParamType::kInt || p.step) {
    double half = 0.5 * p.step.value_or(1.0);
    lo -= half;
    hi += half;
    if (p.log) lo = std::max(lo, p.low * 0.5);
  }
  if (p.log) return {std::log(lo), std::log(hi), true};
  return {lo, hi, false};
}

double ToAxis(const ParamDef& p, const ParamValue& v) {
  double x = *NumericValue(v);
  return p.log ? std::log(x) : x;
}

ParamValue FromAxis(const ParamDef& p, double x) {
  double v = p.log ? std::exp(x) : x;
  if (p.step) v = p.low + std::round((v - p.low) / *p.step) * *p.step;
  v = std::clamp(v, p.low, p.high);
  if (p.type == ParamType::kInt) return static_cast<int64_t>(std::llround(v));
  return v;
}

// The multivariate estimator (Falkner et al., 2018; Optuna's multivariate TPE): one kernel per
// observation over all parameters at once, so that what makes a configuration good together —
// not each coordinate on its own — is what l(x) / g(x) rewards. Numeric coordinates get a
// truncated Gaussian whose width follows Scott's rule, 0.2 n^(-1/(d+4)) of the range; a
// categorical coordinate keeps half its mass on the observed choice. Plus one wide prior kernel.
struct JointParzen {
  std::vector<const ParamDef*> params;
  std::vector<Axis> axes;  // per parameter (unused for categoricals)
  size_t dims = 0;
  // Per kernel, dims values each ([kernel * dims + parameter]): the axis value or choice index,
  // the width, and the log of the truncated normalizer.
  std::vector<double> mus, sigmas, lognorms;
  std::vector<bool> prior;           // [kernel]: the wide prior kernel
  mutable std::vector<double> logs;  // LogPdf's scratch, one per kernel

  size_t kernels() const { return prior.size(); }

  static JointParzen Fit(const std::vector<const ParamDef*>& params,
                         const std::vector<const Params*>& obs) {
    JointParzen j;
    j.params = params;
    j.dims = params.size();
    size_t numeric = 0;
    for (const ParamDef* p : params) {
      j.axes.push_back(p->type == ParamType::kCategorical ? Axis{0, 1, false} : AxisOf(*p));
      if (p->type != ParamType::kCategorical) ++numeric;
    }
    double n = static_cast<double>(obs.size());
    double scott = 0.2 * std::pow(std::max(n, 1.0), -1.0 / (static_cast<double>(numeric) + 4));
    j.mus.reserve((obs.size() + 1) * j.dims);
    j.sigmas.reserve((obs.size() + 1) * j.dims);
    for (const Params* o : obs) {
      for (size_t d = 0; d < params.size(); ++d) {
        const ParamDef& p = *params[d];
        if (p.type == ParamType::kCategorical) {
          j.mus.push_back(static_cast<double>(
              std::find(p.choices.begin(), p.choices.end(), o->at(p.name)) - p.choices.begin()));
          j.sigmas.push_back(0);
          continue;
        }
        double range = j.axes[d].high - j.axes[d].low;
        j.mus.push_back(ToAxis(p, o->at(p.name)));
        j.sigmas.push_back(std::clamp(scott * range, range / std::min(100.0, n + 1), range));
      }
      j.prior.push_back(false);
    }
    for (size_t d = 0; d < params.size(); ++d) {
      j.mus.push_back(0.5 * (j.axes[d].low + j.axes[d].high));
      j.sigmas.push_back(j.axes[d].high - j.axes[d].low);
    }
    j.prior.push_back(true);
    j.lognorms.reserve(j.mus.size());
    for (size_t i = 0; i < j.mus.size(); ++i) {
      size_t d = i % j.dims;
      double s = j.sigmas[i], m = j.mus[i];
      if (params[d]->type == ParamType::kCategorical) {
        j.lognorms.push_back(0);
        continue;
      }
      double mass = Parzen::Phi((j.axes[d].high - m) / s) - Parzen::Phi((j.axes[d].low - m) / s);
      j.lognorms.push_back(-std::log(s * std::sqrt(2 * kPi) * std::max(mass, 1e-12)));
    }
    return j;
  }

  // log of kernel k's density at x (one coordinate per parameter).
  double KernelLog(size_t k, const std::vector<double>& x) const {
    double total = 0;
    const double* mu = mus.data() + k * dims;
    const double* sigma = sigmas.data() + k * dims;
    const double* lognorm = lognorms.data() + k * dims;
    for (size_t d = 0; d < dims; ++d) {
      const ParamDef& p = *params[d];
      if (p.type == ParamType::kCategorical) {
        double choices = static_cast<double>(p.choices.size());
        double mass = prior[k] ? 1.0 / choices : (x[d] == mu[d] ? 0.5 : 0.0) + 0.5 / choices;
        total += std::log(mass);
        continue;
      }
      double z = (x[d] - mu[d]) / sigma[d];
      total += -0.5 * z * z + lognorm[d];
    }
    return total;
  }

  double LogPdf(const std::vector<double>& x) const {
    logs.resize(kernels());
    for (size_t k = 0; k < kernels(); ++k) logs[k] = KernelLog(k, x);
    double top = *std::max_element(logs.begin(), logs.end());
    double sum = 0;
    for (double l : logs) sum += std::exp(l - top);
    return top + std::log(sum / static_cast<double>(kernels()));
  }

  std::vector<double> Sample(Rng& rng) const {
    size_t k = static_cast<size_t>(rng.Below(kernels()));
    std::vector<double> x;
    for (size_t d = 0; d < dims; ++d) {
      const ParamDef& p = *params[d];
      if (p.type == ParamType::kCategorical) {
        bool keep = !prior[k] && rng.Uniform() < 0.5;
        x.push_back(keep ? mus[k * dims + d] : static_cast<double>(rng.Below(p.choices.size())));
        continue;
      }
      rng.Below(1);  // as a one-kernel Parzen draws its kernel
      x.push_back(Parzen::SampleKernel(mus[k * dims + d], sigmas[k * dims + d], axes[d].low,
                                       axes[d].high, rng));
    }
    return x;
  }
};

// The value of a curve at its first point at or past `step`.
double ValueAt(const std::vector<std::pair<int64_t, double>>& curve, int64_t step) {
  for (const auto& [s, v] : curve) {
    if (s >= step) return v;
  }
  return curve.back().second;
}

}  // namespace

std::vector<const HistoryEntry*> TpeSampler::RepeatsLast(std::vector<const HistoryEntry*> ranked) {
  constexpr size_t kSame = 3;  // points that must be equal
  using Prefix = std::array<std::pair<int64_t, double>, kSame>;
  auto prefix = [](const HistoryEntry* h) -> std::optional<Prefix> {
    if (h->curve == nullptr || h->curve->size() < kSame) return std::nullopt;
    Prefix p;
    std::copy_n(h->curve->begin(), kSame, p.begin());
    return p;
  };
  std::map<Prefix, int64_t> first;  // prefix -> the lowest trial number with it
  for (const HistoryEntry* h : ranked) {
    if (auto p = prefix(h)) {
      auto [it, added] = first.try_emplace(std::move(*p), h->number);
      if (!added) it->second = std::min(it->second, h->number);
    }
  }
  if (first.size() == ranked.size()) return ranked;  // no repeats (the common case)
  std::stable_partition(ranked.begin(), ranked.end(), [&](const HistoryEntry* h) {
    std::optional<Prefix> p = prefix(h);
    return !p || first.at(*p) == h->number;
  });
  return ranked;
}

std::vector<const HistoryEntry*> TpeSampler::Modelled(const SuggestRequest& req) {
  const std::vector<HistoryEntry>& history = *req.history;
  const size_t n = history.size();
  std::vector<const HistoryEntry*> out;
  if (n <= kRecent + kBestEarlier) {
    out.reserve(n);
    for (const HistoryEntry& h : history) out.push_back(&h);
    return out;
  }
  const size_t earlier = n - kRecent;
  // The best of [0, earlier) by a score (lower is better; NaN: not a candidate), kept in a
  // bounded max-heap so that the scan is one pass.
  std::vector<size_t> chosen;
  auto best_by = [&](size_t want, auto score) {
    std::vector<std::pair<double, size_t>> heap;
    for (size_t i = 0; i < earlier; ++i) {
      double v = score(i);
      if (std::isnan(v)) continue;
      if (heap.size() < want) {
        heap.emplace_back(v, i);
        std::push_heap(heap.begin(), heap.end());
      } else if (std::make_pair(v, i) < heap.front()) {
        std::pop_heap(heap.begin(), heap.end());
        heap.back() = {v, i};
        std::push_heap(heap.begin(), heap.end());
      }
    }
    for (const auto& [v, i] : heap) chosen.push_back(i);
  };
  if (req.MultiObjective()) {
    const std::vector<Direction>& directions = *req.directions;
    size_t k = directions.size();
    for (size_t j = 0; j < k; ++j) {
      best_by((kBestEarlier + k - 1) / k, [&](size_t i) -> double {
        const HistoryEntry& h = history[i];
        if (!h.finished || h.values.size() != k || !std::isfinite(h.values[j])) {
          return std::numeric_limits<double>::quiet_NaN();
        }
        double v = directions[j] == Direction::kMinimize ? h.values[j] : -h.values[j];
        // Infeasible trials after every feasible one.
        return h.violation > 0 ? 1e300 + h.violation : v;
      });
    }
  } else {
    const std::vector<double>* column =
        req.objectives != nullptr && req.objectives->size() == n ? req.objectives : nullptr;
    best_by(kBestEarlier, [&](size_t i) {
      double v = column != nullptr ? (*column)[i] : ObjectiveColumn(history[i]);
      return req.direction == Direction::kMinimize ? v : -v;
    });
  }
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  out.reserve(chosen.size() + kRecent);
  for (size_t i : chosen) out.push_back(&history[i]);
  for (size_t i = earlier; i < n; ++i) out.push_back(&history[i]);
  return out;
}

bool TpeSampler::ModelsAtLeast(const SuggestRequest& req, size_t k) {
  // Ranked and MultiKnownTrials keep at least half of the trials with a curve (those that reached
  // the step half of them reached), and every finished trial with an objective where there are
  // no curves; the most recent trials are always modelled. So 2k recent trials with a curve, or
  // k finished ones without, settle it without ranking the history.
  const std::vector<HistoryEntry>& history = *req.history;
  const size_t width = req.MultiObjective() ? req.directions->size() + 1 : 0;
  size_t curved = 0, done = 0, looked = 0;
  for (auto it = history.rbegin(); it != history.rend() && looked < kRecent; ++it, ++looked) {
    const HistoryEntry& h = *it;
    if (!req.space->Contains(h.params)) continue;
    if (h.curve != nullptr) {  // the sweep keeps curves: only those count
      bool has =
          !h.curve->empty() &&
          (width == 0 || (h.vectors != nullptr && h.vectors->size() == h.curve->size() * width));
      if (has && ++curved >= 2 * k) return true;
      continue;
    }
    bool known =
        h.finished && (width == 0 ? h.objective && std::isfinite(*h.objective)
                                  : !h.stopped && h.values.size() == width - 1 &&
                                        std::all_of(h.values.begin(), h.values.end(),
                                                    [](double v) { return std::isfinite(v); }));
    if (known && ++done >= k) return true;
  }
  return Learned(req) >= k;
}

std::vector<const HistoryEntry*> TpeSampler::Ranked(const SuggestRequest& req,
                                                    const std::vector<const HistoryEntry*>& among) {
  // With curves, trials are compared at one step: the furthest that at least half of them reached.
  std::vector<const HistoryEntry*> curved;
  std::vector<int64_t> reached;
  for (const HistoryEntry* e : among) {
    const HistoryEntry& h = *e;
    if (h.curve == nullptr || h.curve->empty() || !req.space->Contains(h.params)) continue;
    curved.push_back(&h);
    reached.push_back(h.curve->back().first);
  }
  std::vector<const HistoryEntry*> out;
  if (!curved.empty()) {
    size_t half = (reached.size() - 1) / 2;
    std::nth_element(reached.begin(), reached.begin() + static_cast<ptrdiff_t>(half), reached.end(),
                     std::greater<>());
    int64_t step = reached[half];
    std::vector<std::pair<double, const HistoryEntry*>> at;
    for (const HistoryEntry* h : curved) {
      // A running trial short of the step is not known to be bad: it is left out.
      if (h->curve->back().first < step) {
        if (h->finished) out.push_back(h);
        continue;
      }
      double v = ValueAt(*h->curve, step);
      if (std::isfinite(v)) at.emplace_back(v, h);
    }
    std::stable_sort(at.begin(), at.end(), [&](const auto& a, const auto& b) {
      return IsBetter(a.first, b.first, req.direction);
    });
    std::stable_sort(out.begin(), out.end(), [](const HistoryEntry* a, const HistoryEntry* b) {
      return a->curve->back().first > b->curve->back().first;
    });
    std::vector<const HistoryEntry*> ranked;
    for (const auto& [v, h] : at) ranked.push_back(h);
    ranked.insert(ranked.end(), out.begin(), out.end());
    return RepeatsLast(std::move(ranked));
  }
  // Otherwise finished trials with an objective, best first.
  for (const HistoryEntry* e : among) {
    const HistoryEntry& h = *e;
    if (h.finished && h.objective && std::isfinite(*h.objective) && req.space->Contains(h.params)) {
      out.push_back(&h);
    }
  }
  std::stable_sort(out.begin(), out.end(), [&](const HistoryEntry* a, const HistoryEntry* b) {
    return IsBetter(*a->objective, *b->objective, req.direction);
  });
  return out;
}

size_t TpeSampler::Good(size_t n) {
  return std::max<size_t>(
      std::min<size_t>(static_cast<size_t>(std::ceil(0.1 * static_cast<double>(n))), 25), 1);
}

TpeSampler::MultiKnown TpeSampler::MultiKnownTrials(const SuggestRequest& req,
                                                    const std::vector<const HistoryEntry*>& among) {
  const std::vector<Direction>& directions = *req.directions;
  const size_t width = directions.size() + 1;  // a point's values and violation
  // With curves, trials are compared at one step (as with one objective): the furthest that at
  // least half of those that reported reached; without, the trials that ran to their end.
  MultiKnown known;
  std::vector<const HistoryEntry*>& entries = known.entries;
  std::vector<const HistoryEntry*>& behind = known.behind;
  Points& points = known.points;
  points.k = directions.size();
  std::vector<int64_t> reached;
  for (const HistoryEntry* e : among) {
    const HistoryEntry& h = *e;
    if (h.vectors != nullptr && h.curve != nullptr && !h.curve->empty() &&
        h.vectors->size() == h.curve->size() * width && req.space->Contains(h.params)) {
      reached.push_back(h.curve->back().first);
    }
  }
  if (!reached.empty()) {
    size_t half = (reached.size() - 1) / 2;
    std::nth_element(reached.begin(), reached.begin() + static_cast<ptrdiff_t>(half), reached.end(),
                     std::greater<>());
    int64_t step = reached[half];
    for (const HistoryEntry* e : among) {
      const HistoryEntry& h = *e;
      if (h.vectors == nullptr || h.curve == nullptr || h.curve->empty() ||
          h.vectors->size() != h.curve->size() * width || !req.space->Contains(h.params)) {
        continue;
      }
      if (h.curve->back().first < step) {  // a running trial short of it is not known to be bad
        if (h.finished) behind.push_back(&h);
        continue;
      }
      size_t at = 0;
      while ((*h.curve)[at].first < step) ++at;
      std::span<const double> v(h.vectors->data() + at * width, width);
      points.Add(v.first(directions.size()), directions, v.back());
      entries.push_back(&h);
    }
  } else {
    points = CompletedPoints(req, among, entries);
    for (const HistoryEntry* e : among) {
      const HistoryEntry& h = *e;
      if (h.finished && h.stopped && req.space->Contains(h.params)) behind.push_back(&h);
    }
  }
  return known;
}

std::vector<const HistoryEntry*> TpeSampler::MultiRanked(
    const SuggestRequest& req, const std::vector<const HistoryEntry*>& among) {
  MultiKnown known = MultiKnownTrials(req, among);
  std::vector<const HistoryEntry*>&entries = known.entries, &behind = known.behind;
  const Points& points = known.points;
  auto got = [](const HistoryEntry* h) {
    return h->curve != nullptr && !h->curve->empty() ? h->curve->back().first : int64_t{0};
  };
  std::stable_sort(behind.begin(), behind.end(),
                   [&](const HistoryEntry* a, const HistoryEntry* b) { return got(a) > got(b); });
  size_t n_good = Good(entries.size() + behind.size());
  std::vector<const HistoryEntry*> out;
  std::vector<int> ranks = NonDominatedRanks(points);
  // The reference point: 10% of each objective's range past its worst feasible value.
  std::vector<double> reference(points.k, 0.0);
  for (size_t j = 0; j < points.k; ++j) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (size_t i = 0; i < points.size(); ++i) {
      if (!points.feasible(i)) continue;
      lo = std::min(lo, points.at(i, j));
      hi = std::max(hi, points.at(i, j));
    }
    reference[j] = hi > lo ? hi + 0.1 * (hi - lo) : hi + 1.0;
  }
  for (const std::vector<size_t>& front : Fronts(ranks)) {
    if (front.empty()) continue;
    bool cut = out.size() < n_good && out.size() + front.size() > n_good;
    if (!cut || !points.feasible(front.front())) {
      for (size_t i : front) out.push_back(entries[i]);
      continue;
    }
    // Greedy hypervolume subset selection: each time the member that adds the most.
    std::vector<size_t> chosen, left = front;
    double volume = 0;
    while (out.size() + chosen.size() < n_good) {
      size_t pick = 0;
      double best = -1;
      for (size_t n = 0; n < left.size(); ++n) {
        chosen.push_back(left[n]);
        double gain = Hypervolume(points, chosen, reference) - volume;
        chosen.pop_back();
        if (gain > best) best = gain, pick = n;
      }
      chosen.push_back(left[pick]);
      volume += best;
      left.erase(left.begin() + static_cast<ptrdiff_t>(pick));
    }
    for (size_t i : chosen) out.push_back(entries[i]);
    for (size_t i : left) out.push_back(entries[i]);
  }
  out.insert(out.end(), behind.begin(), behind.end());
  return RepeatsLast(std::move(out));
}

absl::StatusOr<std::optional<Params>> TpeSampler::Suggest(const SuggestRequest& req) const {
  Rng rng(req.seed, static_cast<uint64_t>(req.trial_number));
  std::vector<const HistoryEntry*> among = Modelled(req);
  std::vector<const HistoryEntry*> done =
      req.MultiObjective() ? MultiRanked(req, among) : Ranked(req, among);
  if (static_cast<int>(done.size()) < options_.startup_trials) {
    Params out;
    for (const ParamDef& p : req.space->params) out[p.name] = RandomSampler::Draw(p, rng);
    return std::optional<Params>(std::move(out));
  }
  size_t n_good = Good(done.size());

  Params out;
  if (options_.multivariate) {
    std::vector<const ParamDef*> params;
    for (const ParamDef& p : req.space->params) {
      if (p.type == ParamType::kFixed)
        out[p.name] = p.value;
      else
        params.push_back(&p);
    }
    std::vector<const Params*> good, bad;
    for (size_t i = 0; i < done.size(); ++i) (i < n_good ? good : bad).push_back(&done[i]->params);
    JointParzen l = JointParzen::Fit(params, good), g = JointParzen::Fit(params, bad);
    auto at = [&](const std::vector<double>& x) {
      Params p = out;
      for (size_t d = 0; d < params.size(); ++d) {
        const ParamDef& def = *params[d];
        p[def.name] = def.type == ParamType::kCategorical ? def.choices[static_cast<size_t>(x[d])]
                                                          : FromAxis(def, x[d]);
      }
      return p;
    };
    // In a space of finitely many configurations a draw may be one that ran already, which
    // tells nothing new: those are passed over while fresh ones turn up (up to 10x the draws).
    std::set<Params> ran;
    if (std::all_of(params.begin(), params.end(),
                    [](const ParamDef* p) { return p->Cardinality().has_value(); })) {
      for (const HistoryEntry* h : among) ran.insert(h->params);
    }
    if (ran.empty()) {
      std::vector<double> best_x;
      double best_score = -1e300;
      for (int c = 0; c < options_.candidates; ++c) {
        std::vector<double> x = l.Sample(rng);
        double score = l.LogPdf(x) - g.LogPdf(x);
        if (score > best_score) best_score = score, best_x = std::move(x);
      }
      return std::optional<Params>(at(best_x));
    }
    std::optional<Params> best, best_fresh;
    double best_score = -1e300, best_fresh_score = -1e300;
    for (int c = 0, fresh = 0; c < 10 * options_.candidates && fresh < options_.candidates; ++c) {
      std::vector<double> x = l.Sample(rng);
      double score = l.LogPdf(x) - g.LogPdf(x);
      Params p = at(x);
      if (!ran.count(p)) {
        ++fresh;
        if (score > best_fresh_score) best_fresh_score = score, best_fresh = p;
      }
      if (score > best_score) best_score = score, best = std::move(p);
    }
    return best_fresh ? best_fresh : best;
  }
  for (const ParamDef& p : req.space->params) {
    if (p.type == ParamType::kFixed) {
      out[p.name] = p.value;
      continue;
    }
    if (p.type == ParamType::kCategorical) {
      size_t k = p.choices.size();
      std::vector<double> good(k, 1.0), bad(k, 1.0);  // +1 smoothing (the prior)
      for (size_t i = 0; i < done.size(); ++i) {
        const ParamValue& v = done[i]->params.at(p.name);
        for (size_t c = 0; c < k; ++c) {
          if (p.choices[c] == v) (i < n_good ? good : bad)[c] += 1;
        }
      }
      double gsum = std::accumulate(good.begin(), good.end(), 0.0);
      double bsum = std::accumulate(bad.begin(), bad.end(), 0.0);
      size_t best = 0;
      double best_score = -1e300;
      for (int c = 0; c < options_.candidates; ++c) {
        // Draw from l (the good counts), score by l / g.
        double u = rng.Uniform() * gsum, acc = 0;
        size_t pick = k - 1;
        for (size_t j = 0; j < k; ++j) {
          acc += good[j];
          if (u < acc) {
            pick = j;
            break;
          }
        }
        double score = std::log(good[pick] / gsum) - std::log(bad[pick] / bsum);
        if (score > best_score) best_score = score, best = pick;
      }
      out[p.name] = p.choices[best];
      continue;
    }
    Axis axis = AxisOf(p);
    std::vector<double> good_x, bad_x;
    for (size_t i = 0; i < done.size(); ++i) {
      (i < n_good ? good_x : bad_x).push_back(ToAxis(p, done[i]->params.at(p.name)));
    }
    Parzen l = Parzen::Fit(good_x, axis.low, axis.high);
    Parzen g = Parzen::Fit(bad_x, axis.low, axis.high);
    double best_x = l.Sample(rng), best_score = -1e300;
    for (int c = 0; c < options_.candidates; ++c) {
      double x = c == 0 ? best_x : l.Sample(rng);
      double score = l.LogPdf(x) - g.LogPdf(x);
      if (score > best_score) best_score = score, best_x = x;
    }
    out[p.name] = FromAxis(p, best_x);
  }
  return std::optional<Params>(std::move(out));
}

}  // namespace hpo::algorithms
