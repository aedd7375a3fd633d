#include "algorithms/tpe_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

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
      p.sigmas.push_back(pts[i].second ? range : std::clamp(std::max(left, right), min_sigma, range));
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
    for (int tries = 0; tries < 100; ++tries) {
      // Box-Muller; redraw until inside the bounds (truncation).
      double u1 = std::max(rng.Uniform(), 1e-300), u2 = rng.Uniform();
      double x = mus[k] + sigmas[k] * std::sqrt(-2 * std::log(u1)) * std::cos(2 * kPi * u2);
      if (x >= low && x <= high) return x;
    }
    return std::clamp(mus[k], low, high);
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

}  // namespace

absl::StatusOr<std::optional<Params>> TpeSampler::Suggest(const SuggestRequest& req) const {
  Rng rng(req.seed, static_cast<uint64_t>(req.trial_number));
  // Finished trials with an objective, best first.
  std::vector<const HistoryEntry*> done;
  for (const HistoryEntry& h : *req.history) {
    if (h.finished && h.objective && std::isfinite(*h.objective) && req.space->Contains(h.params)) {
      done.push_back(&h);
    }
  }
  if (static_cast<int>(done.size()) < options_.startup_trials) {
    Params out;
    for (const ParamDef& p : req.space->params) out[p.name] = RandomSampler::Draw(p, rng);
    return std::optional<Params>(std::move(out));
  }
  std::stable_sort(done.begin(), done.end(), [&](const HistoryEntry* a, const HistoryEntry* b) {
    return IsBetter(*a->objective, *b->objective, req.direction);
  });
  size_t n_good = std::min<size_t>(static_cast<size_t>(std::ceil(0.1 * static_cast<double>(done.size()))), 25);
  n_good = std::max<size_t>(n_good, 1);

  Params out;
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
