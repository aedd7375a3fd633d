#pragma once
// The record codecs: how the store writes the parts of a record that are not plain columns
// (parameters, segments, a budget change, the enqueued configurations, applied change keys, an
// interruption, node health) as text, and reads them back. Reading is lenient where a column may
// predate its content (an empty or malformed budget or queue reads as none); a trial's parameters
// are not.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/search_space.h"
#include "hpo/v1/hpo.pb.h"
#include "nlohmann/json.hpp"
#include "server/store/store.h"

namespace hpo::server {

// {"name": value, ...}: also what a trial finds in HPO_PARAMS_JSON.
std::string ParamsToJsonText(const algorithms::Params& params);
algorithms::Params ParamsFromJson(const nlohmann::json& j);

std::string InterruptionText(v1::Interruption i);  // "" for none
v1::Interruption InterruptionFromText(const std::string& text);

std::string SegmentsToJson(const std::vector<SegmentRecord>& segments);
std::vector<SegmentRecord> SegmentsFromJson(const nlohmann::json& j);  // throws on a bad shape

std::string BudgetChangeJson(const BudgetChange& c);
BudgetChange BudgetChangeFromJson(const std::string& text);

std::string QueueJson(const std::vector<algorithms::Params>& queue);
std::vector<algorithms::Params> QueueFromJson(const std::string& text);

std::string AppliedJson(const std::vector<std::pair<std::string, std::string>>& applied);
std::vector<std::pair<std::string, std::string>> AppliedFromJson(const std::string& text);

std::string NodesJson(const std::map<std::string, NodeHealth>& nodes);
std::map<std::string, NodeHealth> NodesFromJson(const std::string& text);

}  // namespace hpo::server
