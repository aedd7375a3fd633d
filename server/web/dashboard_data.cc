#include "server/web/dashboard_data.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <variant>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "google/protobuf/util/json_util.h"
#include "hpo/v1/states.h"
#include "server/core/objectives.h"
#include "server/core/usage.h"
#include "server/core/views.h"

namespace hpo::server {
namespace {

using json = nlohmann::json;

// The value of a curve at its first point at or past `step`, if it has one.
std::optional<double> ValueAt(const std::vector<std::pair<int64_t, double>>& curve, int64_t step) {
  for (const auto& [s, v] : curve) {
    if (s >= step) return v;
  }
  return std::nullopt;
}

bool Finished(const TrialRecord& rec) {
  return rec.state == v1::TRIAL_STATE_COMPLETED || rec.state == v1::TRIAL_STATE_STOPPED;
}

// A numeric value of a parameter, or nullopt for a text or boolean one.
std::optional<double> Number(const algorithms::Params& params, const std::string& name) {
  auto it = params.find(name);
  if (it == params.end()) return std::nullopt;
  return algorithms::NumericValue(it->second);
}

}  // namespace

json ProtoJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(message, &text, options).ok()) return json();
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

absl::StatusOr<const Sweep*> DashboardData::Find(int64_t sweep_id) const {
  const Sweep* sweep = table_.FindSweep(sweep_id);
  if (sweep == nullptr) return absl::NotFoundError(absl::StrCat("no sweep ", sweep_id));
  return sweep;
}

absl::StatusOr<json> DashboardData::Trials(int64_t sweep_id, const TrialQuery& q) const {
  absl::StatusOr<const Sweep*> found = Find(sweep_id);
  if (!found.ok()) return found.status();
  const Sweep& sweep = **found;
  if (q.limit < 0 || q.limit > 1000 || q.offset < 0) {
    return absl::InvalidArgumentError("trials: limit is 0 to 1000, offset at least 0");
  }
  const bool pareto = sweep.spec().Pareto();
  std::vector<int> ranks = pareto ? sweep.ParetoRanks() : std::vector<int>();
  // The sort key of a trial: a number (missing ones last) or a text.
  using Key = std::variant<double, std::string>;
  std::function<std::optional<Key>(const TrialRecord&)> key;
  const std::string& sort = q.sort;
  if (sort == "number") {
    key = [](const TrialRecord& r) { return Key(static_cast<double>(r.number)); };
  } else if (sort == "state") {
    key = [](const TrialRecord& r) { return Key(v1::StateName(r.state)); };
  } else if (sort == "objective") {
    key = [&](const TrialRecord& r) -> std::optional<Key> {
      if (pareto && ranks[static_cast<size_t>(r.number)] >= 0) {
        return Key(static_cast<double>(ranks[static_cast<size_t>(r.number)]));
      }
      if (pareto || !r.objective) return std::nullopt;
      return Key(algorithms::Minimized(*r.objective, sweep.spec().objective.direction));
    };
  } else if (sort == "step") {
    key = [](const TrialRecord& r) { return Key(static_cast<double>(r.step)); };
  } else if (sort == "runtime") {
    key = [&](const TrialRecord& r) { return Key(RunSeconds(r, now_)); };
  } else if (absl::StartsWith(sort, "param:")) {
    std::string name = sort.substr(6);
    key = [name](const TrialRecord& r) -> std::optional<Key> {
      auto it = r.params.find(name);
      if (it == r.params.end()) return std::nullopt;
      if (auto n = algorithms::NumericValue(it->second)) return Key(*n);
      return Key(algorithms::FormatValue(it->second));
    };
  } else if (absl::StartsWith(sort, "metric:")) {
    std::string name = sort.substr(7);
    key = [name](const TrialRecord& r) -> std::optional<Key> {
      auto it = r.last_metrics.find(name);
      if (it == r.last_metrics.end()) return std::nullopt;
      return Key(it->second);
    };
  } else {
    return absl::InvalidArgumentError(absl::StrCat("trials: cannot sort by '", sort, "'"));
  }
  std::vector<std::pair<std::optional<Key>, const TrialRuntime*>> picked;
  for (const auto& t : sweep.trials()) {
    const TrialRecord& r = t->rec;
    if (!q.states.empty() && std::find(q.states.begin(), q.states.end(), r.state) == q.states.end())
      continue;
    bool in = true;
    for (const auto& [name, range] : q.ranges) {
      std::optional<double> v = Number(r.params, name);
      in = in && v && *v >= range.first && *v <= range.second;
    }
    if (in) picked.emplace_back(key(r), t.get());
  }
  std::stable_sort(picked.begin(), picked.end(), [&](const auto& a, const auto& b) {
    if (a.first.has_value() != b.first.has_value()) return a.first.has_value();  // missing last
    if (!a.first) return false;
    return q.descending ? *b.first < *a.first : *a.first < *b.first;
  });
  json rows = json::array();
  for (int64_t i = q.offset; i < static_cast<int64_t>(picked.size()) && i < q.offset + q.limit;
       ++i) {
    const TrialRuntime& t = *picked[static_cast<size_t>(i)].second;
    json row = ProtoJson(TrialView(sweep, t, now_));
    row["runtime_s"] = RunSeconds(t.rec, now_);
    if (pareto) row["pareto_rank"] = ranks[static_cast<size_t>(t.rec.number)];
    rows.push_back(std::move(row));
  }
  return json{{"total", picked.size()}, {"offset", q.offset}, {"rows", std::move(rows)}};
}

std::vector<std::pair<double, double>> DashboardData::Downsample(
    const std::vector<std::pair<double, double>>& pts, size_t max) {
  if (max < 3 || pts.size() <= max) return pts;
  std::vector<std::pair<double, double>> out = {pts.front()};
  double every = static_cast<double>(pts.size() - 2) / static_cast<double>(max - 2);
  size_t a = 0;  // the point kept last
  for (size_t bucket = 0; bucket < max - 2; ++bucket) {
    size_t from = static_cast<size_t>(std::floor(static_cast<double>(bucket) * every)) + 1;
    size_t to =
        std::min(static_cast<size_t>(std::floor(static_cast<double>(bucket + 1) * every)) + 1,
                 pts.size() - 1);
    // The next bucket's average: the third corner of the triangle.
    size_t nfrom = to,
           nto = std::min(
               static_cast<size_t>(std::floor(static_cast<double>(bucket + 2) * every)) + 1,
               pts.size());
    double cx = 0, cy = 0;
    for (size_t i = nfrom; i < nto; ++i) cx += pts[i].first, cy += pts[i].second;
    double n = static_cast<double>(std::max<size_t>(nto - nfrom, 1));
    cx /= n;
    cy /= n;
    if (nto == nfrom) cx = pts.back().first, cy = pts.back().second;
    size_t best = from;
    double area = -1;
    for (size_t i = from; i < to; ++i) {
      double s = std::abs((pts[a].first - cx) * (pts[i].second - pts[a].second) -
                          (pts[a].first - pts[i].first) * (cy - pts[a].second));
      if (s > area) area = s, best = i;
    }
    out.push_back(pts[best]);
    a = best;
  }
  out.push_back(pts.back());
  return out;
}

absl::StatusOr<json> DashboardData::Curves(int64_t sweep_id, const std::vector<int64_t>& trial_ids,
                                           int max_trials, int max_points) const {
  absl::StatusOr<const Sweep*> found = Find(sweep_id);
  if (!found.ok()) return found.status();
  const Sweep& sweep = **found;
  const server::Objective& objective = sweep.spec().objective;
  std::vector<const TrialRuntime*> chosen;
  if (!trial_ids.empty()) {
    for (int64_t id : trial_ids) {
      auto [s, t] = table_.FindTrial(id);
      if (t == nullptr || s != &sweep) {
        return absl::NotFoundError(absl::StrCat("no trial ", id, " in sweep ", sweep_id));
      }
      chosen.push_back(t);
    }
  } else {
    // The best finished ones and every running one.
    std::vector<const TrialRuntime*> finished;
    for (const auto& t : sweep.trials()) {
      if (t->rec.state == v1::TRIAL_STATE_RUNNING) chosen.push_back(t.get());
      if (Finished(t->rec) && t->rec.objective) finished.push_back(t.get());
    }
    std::stable_sort(finished.begin(), finished.end(), [&](const auto* a, const auto* b) {
      return algorithms::IsBetter(*a->rec.objective, *b->rec.objective, objective.direction);
    });
    if (finished.size() > static_cast<size_t>(max_trials)) {
      finished.resize(static_cast<size_t>(max_trials));
    }
    if (chosen.size() > static_cast<size_t>(max_trials))
      chosen.resize(static_cast<size_t>(max_trials));
    chosen.insert(chosen.end(), finished.begin(), finished.end());
  }
  json curves = json::array();
  for (const TrialRuntime* t : chosen) {
    std::vector<std::pair<double, double>> pts;
    if (sweep.plan.keeps_curves) {
      for (const auto& [s, v] : t->curve) pts.emplace_back(static_cast<double>(s), v);
    } else {
      absl::StatusOr<std::vector<ReportRecord>> reports = store_.LoadReports(t->rec.id);
      if (!reports.ok()) return reports.status();
      for (const ReportRecord& r : *reports) {
        auto it = r.metrics.find(objective.metric);
        if (it != r.metrics.end()) pts.emplace_back(static_cast<double>(r.step), it->second);
      }
    }
    json points = json::array();
    for (const auto& [x, y] : Downsample(pts, static_cast<size_t>(max_points))) {
      points.push_back({x, y});
    }
    curves.push_back({{"trial", t->rec.id},
                      {"number", t->rec.number},
                      {"state", v1::StateName(t->rec.state)},
                      {"points", std::move(points)}});
  }
  return json{{"metric", objective.metric}, {"curves", std::move(curves)}};
}

std::vector<size_t> DashboardData::Thin(size_t n, size_t max, std::vector<size_t> keep) {
  std::vector<size_t> out;
  if (n <= max) {
    out.resize(n);
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  std::vector<bool> kept(n, false);
  for (size_t k : keep) kept[k] = true;
  out = keep;
  // The others, `rest` of them, fill the `room` left at the ranks j * rest / room (j < room),
  // which rise by at least one since rest > room.
  const size_t rest = n - keep.size();
  const size_t room = max > keep.size() ? max - keep.size() : 0;
  for (size_t i = 0, rank = 0, picked = 0; i < n && picked < room; ++i) {
    if (kept[i]) continue;
    if (rank == picked * rest / room) {
      out.push_back(i);
      ++picked;
    }
    ++rank;
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

constexpr size_t kImportanceTrials = 20'000;

json DirectionName(algorithms::Direction d) {
  return d == algorithms::Direction::kMaximize ? "maximize" : "minimize";
}

// The trials a chart shows of `trials` (finished ones, in number order), as a JSON array of
// `row(trial)`: all, or past `max` the `keep` indices and an even spread of the others.
template <typename Row>
json Rows(const std::vector<const TrialRecord*>& trials, size_t max, std::vector<size_t> keep,
          Row row) {
  json out = json::array();
  for (size_t i : DashboardData::Thin(trials.size(), max, std::move(keep))) {
    out.push_back(row(*trials[i]));
  }
  return out;
}

}  // namespace

absl::StatusOr<json> DashboardData::Objective(int64_t sweep_id, int max_points) const {
  absl::StatusOr<const Sweep*> found = Find(sweep_id);
  if (!found.ok()) return found.status();
  const Sweep& sweep = **found;
  const SweepSpec& spec = sweep.spec();
  const auto max = static_cast<size_t>(std::max(max_points, 1));
  std::vector<const TrialRecord*> shown;
  std::vector<size_t> keep;
  if (spec.Pareto() && spec.objectives.size() > 1) {
    std::vector<int> ranks = sweep.ParetoRanks();
    for (const auto& t : sweep.trials()) {
      if (t->rec.state != v1::TRIAL_STATE_COMPLETED) continue;
      Scores s = ScoresOf(spec, t->rec.last_metrics);
      if (!s.complete) continue;
      if (ranks[static_cast<size_t>(t->rec.number)] == 0) keep.push_back(shown.size());
      shown.push_back(&t->rec);
    }
    json objectives = json::array();
    for (const server::Objective& o : spec.objectives) {
      objectives.push_back({{"metric", o.metric}, {"direction", DirectionName(o.direction)}});
    }
    json points = Rows(shown, max, std::move(keep), [&](const TrialRecord& r) {
      Scores s = ScoresOf(spec, r.last_metrics);
      return json{r.id, r.number, s.values, ranks[static_cast<size_t>(r.number)], s.violation <= 0};
    });
    return json{{"objectives", std::move(objectives)},
                {"total", shown.size()},
                {"pareto", std::move(points)}};
  }
  json best = json::array();
  std::optional<double> so_far;
  for (const auto& t : sweep.trials()) {
    const TrialRecord& r = t->rec;
    if (!Finished(r) || !r.objective || r.origin == kWarmStart) continue;
    if (!so_far || algorithms::IsBetter(*r.objective, *so_far, spec.objective.direction)) {
      so_far = r.objective;
      best.push_back({r.number, *so_far});
      keep.push_back(shown.size());
    }
    shown.push_back(&r);
  }
  if (so_far) best.push_back({shown.back()->number, *so_far});
  json points = Rows(shown, max, std::move(keep), [](const TrialRecord& r) {
    return json{r.number, *r.objective, r.id, v1::StateName(r.state)};
  });
  return json{{"metric", spec.objective.metric},
              {"direction", DirectionName(spec.objective.direction)},
              {"total", shown.size()},
              {"points", std::move(points)},
              {"best", std::move(best)}};
}

absl::StatusOr<json> DashboardData::Parallel(int64_t sweep_id, int max_trials) const {
  absl::StatusOr<const Sweep*> found = Find(sweep_id);
  if (!found.ok()) return found.status();
  const Sweep& sweep = **found;
  const SweepSpec& spec = sweep.spec();
  json axes = json::array();
  std::vector<const algorithms::ParamDef*> params;
  for (const algorithms::ParamDef& p : spec.space.params) {
    if (p.type == algorithms::ParamType::kFixed) continue;
    params.push_back(&p);
    json axis = {{"name", p.name}, {"log", p.log}};
    if (p.type == algorithms::ParamType::kCategorical) {
      axis["type"] = "categorical";
      json choices = json::array();
      for (const auto& c : p.choices) choices.push_back(algorithms::FormatValue(c));
      axis["choices"] = std::move(choices);
    } else {
      axis["type"] = p.type == algorithms::ParamType::kInt ? "int" : "float";
      axis["low"] = p.low;
      axis["high"] = p.high;
    }
    axes.push_back(std::move(axis));
  }
  std::vector<const TrialRecord*> finished;
  for (const auto& t : sweep.trials()) {
    const TrialRecord& r = t->rec;
    if (Finished(r) && r.objective && r.origin != kWarmStart) finished.push_back(&r);
  }
  const auto max = static_cast<size_t>(std::max(max_trials, 1));
  std::vector<size_t> best;
  if (finished.size() > max) {
    best.resize(finished.size());
    std::iota(best.begin(), best.end(), 0);
    const algorithms::Direction d = spec.objective.direction;
    std::nth_element(best.begin(), best.begin() + static_cast<std::ptrdiff_t>(max / 2), best.end(),
                     [&](size_t a, size_t b) {
                       const double va = *finished[a]->objective, vb = *finished[b]->objective;
                       return algorithms::IsBetter(va, vb, d) || (va == vb && a < b);
                     });
    best.resize(max / 2);
  }
  json trials = Rows(finished, max, std::move(best), [&](const TrialRecord& r) {
    json values = json::array();
    for (const algorithms::ParamDef* p : params) {
      auto it = r.params.find(p->name);
      if (it == r.params.end()) {
        values.push_back(nullptr);
      } else if (p->type == algorithms::ParamType::kCategorical) {
        values.push_back(std::find(p->choices.begin(), p->choices.end(), it->second) -
                         p->choices.begin());
      } else {
        values.push_back(*algorithms::NumericValue(it->second));
      }
    }
    return json{r.id, *r.objective, v1::StateName(r.state), std::move(values)};
  });
  return json{{"axes", std::move(axes)},
              {"metric", spec.objective.metric},
              {"direction", DirectionName(spec.objective.direction)},
              {"total", finished.size()},
              {"trials", std::move(trials)}};
}

absl::StatusOr<json> DashboardData::Importance(int64_t sweep_id) const {
  absl::StatusOr<const Sweep*> found = Find(sweep_id);
  if (!found.ok()) return found.status();
  const Sweep& sweep = **found;
  const SweepSpec& spec = sweep.spec();
  // The trials' values at one step (with curves), or the completed trials' objectives.
  std::vector<std::pair<const TrialRecord*, double>> ys;
  int64_t step = -1;
  if (sweep.plan.keeps_curves) {
    std::vector<int64_t> reached;
    for (const auto& t : sweep.trials()) {
      if (!t->curve.empty() && t->rec.origin != kWarmStart)
        reached.push_back(t->curve.back().first);
    }
    if (!reached.empty()) {
      size_t half = (reached.size() - 1) / 2;
      std::nth_element(reached.begin(), reached.begin() + static_cast<ptrdiff_t>(half),
                       reached.end(), std::greater<>());
      step = reached[half];
      for (const auto& t : sweep.trials()) {
        if (t->curve.empty() || t->curve.back().first < step) continue;
        if (std::optional<double> v = ValueAt(t->curve, step)) ys.emplace_back(&t->rec, *v);
      }
    }
  } else {
    for (const auto& t : sweep.trials()) {
      if (t->rec.state == v1::TRIAL_STATE_COMPLETED && t->rec.objective &&
          t->rec.origin != kWarmStart) {
        ys.emplace_back(&t->rec, *t->rec.objective);
      }
    }
  }
  // Past kImportanceTrials, an even spread of them: the shares hardly move, and the cost on the
  // controller's thread stays bounded however large the sweep.
  const size_t compared = ys.size();
  if (ys.size() > kImportanceTrials) {
    std::vector<std::pair<const TrialRecord*, double>> spread;
    for (size_t i : Thin(ys.size(), kImportanceTrials, {})) spread.push_back(ys[i]);
    ys = std::move(spread);
  }
  json importance = json::array();
  double mean = 0, total = 0;
  for (const auto& [r, y] : ys) mean += y;
  mean /= std::max<double>(1, static_cast<double>(ys.size()));
  for (const auto& [r, y] : ys) total += (y - mean) * (y - mean);
  if (ys.size() >= 5 && total > 0) {
    for (const algorithms::ParamDef& p : spec.space.params) {
      if (p.type == algorithms::ParamType::kFixed) continue;
      // Groups: a categorical's values, or up to 10 quantile bins of a number.
      std::vector<std::pair<std::string, double>> keyed;  // group key (text), y
      std::vector<std::pair<double, double>> numeric;
      for (const auto& [r, y] : ys) {
        auto it = r->params.find(p.name);
        if (it == r->params.end()) continue;
        std::optional<double> v = algorithms::NumericValue(it->second);
        if (p.type == algorithms::ParamType::kCategorical || !v) {
          keyed.emplace_back(algorithms::FormatValue(it->second), y);
        } else {
          numeric.emplace_back(*v, y);
        }
      }
      std::map<std::string, std::pair<double, int>> groups;  // sum, count
      for (const auto& [k, y] : keyed) groups[k].first += y, groups[k].second += 1;
      std::sort(numeric.begin(), numeric.end());
      const size_t bins = std::min<size_t>(10, std::max<size_t>(1, numeric.size() / 3));
      std::vector<std::pair<double, int>> binned(bins);
      for (size_t i = 0; i < numeric.size(); ++i) {
        auto& g = binned[i * bins / numeric.size()];
        g.first += numeric[i].second, g.second += 1;
      }
      double between = 0;
      auto add = [&](const std::pair<double, int>& g) {
        if (g.second == 0) return;
        double m = g.first / g.second;
        between += g.second * (m - mean) * (m - mean);
      };
      for (const auto& [k, g] : groups) add(g);
      for (const auto& g : binned) add(g);
      importance.push_back({{"param", p.name}, {"share", between / total}});
    }
    std::stable_sort(importance.begin(), importance.end(),
                     [](const json& a, const json& b) { return a["share"] > b["share"]; });
  }
  return json{{"step", step},
              {"trials", compared},
              {"sampled", ys.size()},
              {"importance", std::move(importance)}};
}

absl::StatusOr<json> DashboardData::Timeline(int64_t sweep_id, int max_bars) const {
  absl::StatusOr<const Sweep*> found = Find(sweep_id);
  if (!found.ok()) return found.status();
  const Sweep& sweep = **found;
  json bars = json::array();
  // "0,1" (a local trial's CUDA_VISIBLE_DEVICES) or "n1:0,1 n2:2" (Slurm).
  auto add = [&](const TrialRecord& r, const std::string& gpus, absl::Time from, absl::Time to) {
    for (absl::string_view part : absl::StrSplit(gpus, ' ', absl::SkipEmpty())) {
      std::pair<std::string, std::string> node_gpus =
          part.find(':') == absl::string_view::npos
              ? std::pair<std::string, std::string>("local", std::string(part))
              : std::pair<std::string, std::string>(absl::StrSplit(part, absl::MaxSplits(':', 1)));
      for (absl::string_view g : absl::StrSplit(node_gpus.second, ',', absl::SkipEmpty())) {
        bars.push_back({{"lane", absl::StrCat(node_gpus.first, ":", g)},
                        {"trial", r.id},
                        {"number", r.number},
                        {"state", v1::StateName(r.state)},
                        {"start", UnixSeconds(from)},
                        {"end", UnixSeconds(to)}});
      }
    }
  };
  for (const auto& t : sweep.trials()) {
    const TrialRecord& r = t->rec;
    for (const SegmentRecord& s : r.segments) add(r, s.gpus, s.started_at, s.ended_at);
    std::optional<absl::Time> start = r.segment_started_at;
    if (!start && r.segment == 1) start = r.started_at;
    if (!start) continue;
    if (r.state == v1::TRIAL_STATE_RUNNING) {
      add(r, r.gpus, *start, now_);
    } else if (v1::IsFinal(r.state) && r.ended_at) {
      add(r, r.gpus, *start, *r.ended_at);
    }
  }
  if (bars.size() > static_cast<size_t>(max_bars)) {
    std::vector<json> sorted(bars.begin(), bars.end());
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const json& a, const json& b) { return a["start"] > b["start"]; });
    sorted.resize(static_cast<size_t>(max_bars));
    bars = json(sorted);
  }
  return json{{"now", UnixSeconds(now_)}, {"bars", std::move(bars)}};
}

absl::StatusOr<json> DashboardData::Trial(int64_t trial_id, int max_points) const {
  auto [sweep, trial] = table_.FindTrial(trial_id);
  if (trial == nullptr) return absl::NotFoundError(absl::StrCat("no trial ", trial_id));
  json out;
  out["trial"] = ProtoJson(TrialView(*sweep, *trial, now_));
  out["trial"]["runtime_s"] = RunSeconds(trial->rec, now_);
  out["sweep"] = {{"id", sweep->rec.id},
                  {"name", sweep->rec.name},
                  {"objective", sweep->spec().objective.metric}};
  // State history with causes, from the event log.
  absl::StatusOr<std::vector<EventRecord>> events = store_.LoadTrialEvents(trial_id, 1000);
  if (!events.ok()) return events.status();
  json history = json::array();
  for (const EventRecord& e : *events) {
    v1::Event event;
    if (!event.ParseFromString(e.payload) || event.kind() != v1::EVENT_KIND_TRIAL_STATE) continue;
    const v1::Trial& t = event.trial();
    std::string state = v1::StateName(t.state());
    if (!history.empty() && history.back()["state"] == state &&
        history.back()["message"] == t.message()) {
      continue;
    }
    history.push_back({{"time", event.time().seconds() + event.time().nanos() / 1e9},
                       {"state", state},
                       {"message", t.message()},
                       {"backend_id", t.backend_id()},
                       {"segment", t.segment()}});
  }
  out["history"] = std::move(history);
  // Every reported metric's curve.
  absl::StatusOr<std::vector<ReportRecord>> reports = store_.LoadReports(trial_id);
  if (!reports.ok()) return reports.status();
  std::map<std::string, std::vector<std::pair<double, double>>> by_metric;
  for (const ReportRecord& r : *reports) {
    for (const auto& [k, v] : r.metrics) by_metric[k].emplace_back(static_cast<double>(r.step), v);
  }
  json curves = json::object();
  for (const auto& [k, pts] : by_metric) {
    json points = json::array();
    for (const auto& [x, y] : Downsample(pts, static_cast<size_t>(max_points))) {
      points.push_back({x, y});
    }
    curves[k] = std::move(points);
  }
  out["curves"] = std::move(curves);
  return out;
}

}  // namespace hpo::server
