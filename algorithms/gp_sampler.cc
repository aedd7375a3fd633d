#include "algorithms/gp_sampler.h"

#include <Eigen/Cholesky>
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>

#include "algorithms/random_sampler.h"
#include "algorithms/rng.h"

namespace hpo::algorithms {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;

constexpr double kPi = 3.14159265358979323846;
constexpr int kRandomCandidates = 512;
constexpr int kLocalStarts =
    4;  // from the best random candidates, and as many from the best trials
constexpr int kLocalRounds = 24;
constexpr int kLocalTries = 6;  // proposals per round
constexpr int kFitSteps = 30;
constexpr size_t kFitted = 128, kFittedBest = 48;  // the trials the kernel's settings are fitted on

// The parameters a proposal chooses, as coordinates in [0, 1] (numeric: ToUnit) or choice
// indices (categorical).
struct Coder {
  std::vector<const ParamDef*> params;
  std::vector<bool> categorical;
  Params fixed;

  explicit Coder(const SearchSpace& space) {
    for (const ParamDef& p : space.params) {
      if (p.type == ParamType::kFixed) {
        fixed[p.name] = p.value;
        continue;
      }
      params.push_back(&p);
      categorical.push_back(p.type == ParamType::kCategorical);
    }
  }
  size_t dims() const { return params.size(); }

  bool Encode(const Params& values, double* x) const {
    for (size_t d = 0; d < params.size(); ++d) {
      auto it = values.find(params[d]->name);
      if (it == values.end()) return false;
      if (categorical[d]) {
        const std::vector<ParamValue>& c = params[d]->choices;
        auto found = std::find(c.begin(), c.end(), it->second);
        if (found == c.end()) return false;
        x[d] = static_cast<double>(found - c.begin());
      } else {
        if (!NumericValue(it->second)) return false;
        x[d] = ToUnit(*params[d], it->second);
      }
    }
    return true;
  }
  Params Decode(const double* x) const {
    Params out = fixed;
    for (size_t d = 0; d < params.size(); ++d) {
      out[params[d]->name] = categorical[d] ? params[d]->choices[static_cast<size_t>(x[d])]
                                            : FromUnit(*params[d], x[d]);
    }
    return out;
  }
  // x moved onto a value its parameters take (a step, an int), so that the model is asked about
  // the configuration that would run.
  void Snap(double* x) const {
    for (size_t d = 0; d < params.size(); ++d) {
      if (!categorical[d]) x[d] = ToUnit(*params[d], FromUnit(*params[d], x[d]));
    }
  }
  void Random(Rng& rng, double* x) const {
    for (size_t d = 0; d < params.size(); ++d) {
      x[d] = categorical[d] ? static_cast<double>(rng.Below(params[d]->choices.size()))
                            : rng.Uniform();
    }
    Snap(x);
  }
};

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }
double LogNormalPdf(double z) { return -0.5 * z * z - 0.5 * std::log(2 * kPi); }

// log(z Phi(z) + phi(z)), finite and increasing for every z (the expected improvement of a
// standard normal over -z, on a log scale).
double LogH(double z) {
  if (z > -6) return std::log(std::max(z * NormalCdf(z) + std::exp(LogNormalPdf(z)), 1e-300));
  // Far below: z Phi(z) + phi(z) = phi(z) / z^2 (1 - 3 / z^2 + 15 / z^4 - ...).
  double z2 = z * z;
  return LogNormalPdf(z) - std::log(z2) + std::log1p(-3 / z2 + 15 / (z2 * z2));
}

// log P(N(0,1) <= z), finite for every z.
double LogCdf(double z) {
  if (z > -6) return std::log(std::max(NormalCdf(z), 1e-300));
  double z2 = z * z;  // Mills ratio
  return LogNormalPdf(z) - std::log(-z) + std::log1p(-1 / z2 + 3 / (z2 * z2));
}

// A Gaussian process with a Matérn-5/2 ARD kernel over coded configurations.
class Gp {
 public:
  Gp(const Coder& coder, MatrixXd x, VectorXd y)
      : categorical_(coder.categorical), x_(std::move(x)), y_(std::move(y)) {
    size_t d = categorical_.size();
    log_ls_ = VectorXd::Constant(static_cast<Eigen::Index>(d), std::log(kLengthPrior));
  }

  // The kernel's settings that maximize the log marginal likelihood and the priors (Adam on
  // their logarithms, analytic gradient); the best seen is kept.
  void Fit() {
    const Eigen::Index d = log_ls_.size();
    const Eigen::Index k = d + 2;  // length scales, signal, noise
    VectorXd theta(k), m = VectorXd::Zero(k), v = VectorXd::Zero(k);
    theta << log_ls_, log_signal_, log_noise_;
    VectorXd best = theta;
    double best_value = -1e300;
    for (int step = 1; step <= kFitSteps; ++step) {
      VectorXd grad(k);
      double value = Objective(theta, &grad);
      if (std::isfinite(value) && value > best_value) best_value = value, best = theta;
      if (!grad.allFinite()) break;
      constexpr double kRate = 0.1, kB1 = 0.9, kB2 = 0.999;
      m = kB1 * m + (1 - kB1) * grad;
      v = kB2 * v + (1 - kB2) * grad.cwiseProduct(grad);
      VectorXd mhat = m / (1 - std::pow(kB1, step)), vhat = v / (1 - std::pow(kB2, step));
      theta += kRate * mhat.cwiseQuotient((vhat.array().sqrt() + 1e-8).matrix());
      Clamp(theta);
    }
    Set(best);
    Condition();
  }

  // The kernel settings of another model of the same parameters (one fitted on fewer trials).
  void TakeSettings(const Gp& other) {
    log_ls_ = other.log_ls_;
    inv_ls2_ = other.inv_ls2_;
    log_signal_ = other.log_signal_;
    log_noise_ = other.log_noise_;
  }

  // The model given its settings: x_ and y_ as they are now.
  void Condition() {
    MatrixXd kxx = Covariance();
    llt_.compute(kxx);
    for (int tries = 0; llt_.info() != Eigen::Success && tries < 6; ++tries) {
      kxx.diagonal().array() += 1e-6 * std::pow(10.0, tries);
      llt_.compute(kxx);
    }
    alpha_ = llt_.solve(y_);
  }

  // Adds configurations with values (the believed running trials); call Condition after.
  void Append(const MatrixXd& x, const VectorXd& y) {
    MatrixXd nx(x_.rows() + x.rows(), x_.cols());
    nx << x_, x;
    VectorXd ny(y_.size() + y.size());
    ny << y_, y;
    x_ = std::move(nx);
    y_ = std::move(ny);
  }

  // The posterior mean and variance of the latent function at x.
  void Predict(const double* x, double* mean, double* var) const {
    const Eigen::Index n = x_.rows();
    VectorXd kx(n);
    const double signal = std::exp(log_signal_);
    for (Eigen::Index i = 0; i < n; ++i) kx(i) = signal * Matern(SquaredDistance(x, i));
    *mean = kx.dot(alpha_);
    llt_.matrixL().solveInPlace(kx);
    *var = std::max(signal - kx.squaredNorm(), 1e-12);
  }

 private:
  static constexpr double kLengthPrior = 0.5, kLengthPriorSd = 1.5;
  static constexpr double kNoisePrior = 1e-3, kNoisePriorSd = 2.0;

  double SquaredDistance(const double* a, Eigen::Index j) const {
    double r2 = 0;
    for (Eigen::Index p = 0; p < log_ls_.size(); ++p) {
      double diff =
          categorical_[static_cast<size_t>(p)] ? (a[p] != x_(j, p) ? 1.0 : 0.0) : a[p] - x_(j, p);
      r2 += diff * diff * inv_ls2_(p);
    }
    return r2;
  }
  static double Matern(double r2) {
    double s = std::sqrt(5 * r2);
    return (1 + s + s * s / 3) * std::exp(-s);
  }

  MatrixXd Covariance() const {
    const Eigen::Index n = x_.rows();
    MatrixXd k(n, n);
    const double signal = std::exp(log_signal_);
    std::vector<double> row(static_cast<size_t>(x_.cols()));
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index p = 0; p < x_.cols(); ++p) row[static_cast<size_t>(p)] = x_(i, p);
      k(i, i) = signal + std::exp(log_noise_) + 1e-9;
      for (Eigen::Index j = 0; j < i; ++j)
        k(i, j) = k(j, i) = signal * Matern(SquaredDistance(row.data(), j));
    }
    return k;
  }

  void Set(const VectorXd& theta) {
    const Eigen::Index d = log_ls_.size();
    log_ls_ = theta.head(d);
    log_signal_ = theta(d);
    log_noise_ = theta(d + 1);
    inv_ls2_ = (-2 * log_ls_).array().exp().matrix();
  }
  static void Clamp(VectorXd& theta) {
    const Eigen::Index d = theta.size() - 2;
    for (Eigen::Index p = 0; p < d; ++p)
      theta(p) = std::clamp(theta(p), std::log(0.01), std::log(20.0));
    theta(d) = std::clamp(theta(d), std::log(0.05), std::log(20.0));
    theta(d + 1) = std::clamp(theta(d + 1), std::log(1e-6), std::log(1.0));
  }

  // The log marginal likelihood plus the log priors at theta, and its gradient.
  double Objective(const VectorXd& theta, VectorXd* grad) {
    Set(theta);
    const Eigen::Index n = x_.rows(), d = log_ls_.size();
    MatrixXd k = Covariance();
    Eigen::LLT<MatrixXd> llt(k);
    if (llt.info() != Eigen::Success) {
      grad->setConstant(std::numeric_limits<double>::quiet_NaN());
      return -1e300;
    }
    VectorXd alpha = llt.solve(y_);
    double logdet = 2 * llt.matrixLLT().diagonal().array().log().sum();
    double value =
        -0.5 * y_.dot(alpha) - 0.5 * logdet - 0.5 * static_cast<double>(n) * std::log(2 * kPi);
    // dL/dtheta = 1/2 tr(W dK/dtheta), W = alpha alpha^T - K^-1.
    MatrixXd w = alpha * alpha.transpose() - llt.solve(MatrixXd::Identity(n, n));
    grad->setZero();
    const double signal = std::exp(log_signal_), noise = std::exp(log_noise_);
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < i; ++j) {
        double r2 = 0;
        for (Eigen::Index p = 0; p < d; ++p) {
          double diff = categorical_[static_cast<size_t>(p)] ? (x_(i, p) != x_(j, p) ? 1.0 : 0.0)
                                                             : x_(i, p) - x_(j, p);
          r2 += diff * diff * inv_ls2_(p);
        }
        double s = std::sqrt(5 * r2), e = std::exp(-s);
        double wij = w(i, j);  // the pair counts twice (ij and ji), the 1/2 once
        (*grad)(d) += wij * signal * (1 + s + s * s / 3) * e;
        double g = wij * signal * (5.0 / 3.0) * (1 + s) * e;
        for (Eigen::Index p = 0; p < d; ++p) {
          double diff = categorical_[static_cast<size_t>(p)] ? (x_(i, p) != x_(j, p) ? 1.0 : 0.0)
                                                             : x_(i, p) - x_(j, p);
          (*grad)(p) += g * diff * diff * inv_ls2_(p);
        }
      }
      (*grad)(d) += 0.5 * w(i, i) * signal;
      (*grad)(d + 1) += 0.5 * w(i, i) * noise;
    }
    // Priors: log-normal on the length scales and the noise, on the signal around 1.
    for (Eigen::Index p = 0; p < d; ++p) {
      double z = (log_ls_(p) - std::log(kLengthPrior)) / kLengthPriorSd;
      value -= 0.5 * z * z;
      (*grad)(p) -= z / kLengthPriorSd;
    }
    value -= 0.5 * log_signal_ * log_signal_;
    (*grad)(d) -= log_signal_;
    double zn = (log_noise_ - std::log(kNoisePrior)) / kNoisePriorSd;
    value -= 0.5 * zn * zn;
    (*grad)(d + 1) -= zn / kNoisePriorSd;
    return value;
  }

  std::vector<bool> categorical_;
  MatrixXd x_;
  VectorXd y_;
  VectorXd log_ls_, inv_ls2_;
  double log_signal_ = 0, log_noise_ = std::log(kNoisePrior);
  Eigen::LLT<MatrixXd> llt_;
  VectorXd alpha_;
};

// (v - mean) / sd over v; sd 1 where v does not vary.
VectorXd Standardized(const VectorXd& v) {
  double mean = v.mean();
  double sd = std::sqrt((v.array() - mean).square().mean());
  if (!(sd > 1e-12)) sd = 1;
  return (v.array() - mean) / sd;
}

// A finished trial the model learns from.
struct Known {
  const HistoryEntry* entry;
  std::vector<double> values;  // minimized
  double violation;
  double scalar = 0;  // what the GP models (standardized later)
};

}  // namespace

absl::StatusOr<std::optional<Params>> GpSampler::Suggest(const SuggestRequest& req) const {
  Rng rng(req.seed, static_cast<uint64_t>(req.trial_number));
  const Coder coder(*req.space);
  const size_t dims = coder.dims();
  const std::vector<Direction> one = {req.direction};
  const std::vector<Direction>& directions = req.MultiObjective() ? *req.directions : one;
  const size_t k = directions.size();

  std::vector<Known> known;
  std::vector<const HistoryEntry*> running;
  for (const HistoryEntry& h : *req.history) {
    if (!req.space->Contains(h.params)) continue;
    if (!h.finished) {
      running.push_back(&h);
      continue;
    }
    Known kn{&h, {}, h.violation};
    if (req.MultiObjective()) {
      if (h.values.size() != k) continue;
      for (size_t j = 0; j < k; ++j) kn.values.push_back(Minimized(h.values[j], directions[j]));
    } else {
      if (!h.objective) continue;
      kn.values.push_back(Minimized(*h.objective, req.direction));
    }
    if (!std::all_of(kn.values.begin(), kn.values.end(), [](double v) { return std::isfinite(v); }))
      continue;
    known.push_back(std::move(kn));
  }
  if (dims == 0 || known.size() < static_cast<size_t>(std::max(options_.startup_trials, 1))) {
    Params out;
    for (const ParamDef& p : req.space->params) out[p.name] = RandomSampler::Draw(p, rng);
    return std::optional<Params>(std::move(out));
  }

  // One value per trial: the objective, or the scalarization with this trial number's weights.
  if (k == 1) {
    for (Known& kn : known) kn.scalar = kn.values[0];
  } else {
    std::vector<double> w(k), lo(k, 1e300), hi(k, -1e300);
    double sum = 0;
    for (double& x : w) sum += (x = -std::log(std::max(rng.Uniform(), 1e-300)));  // Dirichlet(1)
    for (double& x : w) x /= sum;
    for (const Known& kn : known) {
      for (size_t j = 0; j < k; ++j)
        lo[j] = std::min(lo[j], kn.values[j]), hi[j] = std::max(hi[j], kn.values[j]);
    }
    for (Known& kn : known) {
      double mx = -1e300, total = 0;
      for (size_t j = 0; j < k; ++j) {
        double f = hi[j] > lo[j] ? (kn.values[j] - lo[j]) / (hi[j] - lo[j]) : 0;
        mx = std::max(mx, w[j] * f);
        total += w[j] * f;
      }
      kn.scalar = mx + 0.05 * total;
    }
  }

  // Bounded: the kBest best (feasible first) and the most recent others.
  if (known.size() > kModelled) {
    std::vector<size_t> order(known.size());
    std::iota(order.begin(), order.end(), 0);
    auto better = [&](size_t a, size_t b) {
      const Known &x = known[a], &y = known[b];
      if ((x.violation > 0) != (y.violation > 0)) return x.violation <= 0;
      if (x.violation > 0 && x.violation != y.violation) return x.violation < y.violation;
      return x.scalar < y.scalar;
    };
    std::partial_sort(order.begin(), order.begin() + kBest, order.end(), better);
    std::vector<bool> take(known.size(), false);
    for (size_t i = 0; i < kBest; ++i) take[order[i]] = true;
    size_t more = kModelled - kBest;
    for (size_t i = known.size(); i-- > 0 && more > 0;) {
      if (!take[i]) take[i] = true, --more;
    }
    std::vector<Known> kept;
    for (size_t i = 0; i < known.size(); ++i)
      if (take[i]) kept.push_back(std::move(known[i]));
    known = std::move(kept);
  }
  if (running.size() > kBelieved) running.erase(running.begin(), running.end() - kBelieved);

  const Eigen::Index n = static_cast<Eigen::Index>(known.size());
  const Eigen::Index d = static_cast<Eigen::Index>(dims);
  MatrixXd x(n, d);
  VectorXd y(n), violation(n);
  std::vector<double> row(dims);
  for (Eigen::Index i = 0; i < n; ++i) {
    coder.Encode(known[static_cast<size_t>(i)].entry->params, row.data());
    for (Eigen::Index p = 0; p < d; ++p) x(i, p) = row[static_cast<size_t>(p)];
    y(i) = known[static_cast<size_t>(i)].scalar;
    violation(i) = std::max(known[static_cast<size_t>(i)].violation, 0.0);
  }
  y = Standardized(y);
  // The kernel's settings are fitted on at most kFitted of them (the best and the most recent):
  // each step of the fit costs n^3.
  std::vector<Eigen::Index> fitted;
  if (n > static_cast<Eigen::Index>(kFitted)) {
    std::vector<Eigen::Index> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + kFittedBest, order.end(),
                      [&](Eigen::Index a, Eigen::Index b) { return y(a) < y(b); });
    std::vector<bool> take(static_cast<size_t>(n), false);
    for (size_t i = 0; i < kFittedBest; ++i) take[static_cast<size_t>(order[i])] = true;
    size_t more = kFitted - kFittedBest;
    for (Eigen::Index i = n; i-- > 0 && more > 0;)
      if (!take[static_cast<size_t>(i)]) take[static_cast<size_t>(i)] = true, --more;
    for (Eigen::Index i = 0; i < n; ++i)
      if (take[static_cast<size_t>(i)]) fitted.push_back(i);
  }
  auto fit = [&](const VectorXd& target) {
    Gp model(coder, x, target);
    if (fitted.empty()) {
      model.Fit();
      return model;
    }
    Gp few(coder, x(fitted, Eigen::all), target(fitted));
    few.Fit();
    model.TakeSettings(few);
    model.Condition();
    return model;
  };
  Gp objective = fit(y);

  // Constraints: a model of the violation, where a feasible trial counts as a tenth of the
  // violations' spread below 0, so that the boundary lies between feasible and infeasible trials
  // rather than on the feasible ones.
  std::optional<Gp> feasibility;
  double threshold = 0;
  if (violation.maxCoeff() > 0) {
    VectorXd signed_violation = violation;
    double mean = violation.mean();
    double spread = std::sqrt((violation.array() - mean).square().mean());
    for (Eigen::Index i = 0; i < n; ++i)
      if (violation(i) <= 0) signed_violation(i) = -0.1 * spread;
    mean = signed_violation.mean();
    double sd = std::sqrt((signed_violation.array() - mean).square().mean());
    if (!(sd > 1e-12)) sd = 1;
    threshold = -mean / sd;
    feasibility.emplace(fit((signed_violation.array() - mean) / sd));
  }
  double incumbent = 1e300;
  for (Eigen::Index i = 0; i < n; ++i)
    if (violation(i) <= 0) incumbent = std::min(incumbent, y(i));
  const bool any_feasible = incumbent < 1e300;

  // Running trials, believed at the model's prediction.
  if (!running.empty()) {
    MatrixXd px(static_cast<Eigen::Index>(running.size()), d);
    VectorXd py(px.rows());
    Eigen::Index m = 0;
    for (const HistoryEntry* h : running) {
      if (!coder.Encode(h->params, row.data())) continue;
      double mean = 0, var = 0;
      objective.Predict(row.data(), &mean, &var);
      for (Eigen::Index p = 0; p < d; ++p) px(m, p) = row[static_cast<size_t>(p)];
      py(m++) = mean;
    }
    if (m > 0) {
      objective.Append(px.topRows(m), py.head(m));
      objective.Condition();
    }
  }

  auto score = [&](const double* c) {
    double value = 0;
    if (any_feasible) {
      double mean = 0, var = 0;
      objective.Predict(c, &mean, &var);
      double sd = std::sqrt(var);
      value += std::log(sd) + LogH((incumbent - mean) / sd);
    }
    if (feasibility) {
      double mean = 0, var = 0;
      feasibility->Predict(c, &mean, &var);
      value += LogCdf((threshold - mean) / std::sqrt(var));
    }
    return value;
  };

  // Random candidates, then a local search from the best of them and from the best trials.
  struct Candidate {
    std::vector<double> x;
    double score;
  };
  std::vector<Candidate> candidates;
  for (int c = 0; c < kRandomCandidates; ++c) {
    coder.Random(rng, row.data());
    candidates.push_back({row, score(row.data())});
  }
  auto by_score = [](const Candidate& a, const Candidate& b) { return a.score > b.score; };
  std::partial_sort(candidates.begin(), candidates.begin() + kLocalStarts, candidates.end(),
                    by_score);
  std::vector<Candidate> starts(candidates.begin(), candidates.begin() + kLocalStarts);
  std::vector<Eigen::Index> best_known(static_cast<size_t>(n));
  std::iota(best_known.begin(), best_known.end(), 0);
  auto known_better = [&](Eigen::Index a, Eigen::Index b) {
    if ((violation(a) > 0) != (violation(b) > 0)) return violation(a) <= 0;
    return violation(a) > 0 ? violation(a) < violation(b) : y(a) < y(b);
  };
  size_t from_known = std::min<size_t>(kLocalStarts, best_known.size());
  std::partial_sort(best_known.begin(), best_known.begin() + static_cast<long>(from_known),
                    best_known.end(), known_better);
  for (size_t i = 0; i < from_known; ++i) {
    for (Eigen::Index p = 0; p < d; ++p) row[static_cast<size_t>(p)] = x(best_known[i], p);
    starts.push_back({row, score(row.data())});
  }
  Candidate best = starts.front();
  for (Candidate& s : starts) {
    double step = 0.1;
    for (int round = 0; round < kLocalRounds; ++round) {
      bool improved = false;
      for (int t = 0; t < kLocalTries; ++t) {
        std::vector<double> c = s.x;
        size_t only = t % 2 == 0 ? rng.Below(dims) : dims;  // one coordinate, or all of them
        for (size_t p = 0; p < dims; ++p) {
          if (only != dims && p != only) continue;
          if (coder.categorical[p]) {
            if (only == p || rng.Uniform() < 1.0 / static_cast<double>(dims))
              c[p] = static_cast<double>(rng.Below(coder.params[p]->choices.size()));
          } else {
            double u1 = std::max(rng.Uniform(), 1e-300), u2 = rng.Uniform();
            double z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * kPi * u2);
            c[p] = std::clamp(c[p] + step * z, 0.0, 1.0);
          }
        }
        coder.Snap(c.data());
        double v = score(c.data());
        if (v > s.score) s = {std::move(c), v}, improved = true;
      }
      if (!improved) step *= 0.5;
    }
    if (s.score > best.score) best = s;
  }
  return std::optional<Params>(coder.Decode(best.x.data()));
}

}  // namespace hpo::algorithms
