#pragma once
// JsonLogFormatter: hpod's log as one JSON object per line (`hpod --log-format json`), for log
// collectors: {"time", "level", "message"} and, where the message names them, "sweep", "trial",
// "job" and "step" as fields ("sweep 3", "trial 17", "Slurm job 812" or "allocation 812",
// "step 4" in hpod's messages, which always name them so).

#include <memory>

#include "spdlog/formatter.h"

namespace hpo::server {

class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLogFormatter>();
  }
};

}  // namespace hpo::server
