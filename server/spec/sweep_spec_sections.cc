// SweepSpec's smaller sections, parsed: `failures:` (which ends of a trial are the
// infrastructure's, FailureRules, and after how many of them a node is quarantined) and `plan:`
// (what the sweep's plan needs to know). The rest of the parser is in sweep_spec.cc.
#include <signal.h>
#include <string.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/pattern.h"
#include "common/task_output.h"
#include "server/spec/sweep_spec.h"
#include "server/spec/sweep_spec_parser.h"

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

bool SweepSpec::MultiTask() const { return resources.nodes * resources.tasks_per_node > 1; }

std::optional<std::string> SweepSpec::InfrastructureFailure(int exit_code, int term_signal,
                                                            const std::string& stderr_tail) const {
  // A trial of several tasks: a pattern speaks for the task that failed first (the others'
  // words are often about it), or, when srun did not say which that was, only when every task
  // with output says it.
  const TaskOutput by_task = MultiTask() ? SplitTaskOutput(stderr_tail) : TaskOutput{};
  auto says = [&](const re2::RE2& re) {
    if (by_task.tasks.empty()) return Found(re, stderr_tail);
    if (!by_task.culprit.empty()) {
      for (int t : by_task.culprit) {
        auto it = by_task.tasks.find(t);
        if (it != by_task.tasks.end() && Found(re, it->second)) return true;
      }
      return false;
    }
    for (const auto& [task, text] : by_task.tasks) {
      if (!Found(re, text)) return false;
    }
    return true;
  };
  auto matches = [&](const FailureRule& rule) {
    if (rule.exit_code && *rule.exit_code != exit_code) return false;
    if (rule.signal && *rule.signal != term_signal) return false;
    if (!rule.stderr_pattern.empty()) {
      // Checked when parsed; a stored sweep's pattern this release refuses matches nothing.
      auto re = CompilePattern(rule.stderr_pattern);
      if (!re.ok() || !says(**re)) return false;
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

namespace spec_parse {

void Parser::Failures(const YAML::Node& node, SweepSpec& spec) {
  if (!ExpectMap(node, "failures")) return;
  CheckKeys(node, "failures",
            {"defaults", "infrastructure", "quarantine_after", "quarantine_max_share",
             "quarantine_for", "max_infrastructure"});
  if (const YAML::Node d = node["defaults"]) {
    if (std::optional<bool> b = Bool(d, "failures defaults")) spec.failures.defaults = *b;
  }
  if (const YAML::Node q = node["quarantine_after"]) {
    if (std::optional<int64_t> v = Integer(q, "failures quarantine_after", 0, 1000)) {
      spec.failures.quarantine_after = static_cast<int>(*v);
    }
  }
  if (const YAML::Node q = node["quarantine_max_share"]) {
    std::optional<double> v = Number(q, "failures quarantine_max_share");
    if (v && (*v <= 0 || *v > 1)) {
      Error(q, absl::StrCat("failures quarantine_max_share must be above 0 and at most 1 (a share "
                            "of the sweep's nodes), not ",
                            *v));
    } else if (v) {
      spec.failures.quarantine_max_share = *v;
    }
  }
  if (const YAML::Node q = node["quarantine_for"]) {
    if (std::optional<absl::Duration> d = Duration(q, "failures quarantine_for")) {
      spec.failures.quarantine_for = *d;
    }
  }
  if (const YAML::Node m = node["max_infrastructure"]) {
    if (std::optional<int64_t> v = Integer(m, "failures max_infrastructure", 0, 1'000'000)) {
      spec.failures.max_infrastructure = static_cast<int>(*v);
    }
  }
  const YAML::Node list = node["infrastructure"];
  if (!list) return;
  if (!list.IsSequence()) {
    Error(list, "failures infrastructure must be a list of rules, e.g. - {stderr: 'Xid 79'}");
    return;
  }
  for (const YAML::Node& r : list) {
    if (!ExpectMap(r, "a failures rule")) continue;
    CheckKeys(r, "a failures rule", {"exit_code", "signal", "stderr"});
    FailureRule rule;
    if (const YAML::Node e = r["exit_code"]) {
      if (std::optional<int64_t> v = Integer(e, "failures exit_code", 1, 255)) {
        rule.exit_code = static_cast<int>(*v);
      }
    }
    if (const YAML::Node s = r["signal"]) {
      std::string sig = String(s, "failures signal").value_or("");
      // Besides the signals a trial is sent, those a fault raises.
      static const std::map<std::string, int> kFaults = {
          {"SIGBUS", SIGBUS}, {"SIGSEGV", SIGSEGV}, {"SIGABRT", SIGABRT},
          {"SIGILL", SIGILL}, {"SIGFPE", SIGFPE},   {"SIGPIPE", SIGPIPE}};
      std::string name = absl::AsciiStrToUpper(sig);
      if (!absl::StartsWith(name, "SIG")) name = "SIG" + name;
      std::optional<int> n = SignalNumber(sig);
      if (auto fault = kFaults.find(name); !n && fault != kFaults.end()) n = fault->second;
      if (n) {
        rule.signal = *n;
      } else {
        Error(s,
              absl::StrCat("failures signal must be a signal name like SIGBUS, not '", sig, "'"));
      }
    }
    if (const YAML::Node p = r["stderr"]) {
      rule.stderr_pattern = String(p, "failures stderr").value_or("");
      if (auto compiled = CompilePattern(rule.stderr_pattern); !compiled.ok()) {
        Error(p, absl::StrCat("failures stderr is not a valid regular expression: ",
                              compiled.status().message()));
      }
    }
    if (!r["exit_code"] && !r["signal"] && !r["stderr"]) {
      Error(r, "a failures rule needs exit_code, signal or stderr");
      continue;
    }
    spec.failures.rules.push_back(std::move(rule));
  }
}

void Parser::PlanSection(const YAML::Node& node, SweepSpec& spec) {
  if (!ExpectMap(node, "plan")) return;
  CheckKeys(node, "plan", {"steps", "step_time", "like"});
  if (const YAML::Node n = node["steps"]) {
    spec.plan.steps = Integer(n, "plan steps", 1, int64_t{1} << 40).value_or(0);
  }
  if (const YAML::Node n = node["step_time"]) {
    std::optional<absl::Duration> d = Duration(n, "plan step_time");
    if (d && *d <= absl::ZeroDuration()) {
      Error(n, "plan step_time must be longer than 0");
    } else if (d) {
      spec.plan.step_time = *d;
    }
  }
  if (const YAML::Node n = node["like"]) {
    spec.plan.like = Integer(n, "plan like", 1, int64_t{1} << 53).value_or(0);
  }
}

void Parser::PilotSection(const YAML::Node& node, SweepSpec& spec) {
  if (!ExpectMap(node, "pilot")) return;
  CheckKeys(node, "pilot", {"steps", "full_trials"});
  if (const YAML::Node n = node["steps"]) {
    spec.pilot.steps = Integer(n, "pilot steps", 2, int64_t{1} << 40).value_or(0);
  } else {
    Error(node, "pilot needs steps: the step at which its short trials stop");
  }
  if (const YAML::Node n = node["full_trials"]) {
    spec.pilot.full_trials = Integer(n, "pilot full_trials", 0, 4).value_or(0);
  }
}

}  // namespace spec_parse

}  // namespace hpo::server
