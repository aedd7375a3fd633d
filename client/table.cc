#include "client/table.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/duration.h"
#include "hpo/v1/states.h"
#include "nlohmann/json.hpp"

namespace hpo::client {
namespace {

absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

std::string TimeText(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", FromProto(t), absl::UTCTimeZone());
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"')
      out += "\"\"";
    else
      out += c;
  }
  return out + "\"";
}

std::vector<std::string> ParamNames(const std::vector<v1::Trial>& trials) {
  std::set<std::string> names;
  for (const auto& t : trials) {
    for (const auto& [k, v] : t.params()) names.insert(k);
  }
  return {names.begin(), names.end()};
}

std::vector<std::string> MetricNames(const std::vector<v1::Trial>& trials) {
  std::set<std::string> names;
  for (const auto& t : trials) {
    for (const auto& [k, v] : t.last_metrics()) names.insert(k);
  }
  return {names.begin(), names.end()};
}

}  // namespace

std::string ValueText(const v1::ParamValue& v) {
  switch (v.kind_case()) {
    case v1::ParamValue::kFloatValue:
      return NumberText(v.float_value());
    case v1::ParamValue::kIntValue:
      return std::to_string(v.int_value());
    case v1::ParamValue::kStringValue:
      return v.string_value();
    case v1::ParamValue::kBoolValue:
      return v.bool_value() ? "true" : "false";
    default:
      return "";
  }
}

std::string NumberText(double v) { return absl::StrFormat("%.6g", v); }

namespace {

// The interruptions that ended a trial's earlier segments: "time_limit;preempted".
std::string InterruptionsText(const v1::Trial& t) {
  std::vector<std::string> names;
  for (const v1::Segment& seg : t.segments()) {
    names.push_back(v1::InterruptionName(seg.interruption()));
  }
  return absl::StrJoin(names, ";");
}

}  // namespace

double RuntimeSeconds(const v1::Trial& t) {
  if (!t.has_started_at()) return 0;
  absl::Time start = FromProto(t.started_at());
  absl::Time end = t.has_ended_at() ? FromProto(t.ended_at()) : absl::Now();
  return std::max(0.0, absl::ToDoubleSeconds(end - start));
}

bool IsPareto(const v1::Sweep& sweep) {
  return sweep.objectives_size() > 1 || sweep.constraints_size() > 0;
}

std::string ObjectivesText(const v1::Sweep& sweep) {
  std::vector<std::string> parts;
  for (const v1::ObjectiveInfo& o : sweep.objectives()) {
    parts.push_back(o.metric() + (o.direction() == v1::DIRECTION_MAXIMIZE ? " ↑" : " ↓"));
  }
  std::string out = absl::StrJoin(parts, ", ");
  if (sweep.constraints_size() > 0) {
    absl::StrAppend(&out, " subject to ", absl::StrJoin(sweep.constraints(), ", "));
  }
  return out;
}

std::string ParetoText(const v1::Trial& t) {
  std::string out = t.pareto_rank() == 0  ? "front"
                    : t.pareto_rank() > 0 ? absl::StrCat(t.pareto_rank() + 1)
                                          : "-";
  if (t.state() == v1::TRIAL_STATE_COMPLETED && !t.feasible()) out += " infeasible";
  return out;
}

std::string TrialTable(const v1::Sweep& sweep, const std::vector<v1::Trial>& trials,
                       const TableOptions& options) {
  std::vector<std::string> params = ParamNames(trials);
  std::vector<std::string> metrics = MetricNames(trials);
  const std::string& objective = sweep.objective_metric();
  metrics.erase(std::remove(metrics.begin(), metrics.end(), objective), metrics.end());
  // Ranked by Pareto: every objective is a column (its arrow says its direction), and the rank.
  const bool pareto = IsPareto(sweep);
  std::vector<std::pair<std::string, bool>> objectives;  // (metric, maximized)
  if (pareto) {
    for (const v1::ObjectiveInfo& o : sweep.objectives()) {
      objectives.emplace_back(o.metric(), o.direction() == v1::DIRECTION_MAXIMIZE);
      metrics.erase(std::remove(metrics.begin(), metrics.end(), o.metric()), metrics.end());
    }
  } else {
    objectives.emplace_back(objective, sweep.direction() == v1::DIRECTION_MAXIMIZE);
  }
  // Trials that interruptions took and that went on from their checkpoints: which segment runs.
  bool segmented =
      std::any_of(trials.begin(), trials.end(), [](const v1::Trial& t) { return t.segment() > 1; });
  // Trials the infrastructure (or the hang watchdog) interrupted: what did, segment by segment.
  bool interrupted = std::any_of(trials.begin(), trials.end(), [](const v1::Trial& t) {
    return t.interruption() != v1::INTERRUPTION_UNSPECIFIED || t.segments_size() > 0;
  });
  // Trials whose parameters the user gave (enqueued): where each one's came from.
  bool origins = std::any_of(trials.begin(), trials.end(),
                             [](const v1::Trial& t) { return !t.origin().empty(); });

  // Columns: fixed left, params, objective + metrics, fixed right. Drop params/metrics from the
  // right until the table fits.
  auto build = [&](size_t n_params, size_t n_metrics) {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> header = {"trial", "#", "state"};
    for (size_t i = 0; i < n_params; ++i) header.push_back(params[i]);
    header.push_back("step");
    for (const auto& [name, max] : objectives) header.push_back(name + (max ? " ↑" : " ↓"));
    if (pareto) header.push_back("pareto");
    for (size_t i = 0; i < n_metrics; ++i) header.push_back(metrics[i]);
    header.push_back("runtime");
    if (segmented) header.push_back("seg");
    if (interrupted) header.push_back("interrupted");
    if (origins) header.push_back("origin");
    if (options.where) {
      header.push_back("gpus");
      header.push_back("where");
    }
    rows.push_back(header);
    for (const auto& t : trials) {
      std::vector<std::string> row = {std::to_string(t.id()), std::to_string(t.number()),
                                      v1::StateName(t.state())};
      for (size_t i = 0; i < n_params; ++i) {
        auto it = t.params().find(params[i]);
        row.push_back(it == t.params().end() ? "" : ValueText(it->second));
      }
      row.push_back(t.step() >= 0 ? std::to_string(t.step()) : "-");
      if (pareto) {
        for (const auto& [name, max] : objectives) {
          auto it = t.last_metrics().find(name);
          row.push_back(it == t.last_metrics().end() ? "-" : NumberText(it->second));
        }
        row.push_back(ParetoText(t));
      } else {
        row.push_back(t.has_objective() ? NumberText(t.objective()) : "-");
      }
      for (size_t i = 0; i < n_metrics; ++i) {
        auto it = t.last_metrics().find(metrics[i]);
        row.push_back(it == t.last_metrics().end() ? "-" : NumberText(it->second));
      }
      row.push_back(t.has_started_at() ? hpo::HumanDuration(absl::Seconds(RuntimeSeconds(t)))
                                       : "-");
      if (segmented) row.push_back(std::to_string(t.segment()));
      if (interrupted) {
        std::string why = InterruptionsText(t);
        if (t.interruption() != v1::INTERRUPTION_UNSPECIFIED) {
          absl::StrAppend(&why, why.empty() ? "" : ";", v1::InterruptionName(t.interruption()));
        }
        row.push_back(why.empty() ? "-" : why);
      }
      if (origins) row.push_back(t.origin().empty() ? "sampled" : t.origin());
      if (options.where) {
        row.push_back(t.gpus().empty() ? "-" : t.gpus());
        row.push_back(t.backend_id().empty() ? "-" : t.backend_id());
      }
      rows.push_back(std::move(row));
    }
    std::vector<size_t> widths(header.size(), 0);
    for (const auto& r : rows) {
      for (size_t i = 0; i < r.size(); ++i) {
        // "↑" is 3 bytes, 1 column.
        size_t w =
            r[i].size() -
            (r[i].find("↑") != std::string::npos || r[i].find("↓") != std::string::npos ? 2 : 0);
        widths[i] = std::max(widths[i], w);
      }
    }
    size_t total = 0;
    for (size_t w : widths) total += w + 2;
    return std::make_tuple(rows, widths, total);
  };
  size_t n_params = params.size(), n_metrics = metrics.size();
  auto [rows, widths, total] = build(n_params, n_metrics);
  while (options.max_width > 0 && total > static_cast<size_t>(options.max_width) &&
         (n_metrics > 0 || n_params > 0)) {
    if (n_metrics > 0)
      --n_metrics;
    else
      --n_params;
    std::tie(rows, widths, total) = build(n_params, n_metrics);
  }
  std::string out;
  size_t shown = rows.size();
  size_t hidden = 0;
  if (options.max_rows > 0 && rows.size() > static_cast<size_t>(options.max_rows)) {
    shown = static_cast<size_t>(std::max(options.max_rows, 1));  // header + (max_rows - 1) rows
    hidden = rows.size() - shown;
  }
  for (size_t r = 0; r < shown; ++r) {
    std::string line;
    for (size_t i = 0; i < rows[r].size(); ++i) {
      const std::string& cell = rows[r][i];
      size_t w =
          cell.size() -
          (cell.find("↑") != std::string::npos || cell.find("↓") != std::string::npos ? 2 : 0);
      bool right = r > 0 && i != 2;  // numbers right-aligned, state left
      std::string pad(widths[i] - w, ' ');
      line += right ? pad + cell : cell + pad;
      if (i + 1 < rows[r].size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  if (hidden > 0) absl::StrAppend(&out, "... ", hidden, " more trial(s) not shown\n");
  if (n_params < params.size() || n_metrics < metrics.size()) {
    absl::StrAppend(&out, "(", params.size() - n_params + metrics.size() - n_metrics,
                    " column(s) hidden to fit the terminal)\n");
  }
  return out;
}

std::string SweepHeader(const v1::Sweep& sweep, const std::vector<v1::Trial>& trials) {
  absl::Time created = FromProto(sweep.created_at());
  absl::Time end = sweep.has_ended_at() ? FromProto(sweep.ended_at()) : absl::Now();
  std::string out =
      absl::StrCat("sweep ", sweep.id(), " '", sweep.name(), "'  ", v1::StateName(sweep.state()),
                   "  elapsed ", hpo::HumanDuration(end - created), "\n");
  std::map<std::string, int> counts;
  for (const auto& t : trials) counts[v1::StateName(t.state())]++;
  std::vector<std::string> parts;
  for (const char* s :
       {"PENDING", "LAUNCHING", "RUNNING", "COMPLETED", "STOPPED", "FAILED", "CANCELED", "LOST"}) {
    if (counts[s] > 0) parts.push_back(absl::StrCat(s, " ", counts[s]));
  }
  int64_t limit = sweep.max_trials();
  absl::StrAppend(&out, "trials ", trials.size(), limit > 0 ? absl::StrCat("/", limit) : "", ": ",
                  parts.empty() ? "none yet" : absl::StrJoin(parts, "  "), "\n");
  if (IsPareto(sweep) && sweep.objectives_size() > 1) {
    absl::StrAppend(&out, "Pareto front ", sweep.pareto_front_size(), " trial(s) of ",
                    ObjectivesText(sweep), "\n");
    if (!sweep.message().empty() && sweep.state() != v1::SWEEP_STATE_RUNNING) {
      absl::StrAppend(&out, sweep.message(), "\n");
    }
    return out;
  }
  // Best so far among finished trials, as the daemon defines it.
  const v1::Trial* best = nullptr;
  for (const auto& t : trials) {
    if (!t.has_objective()) continue;
    if (t.state() != v1::TRIAL_STATE_COMPLETED && t.state() != v1::TRIAL_STATE_STOPPED) continue;
    if (IsPareto(sweep) && (!t.feasible() || t.state() != v1::TRIAL_STATE_COMPLETED)) continue;
    bool better = best == nullptr ||
                  (sweep.direction() == v1::DIRECTION_MAXIMIZE ? t.objective() > best->objective()
                                                               : t.objective() < best->objective());
    if (better) best = &t;
  }
  if (best != nullptr) {
    std::vector<std::string> ps;
    std::map<std::string, v1::ParamValue> sorted(best->params().begin(), best->params().end());
    for (const auto& [k, v] : sorted) ps.push_back(absl::StrCat(k, "=", ValueText(v)));
    absl::StrAppend(&out, "best ", sweep.objective_metric(), " ", NumberText(best->objective()),
                    " (trial ", best->id(), ": ", absl::StrJoin(ps, " "), ")\n");
  } else {
    absl::StrAppend(&out, "best ", sweep.objective_metric(), " -\n");
  }
  if (!sweep.message().empty() && sweep.state() != v1::SWEEP_STATE_RUNNING) {
    absl::StrAppend(&out, sweep.message(), "\n");
  }
  return out;
}

namespace {

// " of 10 (12.5%)" for a budget of 10 of which `used` is used; "" without a budget.
std::string OfBudget(double used, double budget) {
  return budget > 0 ? absl::StrFormat(" of %.3g (%.1f%%)", budget, 100 * used / budget) : "";
}

}  // namespace

bool InAllocations(const v1::Sweep& sweep) {
  return sweep.allocation_gpu_seconds() > 0 || sweep.allocation_gpus_held() > 0;
}

std::string GpuHoursText(const v1::Sweep& sweep) {
  double used = sweep.charged_gpu_seconds() / 3600;
  std::string out = absl::StrFormat("GPU-hours %.3g", used);
  if (InAllocations(sweep)) {
    absl::StrAppend(&out, absl::StrFormat(" in allocations (%.3g in trials: utilization %.1f%%)",
                                          sweep.gpu_seconds() / 3600, 100 * sweep.utilization()));
  }
  absl::StrAppend(&out, OfBudget(used, sweep.gpu_hours_budget()));
  int held = InAllocations(sweep) ? sweep.allocation_gpus_held() : sweep.gpus_held();
  if (held > 0) absl::StrAppend(&out, ", ", held, " GPU(s) held");
  if (sweep.budget_seconds_left() > 0) {
    absl::StrAppend(&out, ": the budget lasts about ",
                    hpo::HumanDuration(absl::Seconds(sweep.budget_seconds_left())),
                    " at this rate");
  }
  double nodes = sweep.node_seconds() / 3600;
  absl::StrAppend(&out, absl::StrFormat("\nnode-hours %.3g", nodes),
                  OfBudget(nodes, sweep.node_hours_budget()));
  if (sweep.nodes_held() > 0) absl::StrAppend(&out, ", ", sweep.nodes_held(), " node(s) held");
  return out;
}

namespace {

// "12" or "1.42", and " (low – high)" unless the range is a point.
std::string Figure(const v1::EstimateRange& r, bool duration) {
  auto text = [duration](double v) {
    if (duration) return hpo::HumanDuration(absl::Seconds(v));
    return v >= 100 ? absl::StrFormat("%.0f", v) : absl::StrFormat("%.3g", v);
  };
  std::string out = text(r.expected());
  if (text(r.low()) != text(r.high())) {
    absl::StrAppend(&out, " (", text(r.low()), " - ", text(r.high()), ")");
  }
  return out;
}

}  // namespace

std::string PlanText(const v1::SweepEstimate& e) {
  std::string out;
  auto line = [&out](const char* what, const std::string& value) {
    absl::StrAppend(&out, absl::StrFormat("  %-11s %s\n", what, value));
  };
  line("trials", Figure(e.trials(), false));
  line("steps", Figure(e.steps(), false));
  if (e.has_cost()) {
    line("GPU-hours", Figure(e.gpu_hours(), false));
    line("node-hours", Figure(e.node_hours(), false));
    line("wall time", Figure(e.wall_seconds(), true));
  } else {
    line("cost", "unknown: no step time (plan.step_time, --step-time or --like SWEEP)");
  }
  if (e.has_queue_wait()) {
    line("queue wait", absl::StrCat(hpo::HumanDuration(absl::Seconds(e.queue_wait_seconds())), " (",
                                    e.queue_wait_basis(), ")"));
  } else if (!e.queue_wait_basis().empty()) {
    line("queue wait", e.queue_wait_basis());
  }
  line("from", e.basis());
  return out;
}

std::string PlanVsUsed(const v1::Sweep& sweep, size_t trials) {
  if (!sweep.has_plan()) return "";
  const v1::SweepEstimate& p = sweep.plan();
  absl::Time end = sweep.has_ended_at() ? FromProto(sweep.ended_at()) : absl::Now();
  double wall = absl::ToDoubleSeconds(end - FromProto(sweep.created_at()));
  std::string out = absl::StrCat("plan: trials ", Figure(p.trials(), false));
  std::string used = absl::StrCat("; used: trials ", trials);
  if (p.has_cost()) {
    absl::StrAppend(&out, ", GPU-hours ", Figure(p.gpu_hours(), false), ", wall time ",
                    Figure(p.wall_seconds(), true));
    absl::StrAppend(&used, absl::StrFormat(", GPU-hours %.3g", sweep.gpu_seconds() / 3600),
                    ", wall time ", hpo::HumanDuration(absl::Seconds(wall)));
  }
  return out + used + (sweep.has_ended_at() ? "" : " so far");
}

std::string QuarantineText(const v1::Sweep& sweep) {
  std::vector<std::string> parts;
  for (const v1::NodeHealth& n : sweep.nodes()) {
    if (n.quarantined()) {
      parts.push_back(absl::StrCat(n.node(), " (", n.failures(), " infrastructure failure(s))"));
    }
  }
  if (parts.empty()) return "";
  return absl::StrCat("quarantined nodes: ", absl::StrJoin(parts, ", "), "; hpo nodes ", sweep.id(),
                      " --allow NODE lets one back in");
}

std::string NodesTable(const v1::Sweep& sweep) {
  if (sweep.nodes().empty()) {
    return absl::StrCat("sweep ", sweep.id(), ": no infrastructure failure on any node\n");
  }
  std::string out =
      absl::StrFormat("%-20s %-12s %-8s %s\n", "node", "state", "failures", "last failure");
  for (const v1::NodeHealth& n : sweep.nodes()) {
    absl::StrAppend(&out, absl::StrFormat("%-20s %-12s %-8d %s\n", n.node(),
                                          n.quarantined() ? "quarantined" : "in use", n.failures(),
                                          n.last_failure()));
  }
  return out;
}

std::string SweepLine(const v1::Sweep& sweep) {
  std::vector<std::string> parts;
  for (const auto& [state, n] : sweep.trial_counts()) parts.push_back(absl::StrCat(state, " ", n));
  std::sort(parts.begin(), parts.end());
  std::string best =
      sweep.objectives_size() > 1 ? absl::StrCat("front of ", sweep.pareto_front_size())
      : sweep.best_trial_id() != 0
          ? absl::StrCat(NumberText(sweep.best_objective()), " (trial ", sweep.best_trial_id(), ")")
          : "-";
  std::string gpu_hours = absl::StrFormat("%.3g", sweep.charged_gpu_seconds() / 3600);
  if (sweep.gpu_hours_budget() > 0) {
    absl::StrAppend(&gpu_hours, absl::StrFormat("/%.3g", sweep.gpu_hours_budget()));
  }
  return absl::StrFormat("%-5d %-24s %-12s %-8s %-40s %-12s %s", sweep.id(),
                         sweep.name().substr(0, 24), v1::StateName(sweep.state()), sweep.backend(),
                         absl::StrJoin(parts, ", "), gpu_hours, best);
}

namespace {

// A positive number, or null for 0 (none).
nlohmann::json OrNull(double x) { return x > 0 ? nlohmann::json(x) : nlohmann::json(nullptr); }

}  // namespace

nlohmann::json ParamsJson(const v1::Trial& t) {
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [k, v] : t.params()) {
    switch (v.kind_case()) {
      case v1::ParamValue::kFloatValue:
        params[k] = v.float_value();
        break;
      case v1::ParamValue::kIntValue:
        params[k] = v.int_value();
        break;
      case v1::ParamValue::kStringValue:
        params[k] = v.string_value();
        break;
      case v1::ParamValue::kBoolValue:
        params[k] = v.bool_value();
        break;
      default:
        break;
    }
  }
  return params;
}

std::string TrialsCsv(const std::vector<v1::Trial>& trials) {
  std::vector<std::string> params = ParamNames(trials);
  std::vector<std::string> metrics = MetricNames(trials);
  std::vector<std::string> header = {"trial_id", "sweep_id", "number", "state"};
  for (const auto& p : params) header.push_back("param." + p);
  for (const auto& m : metrics) header.push_back("metric." + m);
  for (const char* c :
       {"objective", "step", "report_count", "exit_code", "attempt", "backend_id", "gpus", "parent",
        "lineage", "started_at", "ended_at", "runtime_s", "segment", "gpu_seconds", "interruptions",
        "interruption", "origin", "message"}) {
    header.push_back(c);
  }
  // Ranked by Pareto: the rank (empty: not ranked), front membership, and the constraints.
  const bool pareto = std::any_of(trials.begin(), trials.end(),
                                  [](const v1::Trial& t) { return t.objective_values_size() > 0; });
  if (pareto) {
    for (const char* c : {"pareto_rank", "on_front", "feasible"}) header.push_back(c);
  }
  std::string out = absl::StrJoin(header, ",") + "\n";
  for (const auto& t : trials) {
    std::vector<std::string> row = {std::to_string(t.id()), std::to_string(t.sweep_id()),
                                    std::to_string(t.number()), v1::StateName(t.state())};
    for (const auto& p : params) {
      auto it = t.params().find(p);
      row.push_back(it == t.params().end() ? "" : CsvField(ValueText(it->second)));
    }
    for (const auto& m : metrics) {
      auto it = t.last_metrics().find(m);
      row.push_back(it == t.last_metrics().end() ? "" : absl::StrFormat("%.17g", it->second));
    }
    row.push_back(t.has_objective() ? absl::StrFormat("%.17g", t.objective()) : "");
    row.push_back(std::to_string(t.step()));
    row.push_back(std::to_string(t.report_count()));
    row.push_back(t.has_ended_at() ? std::to_string(t.exit_code()) : "");
    row.push_back(std::to_string(t.attempt()));
    row.push_back(CsvField(t.backend_id()));
    row.push_back(CsvField(t.gpus()));
    row.push_back(std::to_string(t.parent()));
    row.push_back(std::to_string(t.lineage()));
    row.push_back(TimeText(t.started_at()));
    row.push_back(TimeText(t.ended_at()));
    row.push_back(absl::StrFormat("%.3f", RuntimeSeconds(t)));
    row.push_back(std::to_string(t.segment()));
    row.push_back(absl::StrFormat("%.3f", t.gpu_seconds()));
    row.push_back(InterruptionsText(t));
    row.push_back(v1::InterruptionName(t.interruption()));
    row.push_back(t.origin());
    row.push_back(CsvField(t.message()));
    if (pareto) {
      row.push_back(t.pareto_rank() >= 0 ? std::to_string(t.pareto_rank()) : "");
      row.push_back(t.pareto_rank() == 0 ? "true" : "false");
      row.push_back(t.feasible() ? "true" : "false");
    }
    out += absl::StrJoin(row, ",") + "\n";
  }
  return out;
}

std::string TrialsJson(const v1::Sweep& sweep, const std::vector<v1::Trial>& trials) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& t : trials) {
    nlohmann::json j;
    j["trial_id"] = t.id();
    j["sweep_id"] = t.sweep_id();
    j["number"] = t.number();
    j["state"] = v1::StateName(t.state());
    j["params"] = ParamsJson(t);
    j["metrics"] = std::map<std::string, double>(t.last_metrics().begin(), t.last_metrics().end());
    j["objective"] = t.has_objective() ? nlohmann::json(t.objective()) : nlohmann::json(nullptr);
    j["step"] = t.step();
    j["report_count"] = t.report_count();
    j["exit_code"] = t.has_ended_at() ? nlohmann::json(t.exit_code()) : nlohmann::json(nullptr);
    j["attempt"] = t.attempt();
    j["retry_of"] = t.retry_of();
    j["backend_id"] = t.backend_id();
    j["gpus"] = t.gpus();
    j["parent"] = t.parent();    // PBT: the trial number whose checkpoint it continued; -1 none
    j["lineage"] = t.lineage();  // PBT: the population member; -1 none
    j["trial_dir"] = t.trial_dir();
    j["started_at"] = TimeText(t.started_at());
    j["ended_at"] = TimeText(t.ended_at());
    j["runtime_s"] = RuntimeSeconds(t);
    j["segment"] = t.segment();
    j["segment_started_at"] = TimeText(t.segment_started_at());
    j["gpu_seconds"] = t.gpu_seconds();
    nlohmann::json segments = nlohmann::json::array();
    for (const v1::Segment& seg : t.segments()) {
      segments.push_back({{"number", seg.number()},
                          {"started_at", TimeText(seg.started_at())},
                          {"ended_at", TimeText(seg.ended_at())},
                          {"backend_id", seg.backend_id()},
                          {"gpus", seg.gpus()},
                          {"gpu_seconds", seg.gpu_seconds()},
                          {"interruption", v1::InterruptionName(seg.interruption())},
                          {"message", seg.message()}});
    }
    j["segments"] = std::move(segments);  // the segments interruptions ended, oldest first
    j["interruption"] = v1::InterruptionName(t.interruption());  // "" when none
    j["origin"] = t.origin();                                    // "" sampled, "enqueued"
    j["message"] = t.message();
    if (t.objective_values_size() > 0) {  // ranked by Pareto
      j["objective_values"] =
          std::vector<double>(t.objective_values().begin(), t.objective_values().end());
      j["pareto_rank"] = t.pareto_rank() >= 0 ? nlohmann::json(t.pareto_rank()) : nullptr;
      j["on_front"] = t.pareto_rank() == 0;
      j["feasible"] = t.feasible();
    }
    arr.push_back(std::move(j));
  }
  nlohmann::json root;
  root["sweep"] = {
      {"id", sweep.id()},
      {"name", sweep.name()},
      {"state", v1::StateName(sweep.state())},
      {"objective_metric", sweep.objective_metric()},
      {"direction", sweep.direction() == v1::DIRECTION_MAXIMIZE ? "maximize" : "minimize"},
      {"best_trial_id", sweep.best_trial_id()},
      {"gpu_hours", sweep.charged_gpu_seconds() / 3600},
      {"trial_gpu_hours", sweep.gpu_seconds() / 3600},
      {"allocation_gpu_hours", sweep.allocation_gpu_seconds() / 3600},
      {"utilization", InAllocations(sweep) ? nlohmann::json(sweep.utilization()) : nullptr},
      {"gpu_hours_budget", OrNull(sweep.gpu_hours_budget())},
      {"node_hours", sweep.node_seconds() / 3600},
      {"node_hours_budget", OrNull(sweep.node_hours_budget())},
      {"budget_seconds_left", OrNull(sweep.budget_seconds_left())}};
  nlohmann::json objectives = nlohmann::json::array();
  for (const v1::ObjectiveInfo& o : sweep.objectives()) {
    objectives.push_back(
        {{"metric", o.metric()},
         {"direction", o.direction() == v1::DIRECTION_MAXIMIZE ? "maximize" : "minimize"}});
  }
  root["sweep"]["objectives"] = std::move(objectives);
  root["sweep"]["constraints"] =
      std::vector<std::string>(sweep.constraints().begin(), sweep.constraints().end());
  root["sweep"]["pareto_front_size"] = sweep.pareto_front_size();
  root["trials"] = std::move(arr);
  return root.dump(2) + "\n";
}

}  // namespace hpo::client
