#include "server/store/codec.h"

#include "common/clock.h"

namespace hpo::server {
namespace {

using nlohmann::json;

absl::Time FromUnix(double s) { return absl::UnixEpoch() + absl::Seconds(s); }

}  // namespace

std::string ParamsToJsonText(const algorithms::Params& params) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& kv : params) {
    const std::string& key = kv.first;  // (clang 14 cannot capture a structured binding)
    std::visit([&](const auto& x) { j[key] = x; }, kv.second);
  }
  return j.dump();
}

algorithms::Params ParamsFromJson(const json& j) {
  algorithms::Params out;
  for (const auto& [k, v] : j.items()) {
    if (v.is_boolean())
      out[k] = v.get<bool>();
    else if (v.is_number_integer())
      out[k] = v.get<int64_t>();
    else if (v.is_number())
      out[k] = v.get<double>();
    else if (v.is_string())
      out[k] = v.get<std::string>();
  }
  return out;
}

std::string InterruptionText(v1::Interruption i) {
  return i == v1::INTERRUPTION_UNSPECIFIED ? "" : v1::Interruption_Name(i);
}

v1::Interruption InterruptionFromText(const std::string& text) {
  v1::Interruption i = v1::INTERRUPTION_UNSPECIFIED;
  if (!text.empty()) v1::Interruption_Parse(text, &i);
  return i;
}

std::string SegmentsToJson(const std::vector<SegmentRecord>& segments) {
  if (segments.empty()) return "[]";
  json out = json::array();
  for (const SegmentRecord& s : segments) {
    out.push_back({{"number", s.number},
                   {"started_at", UnixSeconds(s.started_at)},
                   {"ended_at", UnixSeconds(s.ended_at)},
                   {"backend_id", s.backend_id},
                   {"gpus", s.gpus},
                   {"gpu_seconds", s.gpu_seconds},
                   {"interruption", InterruptionText(s.interruption)},
                   {"message", s.message}});
  }
  return out.dump();
}

std::vector<SegmentRecord> SegmentsFromJson(const json& j) {
  std::vector<SegmentRecord> out;
  for (const json& e : j) {
    SegmentRecord s;
    s.number = e.value("number", 1);
    s.started_at = FromUnix(e.value("started_at", 0.0));
    s.ended_at = FromUnix(e.value("ended_at", 0.0));
    s.backend_id = e.value("backend_id", "");
    s.gpus = e.value("gpus", "");
    s.gpu_seconds = e.value("gpu_seconds", 0.0);
    s.interruption = InterruptionFromText(e.value("interruption", ""));
    s.message = e.value("message", "");
    out.push_back(std::move(s));
  }
  return out;
}

std::string BudgetChangeJson(const BudgetChange& c) {
  json j = json::object();
  if (c.max_trials) j["max_trials"] = *c.max_trials;
  if (c.max_concurrent) j["max_concurrent"] = *c.max_concurrent;
  if (c.wall_time) j["wall_time_s"] = absl::ToDoubleSeconds(*c.wall_time);
  if (c.gpu_hours) j["gpu_hours"] = *c.gpu_hours;
  if (c.node_hours) j["node_hours"] = *c.node_hours;
  if (!c.gpu_hours_added_by.empty()) j["gpu_hours_added_by"] = c.gpu_hours_added_by;
  return j.dump();
}

BudgetChange BudgetChangeFromJson(const std::string& text) {
  BudgetChange c;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return c;
  if (j.contains("max_trials")) c.max_trials = j["max_trials"].get<int64_t>();
  if (j.contains("max_concurrent")) c.max_concurrent = j["max_concurrent"].get<int64_t>();
  if (j.contains("wall_time_s")) c.wall_time = absl::Seconds(j["wall_time_s"].get<double>());
  if (j.contains("gpu_hours")) c.gpu_hours = j["gpu_hours"].get<double>();
  if (j.contains("node_hours")) c.node_hours = j["node_hours"].get<double>();
  if (j.contains("gpu_hours_added_by") && j["gpu_hours_added_by"].is_object()) {
    for (const auto& [user, hours] : j["gpu_hours_added_by"].items()) {
      if (hours.is_number()) c.gpu_hours_added_by[user] = hours.get<double>();
    }
  }
  return c;
}

std::string QueueJson(const std::vector<algorithms::Params>& queue) {
  json j = json::array();
  for (const auto& p : queue) j.push_back(json::parse(ParamsToJsonText(p)));
  return j.dump();
}

std::vector<algorithms::Params> QueueFromJson(const std::string& text) {
  std::vector<algorithms::Params> out;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return out;
  for (const json& p : j) out.push_back(ParamsFromJson(p));
  return out;
}

std::string AppliedJson(const std::vector<std::pair<std::string, std::string>>& applied) {
  return json(applied).dump();
}

std::vector<std::pair<std::string, std::string>> AppliedFromJson(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return out;
  for (const json& e : j) {
    if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      out.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    }
  }
  return out;
}

std::string NodesJson(const std::map<std::string, NodeHealth>& nodes) {
  json j = json::object();
  for (const auto& [name, n] : nodes) {
    j[name] = {
        {"failures", n.failures}, {"quarantined", n.quarantined}, {"last_failure", n.last_failure}};
    if (n.quarantined && n.quarantined_at != absl::InfinitePast()) {
      j[name]["quarantined_at"] = absl::ToUnixMillis(n.quarantined_at);
    }
  }
  return j.dump();
}

std::map<std::string, NodeHealth> NodesFromJson(const std::string& text) {
  std::map<std::string, NodeHealth> out;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return out;
  for (const auto& [name, e] : j.items()) {
    if (!e.is_object()) continue;
    NodeHealth& n = out[name];
    n.failures = e.value("failures", 0);
    n.quarantined = e.value("quarantined", false);
    n.last_failure = e.value("last_failure", std::string());
    if (n.quarantined && e.contains("quarantined_at") && e["quarantined_at"].is_number_integer()) {
      n.quarantined_at = absl::FromUnixMillis(e["quarantined_at"].get<int64_t>());
    }
  }
  return out;
}

}  // namespace hpo::server
