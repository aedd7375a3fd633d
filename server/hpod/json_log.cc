#include "server/hpod/json_log.h"

#include <regex>
#include <string>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace hpo::server {

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  std::string text(msg.payload.data(), msg.payload.size());
  nlohmann::json line;
  line["time"] =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromChrono(msg.time), absl::UTCTimeZone());
  line["level"] = std::string(spdlog::level::to_string_view(msg.level).data(),
                              spdlog::level::to_string_view(msg.level).size());
  line["message"] = text;
  // The ids hpod's messages carry, as fields.
  static const std::regex kSweep(R"(\bsweep (\d+))"), kTrial(R"(\btrial (\d+))"),
      kJob(R"(\b(?:Slurm job|allocation|job=?) ?(\d+))"), kStep(R"(\bstep(?: |=)(\d+))");
  for (const auto& [field, re] : {std::pair{"sweep", &kSweep}, std::pair{"trial", &kTrial},
                                  std::pair{"job", &kJob}, std::pair{"step", &kStep}}) {
    std::smatch m;
    if (std::regex_search(text, m, *re)) line[field] = std::stoll(m[1].str());
  }
  std::string out = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  dest.append(out.data(), out.data() + out.size());
}

}  // namespace hpo::server
