// SweepSpec, failures: which ends of a trial are the infrastructure's (FailureRules).
#include <signal.h>
#include <string.h>

#include <regex>

#include "absl/strings/str_cat.h"
#include "server/spec/sweep_spec.h"

namespace hpo::server {

std::string FailureRule::Describe() const {
  std::string out;
  auto add = [&out](const std::string& part) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", part);
  };
  if (exit_code) add(absl::StrCat("exit code ", *exit_code));
  if (signal) {
    const char* abbrev = sigabbrev_np(*signal);
    add(absl::StrCat("signal SIG", abbrev != nullptr ? abbrev : "?"));
  }
  if (!stderr_pattern.empty()) add(absl::StrCat("stderr /", stderr_pattern, "/"));
  return out;
}

const std::vector<FailureRule>& DefaultInfrastructureRules() {
  static const std::vector<FailureRule>* rules = [] {
    auto* r = new std::vector<FailureRule>;
    for (const char* pattern :
         {"uncorrectable ECC error", "GPU has fallen off the bus", "GPU is lost",
          "NCCL error.*(unhandled system error|remote process exited|Net/IB)",
          "CUDA-capable device\\(s\\) is/are busy or unavailable", "CUDA error: unknown error",
          "no CUDA-capable device is detected"}) {
      FailureRule rule;
      rule.stderr_pattern = pattern;
      r->push_back(std::move(rule));
    }
    return r;
  }();
  return *rules;
}

std::optional<std::string> SweepSpec::InfrastructureFailure(int exit_code, int term_signal,
                                                            const std::string& stderr_tail) const {
  auto matches = [&](const FailureRule& rule) {
    if (rule.exit_code && *rule.exit_code != exit_code) return false;
    if (rule.signal && *rule.signal != term_signal) return false;
    if (!rule.stderr_pattern.empty()) {
      try {
        if (!std::regex_search(stderr_tail, std::regex(rule.stderr_pattern))) return false;
      } catch (const std::regex_error&) {  // checked when parsed
        return false;
      }
    }
    return true;
  };
  if (failures.defaults) {
    for (const FailureRule& rule : DefaultInfrastructureRules()) {
      if (matches(rule)) return rule.Describe();
    }
  }
  for (const FailureRule& rule : failures.rules) {
    if (matches(rule)) return rule.Describe();
  }
  return std::nullopt;
}

}  // namespace hpo::server
