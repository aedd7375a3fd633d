#include "client/cli/trial_side_commands.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/cli/cli.h"
#include "client/client.h"
#include "common/fom_regex.h"

namespace hpo::client::cli {

TrialSideCommands::TrialSideCommands(CLI::App& app, int& rc) : rc_(rc) {
  CLI::App* report =
      app.add_subcommand("report", "inside a trial: push metrics (exit 10 when hpod says stop)");
  report->add_option("--step", report_.step,
                     "step (epoch) of the report; default: the trial's last step + 1");
  report->add_option("metrics", report_.metrics, "name=value pairs")->required();
  report->callback([this] { rc_ = Report(report_.step, report_.metrics); });
  CLI::App* exec = app.add_subcommand(
      "exec", "inside a trial: run CMD, report every figure-of-merit line of its stdout");
  exec->add_option("--metric", exec_.metric,
                   "metric name for the values (default: the sweep's objective metric)");
  exec->add_option("--regex", exec_.regex,
                   "regex whose group 1 is the value (default: the sweep's fom_regex, 'FoM: "
                   "<number>')");
  exec->add_option("command", exec_.command, "the command and its arguments, after --")->required();
  exec->callback([this] { rc_ = Exec(exec_.command, exec_.metric, exec_.regex); });
}

// --- exec --------------------------------------------------------------------------------------

namespace {

pid_t g_child = 0;
void Forward(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}

}  // namespace

int Exec(std::vector<std::string> cmd, std::string metric, std::string regex_text) {
  if (cmd.empty()) {
    std::fprintf(stderr, "hpo exec: give the command after --\n");
    return kExitUsage;
  }
  if (metric.empty())
    metric = std::getenv("HPO_OBJECTIVE_METRIC") ? std::getenv("HPO_OBJECTIVE_METRIC") : "fom";
  if (regex_text.empty()) {
    regex_text = std::getenv("HPO_FOM_REGEX") ? std::getenv("HPO_FOM_REGEX") : kDefaultFomRegex;
  }
  std::regex re;
  try {
    re = std::regex(regex_text, std::regex::ECMAScript | std::regex::icase);
  } catch (const std::regex_error& e) {
    std::fprintf(stderr, "hpo exec: bad regex '%s': %s\n", regex_text.c_str(), e.what());
    return kExitUsage;
  }
  auto reporter = client::TrialReporter::FromEnvironment(/*stream=*/true);
  if (!reporter.ok()) {
    std::fprintf(stderr, "hpo exec: %s; running without reporting\n",
                 std::string(reporter.status().message()).c_str());
  }
  int fds[2];
  if (::pipe(fds) != 0) return kExitError;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> argv;
    for (auto& a : cmd) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "hpo exec: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(fds[1]);
  g_child = pid;
  struct sigaction sa {};
  sa.sa_handler = Forward;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGUSR1, &sa, nullptr);
  FILE* in = ::fdopen(fds[0], "r");
  char* line = nullptr;
  size_t cap = 0;
  ssize_t n;
  int64_t step = 0;
  bool stop_sent = false;
  while ((n = ::getline(&line, &cap, in)) > 0) {
    std::fwrite(line, 1, static_cast<size_t>(n), stdout);
    std::fflush(stdout);
    std::cmatch m;
    if (!reporter.ok() || !std::regex_search(line, m, re) || m.size() < 2) continue;
    double value = 0;
    if (!absl::SimpleAtod(m[1].str(), &value)) continue;
    auto reply = (*reporter)->Report(++step, {{metric, value}});
    if (!reply.ok()) {
      std::fprintf(stderr, "hpo exec: report refused: %s\n",
                   std::string(reply.status().message()).c_str());
      continue;
    }
    if (reply->action() == v1::ReportResponse::ACTION_STOP && !stop_sent) {
      std::fprintf(stderr, "hpo exec: hpod stops the trial (%s)\n", reply->reason().c_str());
      ::kill(pid, SIGTERM);
      stop_sent = true;
    }
  }
  std::free(line);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitError;
}

int Report(int64_t step, const std::vector<std::string>& pairs) {
  std::map<std::string, double> metrics;
  for (const std::string& p : pairs) {
    std::vector<std::string> kv = absl::StrSplit(p, absl::MaxSplits('=', 1));
    double v = 0;
    if (kv.size() != 2 || kv[0].empty() || !absl::SimpleAtod(kv[1], &v)) {
      std::fprintf(stderr, "hpo report: '%s' is not name=number\n", p.c_str());
      return kExitUsage;
    }
    metrics[kv[0]] = v;
  }
  auto reporter = client::TrialReporter::FromEnvironment();
  if (!reporter.ok()) return Fail(reporter.status());
  auto reply = (*reporter)->Report(step, metrics);
  if (!reply.ok()) return Fail(reply.status());
  if (reply->action() == v1::ReportResponse::ACTION_STOP) {
    std::printf("stop: %s\n", reply->reason().c_str());
    return kExitStop;
  }
  return 0;
}

}  // namespace hpo::client::cli
