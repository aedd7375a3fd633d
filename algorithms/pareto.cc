#include "algorithms/pareto.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

namespace hpo::algorithms {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Ranks of the feasible points `idx` by plain dominance, written into `ranks`.
void RankOneOrTwo(const Points& p, const std::vector<size_t>& idx, std::vector<int>& ranks) {
  // Sorted lexicographically; identical points share their rank.
  std::vector<size_t> order = idx;
  auto key = [&](size_t i) { return std::pair(p.at(i, 0), p.k > 1 ? p.at(i, 1) : 0.0); };
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return key(a) != key(b) ? key(a) < key(b) : a < b; });
  if (p.k == 1) {
    int rank = -1;
    for (size_t n = 0; n < order.size(); ++n) {
      if (n == 0 || key(order[n]) != key(order[n - 1])) ++rank;
      ranks[order[n]] = rank;
    }
    return;
  }
  // Two objectives: a point joins the first front whose latest member has a larger second
  // value (that member, no worse in the first, would dominate it otherwise); the fronts' latest
  // second values stay sorted, so the front is found by binary search (Jensen 2003).
  std::vector<double> last;  // per front: the second value of its latest member
  for (size_t n = 0; n < order.size(); ++n) {
    size_t i = order[n];
    if (n > 0 && key(i) == key(order[n - 1])) {
      ranks[i] = ranks[order[n - 1]];
      continue;
    }
    double f1 = p.at(i, 1);
    size_t front =
        static_cast<size_t>(std::upper_bound(last.begin(), last.end(), f1) - last.begin());
    if (front == last.size()) last.push_back(f1);
    last[front] = f1;
    ranks[i] = static_cast<int>(front);
  }
}

// Deb's fast non-dominated sort of the feasible points `idx`, any number of objectives.
void RankMany(const Points& p, const std::vector<size_t>& idx, std::vector<int>& ranks) {
  size_t n = idx.size();
  std::vector<std::vector<size_t>> dominated(n);  // positions in idx each one dominates
  std::vector<int> count(n, 0);                   // how many dominate it
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      if (Dominates(p.row(idx[a]), p.row(idx[b]), p.k)) {
        dominated[a].push_back(b);
        ++count[b];
      } else if (Dominates(p.row(idx[b]), p.row(idx[a]), p.k)) {
        dominated[b].push_back(a);
        ++count[a];
      }
    }
  }
  std::vector<size_t> current;
  for (size_t a = 0; a < n; ++a) {
    if (count[a] == 0) current.push_back(a);
  }
  for (int rank = 0; !current.empty(); ++rank) {
    std::vector<size_t> next;
    for (size_t a : current) {
      ranks[idx[a]] = rank;
      for (size_t b : dominated[a]) {
        if (--count[b] == 0) next.push_back(b);
      }
    }
    current = std::move(next);
  }
}

// The hypervolume of minimized rows `pts` (each of dimension d, strictly below `ref`).
double Volume(std::vector<const double*> pts, const double* ref, size_t d) {
  if (pts.empty()) return 0;
  if (d == 1) {
    double best = kInf;
    for (const double* x : pts) best = std::min(best, x[0]);
    return ref[0] - best;
  }
  if (d == 2) {
    // The front in order of the first objective (the second then falls), and the boxes between
    // consecutive members and the reference.
    std::sort(pts.begin(), pts.end(), [](const double* a, const double* b) {
      return a[0] != b[0] ? a[0] < b[0] : a[1] < b[1];
    });
    std::vector<const double*> front;
    for (const double* x : pts) {
      if (front.empty() || x[1] < front.back()[1]) front.push_back(x);
    }
    double total = 0;
    for (size_t i = 0; i < front.size(); ++i) {
      double next0 = i + 1 < front.size() ? front[i + 1][0] : ref[0];
      total += (next0 - front[i][0]) * (ref[1] - front[i][1]);
    }
    return total;
  }
  if (d == 3) {
    // A sweep up the third objective: the slab between consecutive values has the area of the
    // two-dimensional staircase of the points below it, kept up to date as each point comes
    // in (Fonseca et al.'s dimension sweep): O(n log n).
    std::sort(pts.begin(), pts.end(), [](const double* a, const double* b) { return a[2] < b[2]; });
    std::map<double, double> stair;  // first objective -> second (which falls as the first grows)
    double area = 0, total = 0;
    auto width_to = [&](std::map<double, double>::iterator it) {  // to the next step, or ref
      auto next = std::next(it);
      return (next == stair.end() ? ref[0] : next->first) - it->first;
    };
    for (size_t i = 0; i < pts.size(); ++i) {
      double x = pts[i][0], y = pts[i][1];
      auto succ = stair.lower_bound(x);
      auto pred = succ == stair.begin() ? stair.end() : std::prev(succ);
      bool dominated = (pred != stair.end() && pred->second <= y) ||
                       (succ != stair.end() && succ->first == x && succ->second <= y);
      if (!dominated) {
        // Out go the steps it dominates (x' >= x, y' >= y), with the area they added.
        if (pred != stair.end()) area -= width_to(pred) * (ref[1] - pred->second);
        while (succ != stair.end() && succ->second >= y) {
          area -= width_to(succ) * (ref[1] - succ->second);
          succ = stair.erase(succ);
        }
        auto at = stair.emplace_hint(succ, x, y);
        area += width_to(at) * (ref[1] - y);
        if (pred != stair.end()) area += width_to(pred) * (ref[1] - pred->second);
      }
      double top = i + 1 < pts.size() ? pts[i + 1][2] : ref[2];
      total += (top - pts[i][2]) * area;
    }
    return total;
  }
  // Slices along the last objective: between consecutive values, the (d-1)-dimensional volume
  // of the points at or below the slice.
  std::sort(pts.begin(), pts.end(),
            [d](const double* a, const double* b) { return a[d - 1] < b[d - 1]; });
  double total = 0;
  std::vector<const double*> below;
  for (size_t i = 0; i < pts.size(); ++i) {
    below.push_back(pts[i]);
    double top = i + 1 < pts.size() ? pts[i + 1][d - 1] : ref[d - 1];
    if (top > pts[i][d - 1]) total += (top - pts[i][d - 1]) * Volume(below, ref, d - 1);
  }
  return total;
}

}  // namespace

void Points::Add(std::span<const double> values, std::span<const Direction> directions, double v) {
  for (size_t j = 0; j < values.size(); ++j) {
    f.push_back(Minimized(values[j], j < directions.size() ? directions[j] : Direction::kMinimize));
  }
  violation.push_back(v);
}

bool Dominates(const double* a, const double* b, size_t k) {
  bool better = false;
  for (size_t j = 0; j < k; ++j) {
    if (a[j] > b[j]) return false;
    if (a[j] < b[j]) better = true;
  }
  return better;
}

bool ConstrainedDominates(const Points& p, size_t i, size_t j) {
  bool fi = p.feasible(i), fj = p.feasible(j);
  if (fi != fj) return fi;
  if (!fi) return p.violation[i] < p.violation[j];
  return Dominates(p.row(i), p.row(j), p.k);
}

std::vector<int> NonDominatedRanks(const Points& p) {
  std::vector<int> ranks(p.size(), 0);
  std::vector<size_t> feasible, infeasible;
  for (size_t i = 0; i < p.size(); ++i) (p.feasible(i) ? feasible : infeasible).push_back(i);
  if (p.k <= 2) {
    RankOneOrTwo(p, feasible, ranks);
  } else {
    RankMany(p, feasible, ranks);
  }
  int after = 0;
  for (size_t i : feasible) after = std::max(after, ranks[i] + 1);
  // Infeasible points: a front per violation, smallest first.
  std::sort(infeasible.begin(), infeasible.end(), [&](size_t a, size_t b) {
    return p.violation[a] != p.violation[b] ? p.violation[a] < p.violation[b] : a < b;
  });
  int rank = after - 1;
  for (size_t n = 0; n < infeasible.size(); ++n) {
    if (n == 0 || p.violation[infeasible[n]] != p.violation[infeasible[n - 1]]) ++rank;
    ranks[infeasible[n]] = rank;
  }
  return ranks;
}

std::vector<std::vector<size_t>> Fronts(const std::vector<int>& ranks) {
  std::vector<std::vector<size_t>> fronts;
  for (size_t i = 0; i < ranks.size(); ++i) {
    size_t r = static_cast<size_t>(ranks[i]);
    if (fronts.size() <= r) fronts.resize(r + 1);
    fronts[r].push_back(i);
  }
  return fronts;
}

std::vector<double> CrowdingDistances(const Points& p, const std::vector<size_t>& front) {
  size_t m = front.size();
  std::vector<double> distance(m, 0.0);
  if (m <= 2) return std::vector<double>(m, kInf);
  std::vector<size_t> order(m);
  for (size_t j = 0; j < p.k; ++j) {
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      double x = p.at(front[a], j), y = p.at(front[b], j);
      return x != y ? x < y : front[a] < front[b];
    });
    double lo = p.at(front[order.front()], j), hi = p.at(front[order.back()], j);
    distance[order.front()] = distance[order.back()] = kInf;
    if (hi <= lo) continue;
    for (size_t n = 1; n + 1 < m; ++n) {
      double gap = p.at(front[order[n + 1]], j) - p.at(front[order[n - 1]], j);
      distance[order[n]] += gap / (hi - lo);
    }
  }
  return distance;
}

std::vector<size_t> EpsilonNetOrder(const Points& p, const std::vector<size_t>& front,
                                    const std::vector<size_t>& scale) {
  if (front.empty()) return {};
  std::vector<double> lo(p.k, kInf), hi(p.k, -kInf);
  for (size_t i : scale.empty() ? front : scale) {
    for (size_t j = 0; j < p.k; ++j) {
      lo[j] = std::min(lo[j], p.at(i, j));
      hi[j] = std::max(hi[j], p.at(i, j));
    }
  }
  auto distance = [&](size_t a, size_t b) {
    double sum = 0;
    for (size_t j = 0; j < p.k; ++j) {
      double range = hi[j] > lo[j] ? hi[j] - lo[j] : 1.0;
      double d = (p.at(a, j) - p.at(b, j)) / range;
      sum += d * d;
    }
    return sum;
  };
  std::vector<size_t> left = front;
  std::sort(left.begin(), left.end());
  size_t first = 0;
  for (size_t n = 1; n < left.size(); ++n) {
    if (p.at(left[n], 0) < p.at(left[first], 0)) first = n;
  }
  std::vector<size_t> order = {left[first]};
  std::vector<double> nearest(left.size(), kInf);  // to the points taken so far
  std::vector<bool> taken(left.size(), false);
  taken[first] = true;
  for (size_t step = 1; step < left.size(); ++step) {
    size_t pick = left.size();
    for (size_t n = 0; n < left.size(); ++n) {
      if (taken[n]) continue;
      nearest[n] = std::min(nearest[n], distance(left[n], order.back()));
      if (pick == left.size() || nearest[n] > nearest[pick]) pick = n;
    }
    taken[pick] = true;
    order.push_back(left[pick]);
  }
  return order;
}

double Hypervolume(const Points& p, const std::vector<size_t>& subset,
                   std::span<const double> reference) {
  std::vector<const double*> inside;
  for (size_t i : subset) {
    if (!p.feasible(i)) continue;
    bool below = true;
    for (size_t j = 0; j < p.k; ++j) below = below && p.at(i, j) < reference[j];
    if (below) inside.push_back(p.row(i));
  }
  return Volume(std::move(inside), reference.data(), p.k);
}

double Hypervolume(const Points& p, std::span<const double> reference) {
  std::vector<size_t> all(p.size());
  std::iota(all.begin(), all.end(), 0);
  return Hypervolume(p, all, reference);
}

}  // namespace hpo::algorithms
