// hpo: the command line of hpod. `hpo --help` lists the commands.
//
// Exit codes: 0 success; 1 error (message on stderr); 2 usage error.
// `hpo wait`: 0 COMPLETED or GOAL_REACHED, 3 FAILED, 4 CANCELED, 5 TIMED_OUT.
// `hpo report`: 0 continue, 10 hpod asks the trial to stop.

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <regex>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "client/table.h"
#include "common/data_dir.h"
#include "common/files.h"
#include "common/token.h"

namespace {

using hpo::client::Client;
namespace v1 = hpo::v1;

constexpr int kExitError = 1;
constexpr int kExitStop = 10;

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "hpo: %s\n", std::string(s.message()).c_str());
  return kExitError;
}

std::unique_ptr<Client> Connect() {
  auto c = Client::FromEnvironment(/*autostart=*/true);
  if (!c.ok()) {
    Fail(c.status());
    std::exit(kExitError);
  }
  return std::move(*c);
}

template <typename T>
T OrExit(absl::StatusOr<T> v) {
  if (!v.ok()) std::exit(Fail(v.status()));
  return std::move(*v);
}

bool IsFinal(v1::SweepState s) {
  return s != v1::SWEEP_STATE_RUNNING && s != v1::SWEEP_STATE_PAUSED;
}

int WaitExitCode(v1::SweepState s) {
  switch (s) {
    case v1::SWEEP_STATE_COMPLETED:
    case v1::SWEEP_STATE_GOAL_REACHED: return 0;
    case v1::SWEEP_STATE_FAILED: return 3;
    case v1::SWEEP_STATE_CANCELED: return 4;
    case v1::SWEEP_STATE_TIMED_OUT: return 5;
    default: return kExitError;
  }
}

std::pair<int, int> TerminalSize() {
  struct winsize ws {};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return {ws.ws_col, ws.ws_row};
  return {120, 40};
}

std::vector<v1::Trial> AllTrials(Client& c, int64_t sweep_id, v1::TrialOrder order = v1::TRIAL_ORDER_NUMBER) {
  v1::ListTrialsRequest req;
  req.set_sweep_id(sweep_id);
  req.set_order(order);
  return OrExit(c.ListTrials(req));
}

// --- watch -------------------------------------------------------------------------------------

// Follows the event stream (resuming after a daemon restart from the last seq seen) and keeps a
// table of trials; renders it in place on a terminal, or as periodic lines otherwise.
int Watch(int64_t sweep_id, double interval_s, const std::string& sort) {
  std::unique_ptr<Client> c = Connect();
  v1::Sweep sweep = OrExit(c->GetSweep(sweep_id));
  std::map<int64_t, v1::Trial> trials;
  int64_t seq = 0;
  bool tty = ::isatty(STDOUT_FILENO);
  absl::Time last_render = absl::InfinitePast();
  std::string last_line;
  auto snapshot = [&] {
    std::vector<v1::Trial> list;
    for (auto& [id, t] : trials) list.push_back(t);
    bool by_objective = sort == "objective";
    bool maximize = sweep.direction() == v1::DIRECTION_MAXIMIZE;
    std::stable_sort(list.begin(), list.end(), [&](const v1::Trial& a, const v1::Trial& b) {
      if (by_objective) {
        if (a.has_objective() != b.has_objective()) return a.has_objective();
        if (!a.has_objective()) return a.id() < b.id();
        return maximize ? a.objective() > b.objective() : a.objective() < b.objective();
      }
      return a.id() > b.id();  // recent first
    });
    return list;
  };
  auto render = [&](bool force) {
    absl::Time now = absl::Now();
    if (!force && now - last_render < absl::Seconds(interval_s)) return;
    last_render = now;
    std::vector<v1::Trial> list = snapshot();
    if (tty) {
      auto [cols, rows] = TerminalSize();
      hpo::client::TableOptions opt;
      opt.max_width = cols;
      opt.max_rows = std::max(rows - 6, 3);
      std::string screen = "\033[H\033[2J" + hpo::client::SweepHeader(sweep, list) + "\n" +
                           hpo::client::TrialTable(sweep, list, opt);
      std::fwrite(screen.data(), 1, screen.size(), stdout);
    } else {
      std::string header = hpo::client::SweepHeader(sweep, list);
      std::string line = absl::StrCat("[", absl::FormatTime("%H:%M:%S", now, absl::LocalTimeZone()), "] ",
                                      absl::StrReplaceAll(header.substr(0, header.size() - 1), {{"\n", " | "}}));
      if (line != last_line || force) std::printf("%s\n", line.c_str());
      last_line = line;
    }
    std::fflush(stdout);
  };
  while (true) {
    absl::Status s = c->Watch(sweep_id, seq, [&](const v1::Event& e) {
      seq = e.seq();
      if (e.has_sweep()) sweep = e.sweep();
      if (e.has_trial()) trials[e.trial().id()] = e.trial();
      render(false);
      return true;
    });
    if (s.ok()) break;
    // The daemon went away (or dropped a watcher that fell behind): resume; anything else is final.
    if (!absl::IsUnavailable(s) && !absl::IsCancelled(s) && !absl::IsResourceExhausted(s)) return Fail(s);
    // The daemon went away: wait for it and resume from the last event seen.
    std::fprintf(stderr, "hpo: lost the daemon (%s); reconnecting...\n", std::string(s.message()).c_str());
    absl::SleepFor(absl::Seconds(1));
    auto again = Client::Local(false);
    if (again.ok()) c = std::move(*again);
  }
  sweep = OrExit(c->GetSweep(sweep_id));
  std::vector<v1::Trial> list = snapshot();
  if (tty) {
    render(true);
  } else {
    hpo::client::TableOptions opt;
    std::printf("%s\n%s", hpo::client::SweepHeader(sweep, list).c_str(),
                hpo::client::TrialTable(sweep, list, opt).c_str());
  }
  return 0;
}

// --- exec --------------------------------------------------------------------------------------

pid_t g_child = 0;
void Forward(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}

int Exec(std::vector<std::string> cmd, std::string metric, std::string regex_text) {
  if (cmd.empty()) {
    std::fprintf(stderr, "hpo exec: give the command after --\n");
    return 2;
  }
  if (metric.empty()) metric = std::getenv("HPO_OBJECTIVE_METRIC") ? std::getenv("HPO_OBJECTIVE_METRIC") : "fom";
  if (regex_text.empty()) {
    regex_text = std::getenv("HPO_FOM_REGEX") ? std::getenv("HPO_FOM_REGEX")
                                              : R"(FoM:\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)))";
  }
  std::regex re;
  try {
    re = std::regex(regex_text, std::regex::ECMAScript | std::regex::icase);
  } catch (const std::regex_error& e) {
    std::fprintf(stderr, "hpo exec: bad regex '%s': %s\n", regex_text.c_str(), e.what());
    return 2;
  }
  auto reporter = hpo::client::TrialReporter::FromEnvironment(/*stream=*/true);
  if (!reporter.ok()) {
    std::fprintf(stderr, "hpo exec: %s; running without reporting\n", std::string(reporter.status().message()).c_str());
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
      std::fprintf(stderr, "hpo exec: report refused: %s\n", std::string(reply.status().message()).c_str());
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

// --- report ------------------------------------------------------------------------------------

int Report(int64_t step, const std::vector<std::string>& pairs) {
  std::map<std::string, double> metrics;
  for (const std::string& p : pairs) {
    std::vector<std::string> kv = absl::StrSplit(p, absl::MaxSplits('=', 1));
    double v = 0;
    if (kv.size() != 2 || kv[0].empty() || !absl::SimpleAtod(kv[1], &v)) {
      std::fprintf(stderr, "hpo report: '%s' is not name=number\n", p.c_str());
      return 2;
    }
    metrics[kv[0]] = v;
  }
  auto reporter = hpo::client::TrialReporter::FromEnvironment();
  if (!reporter.ok()) return Fail(reporter.status());
  auto reply = (*reporter)->Report(step, metrics);
  if (!reply.ok()) return Fail(reply.status());
  if (reply->action() == v1::ReportResponse::ACTION_STOP) {
    std::printf("stop: %s\n", reply->reason().c_str());
    return kExitStop;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hpo: submit, watch and inspect hyperparameter sweeps run by hpod.\n"
               "The daemon is found (and started when needed) through $HPO_DATA_DIR (default ~/.hpo)."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "hpo 0.1.0");
  int rc = 0;

  // daemon
  auto* daemon = app.add_subcommand("daemon", "start, stop or check the local hpod");
  daemon->require_subcommand(1);
  int daemon_gpus = -1, daemon_cpus = 0;
  std::string daemon_listen;
  auto* start = daemon->add_subcommand("start", "start hpod in the background");
  start->add_option("--gpus", daemon_gpus, "GPUs to hand out (default: what `nvidia-smi -L` lists)");
  start->add_option("--cpus", daemon_cpus, "CPU slots to hand out (default: online CPUs)");
  start->add_option("--listen", daemon_listen, "TCP address for trials (default 127.0.0.1:0)");
  std::string daemon_tls_cert, daemon_tls_key;
  start->add_option("--tls-cert", daemon_tls_cert, "PEM certificate: serve the TCP address over TLS only")
      ->check(CLI::ExistingFile);
  start->add_option("--tls-key", daemon_tls_key, "PEM private key of --tls-cert")->check(CLI::ExistingFile);
  start->callback([&] {
    if (Client::Local(false).ok()) {
      std::printf("hpod already runs for %s\n", hpo::DataDir::FromEnvironment().root().c_str());
      return;
    }
    std::vector<std::string> args;
    if (daemon_gpus >= 0) args.push_back(absl::StrCat("--gpus=", daemon_gpus));
    if (daemon_cpus > 0) args.push_back(absl::StrCat("--cpus=", daemon_cpus));
    if (!daemon_listen.empty()) args.push_back("--listen=" + daemon_listen);
    if (!daemon_tls_cert.empty()) args.push_back("--tls-cert=" + hpo::AbsolutePath(daemon_tls_cert));
    if (!daemon_tls_key.empty()) args.push_back("--tls-key=" + hpo::AbsolutePath(daemon_tls_key));
    absl::Status s = hpo::client::StartDaemon(absl::Seconds(20), args);
    if (!s.ok()) rc = Fail(s);
    else std::printf("hpod started for %s\n", hpo::DataDir::FromEnvironment().root().c_str());
  });
  bool keep_trials = false;
  auto* stop = daemon->add_subcommand("stop", "stop hpod (running trials end and are retried at its next start)");
  stop->add_flag("--keep-trials", keep_trials,
                 "leave running trials running; the next start re-adopts them (for upgrades)");
  stop->callback([&] {
    absl::Status s = hpo::client::StopDaemon(absl::Seconds(30), keep_trials);
    if (!s.ok()) rc = Fail(s);
    else std::printf("hpod stopped\n");
  });
  daemon->add_subcommand("status", "say whether hpod runs (exit 0) or not (exit 1)")->callback([&] {
    hpo::DataDir dir = hpo::DataDir::FromEnvironment();
    if (Client::Local(false).ok()) {
      auto endpoint = hpo::ReadFile(dir.endpoint_path());
      auto pid = hpo::ReadFile(dir.pid_path());
      std::printf("hpod runs for %s (pid %s, endpoint %s)\n", dir.root().c_str(),
                  pid.ok() ? std::string(absl::StripAsciiWhitespace(*pid)).c_str() : "?",
                  endpoint.ok() ? std::string(absl::StripAsciiWhitespace(*endpoint)).c_str() : "?");
    } else {
      std::printf("no hpod runs for %s\n", dir.root().c_str());
      rc = kExitError;
    }
  });

  // validate / submit
  std::string file, name;
  auto read_spec = [&](auto& req) {
    auto text = hpo::ReadFile(file);
    if (!text.ok()) std::exit(Fail(text.status()));
    req.set_spec_yaml(*text);
    req.set_source(file);
    req.set_base_dir(hpo::DirName(hpo::AbsolutePath(file)));
  };
  auto* validate = app.add_subcommand("validate", "check a sweep file; errors name file:line:column");
  validate->add_option("file", file, "sweep YAML")->required();
  validate->callback([&] {
    v1::ValidateSweepRequest req;
    read_spec(req);
    auto c = Connect();
    v1::ValidateSweepResponse resp = OrExit(c->Validate(req));
    if (!resp.valid()) {
      for (const auto& e : resp.errors()) std::fprintf(stderr, "%s\n", e.c_str());
      rc = kExitError;
      return;
    }
    std::printf("%s: valid\n%s", file.c_str(), resp.summary().c_str());
  });
  bool submit_watch = false;
  auto* submit = app.add_subcommand("submit", "submit a sweep; prints its id as the last line");
  submit->add_option("file", file, "sweep YAML")->required();
  submit->add_option("--name", name, "name of the sweep (default: the file's name:)");
  submit->add_flag("--watch", submit_watch, "watch the sweep until it ends");
  submit->callback([&] {
    v1::SubmitSweepRequest req;
    read_spec(req);
    req.set_name(name);
    auto c = Connect();
    auto sweep = c->Submit(req);
    if (!sweep.ok()) {
      rc = Fail(sweep.status());
      return;
    }
    std::fprintf(stderr, "submitted sweep %lld '%s' (%s, %lld trial(s) max, %lld at a time)\n",
                 static_cast<long long>(sweep->id()), sweep->name().c_str(), sweep->algorithm().c_str(),
                 static_cast<long long>(sweep->max_trials()), static_cast<long long>(sweep->max_concurrent()));
    if (submit_watch) Watch(sweep->id(), 0.5, "objective");
    std::printf("%lld\n", static_cast<long long>(sweep->id()));
  });

  // ls / show
  bool all = false;
  auto* ls = app.add_subcommand("ls", "list sweeps");
  ls->add_flag("--active", all, "only RUNNING and PAUSED sweeps");
  ls->callback([&] {
    auto c = Connect();
    auto sweeps = OrExit(c->ListSweeps(all));
    std::printf("%-5s %-24s %-12s %-40s %s\n", "id", "name", "state", "trials", "best");
    for (const auto& s : sweeps) std::printf("%s\n", hpo::client::SweepLine(s).c_str());
  });
  int64_t sweep_id = 0;
  bool show_spec = false;
  auto* show = app.add_subcommand("show", "show a sweep: state, counts, best, spec");
  show->add_option("sweep", sweep_id, "sweep id")->required();
  show->add_flag("--spec", show_spec, "also print the submitted YAML");
  show->callback([&] {
    auto c = Connect();
    auto sweep = OrExit(c->GetSweep(sweep_id));
    auto trials = AllTrials(*c, sweep_id);
    std::printf("%s", hpo::client::SweepHeader(sweep, trials).c_str());
    std::printf("source %s, algorithm %s, backend %s, %lld at a time\n", sweep.source().c_str(),
                sweep.algorithm().c_str(), sweep.backend().c_str(), static_cast<long long>(sweep.max_concurrent()));
    if (show_spec) std::printf("\n%s", sweep.spec_yaml().c_str());
  });

  // trials
  std::string sort = "number";
  std::vector<std::string> states;
  int limit = 0;
  auto* trials_cmd = app.add_subcommand("trials", "table of a sweep's trials");
  trials_cmd->add_option("sweep", sweep_id, "sweep id")->required();
  trials_cmd->add_option("--sort", sort, "number | objective | recent")->capture_default_str()
      ->check(CLI::IsMember({"number", "objective", "recent"}));
  trials_cmd->add_option("--state", states, "only trials in these states (RUNNING, COMPLETED, ...)");
  trials_cmd->add_option("--limit", limit, "at most this many rows");
  bool where = false;
  trials_cmd->add_flag("--where", where, "add each trial's GPUs and backend id (pid, Slurm job id and nodes)");
  trials_cmd->callback([&] {
    v1::ListTrialsRequest req;
    req.set_sweep_id(sweep_id);
    req.set_order(sort == "objective" ? v1::TRIAL_ORDER_OBJECTIVE
                  : sort == "recent" ? v1::TRIAL_ORDER_RECENT : v1::TRIAL_ORDER_NUMBER);
    req.set_limit(limit);
    for (std::string s : states) {
      for (auto& ch : s) ch = static_cast<char>(std::toupper(ch));
      v1::TrialState st;
      if (!v1::TrialState_Parse("TRIAL_STATE_" + s, &st)) {
        std::fprintf(stderr, "hpo trials: unknown state '%s'\n", s.c_str());
        rc = 2;
        return;
      }
      req.add_states(st);
    }
    auto c = Connect();
    auto sweep = OrExit(c->GetSweep(sweep_id));
    auto trials = OrExit(c->ListTrials(req));
    hpo::client::TableOptions opt;
    opt.where = where;
    if (::isatty(STDOUT_FILENO)) opt.max_width = TerminalSize().first;
    std::printf("%s", hpo::client::TrialTable(sweep, trials, opt).c_str());
  });

  // watch / wait
  double interval = 0.5;
  std::string watch_sort = "objective";
  auto* watch = app.add_subcommand("watch", "live table of a sweep until it ends");
  watch->add_option("sweep", sweep_id, "sweep id")->required();
  watch->add_option("--interval", interval, "seconds between refreshes")->capture_default_str();
  watch->add_option("--sort", watch_sort, "objective | recent")->capture_default_str()
      ->check(CLI::IsMember({"objective", "recent"}));
  watch->callback([&] { rc = Watch(sweep_id, interval, watch_sort); });
  double timeout_s = 0;
  auto* wait = app.add_subcommand("wait", "block until the sweep ends; exit 0 COMPLETED/GOAL_REACHED, 3 FAILED, 4 CANCELED, 5 TIMED_OUT");
  wait->add_option("sweep", sweep_id, "sweep id")->required();
  wait->add_option("--timeout", timeout_s, "give up after this many seconds (exit 1)");
  wait->callback([&] {
    auto c = Connect();
    absl::Time until = timeout_s > 0 ? absl::Now() + absl::Seconds(timeout_s) : absl::InfiniteFuture();
    while (true) {
      auto sweep = c->GetSweep(sweep_id);
      if (!sweep.ok() && !absl::IsUnavailable(sweep.status())) {
        rc = Fail(sweep.status());
        return;
      }
      if (sweep.ok() && IsFinal(sweep->state())) {
        std::printf("sweep %lld %s: %s\n", static_cast<long long>(sweep_id),
                    hpo::client::StateName(sweep->state()).c_str(), sweep->message().c_str());
        rc = WaitExitCode(sweep->state());
        return;
      }
      if (absl::Now() > until) {
        std::fprintf(stderr, "hpo wait: sweep %lld still runs after %gs\n", static_cast<long long>(sweep_id), timeout_s);
        rc = kExitError;
        return;
      }
      absl::SleepFor(absl::Milliseconds(250));
      if (!sweep.ok()) {
        if (auto again = Client::Local(false); again.ok()) c = std::move(*again);
      }
    }
  });

  // cancel / pause / resume
  bool no_wait = false;
  auto* cancel = app.add_subcommand("cancel", "cancel a sweep: running trials get SIGTERM, then SIGKILL after the grace period");
  cancel->add_option("sweep", sweep_id, "sweep id")->required();
  cancel->add_flag("--no-wait", no_wait, "return at once instead of waiting for the trials to end");
  cancel->callback([&] {
    auto c = Connect();
    auto sweep = c->Cancel(sweep_id);
    if (!sweep.ok()) {
      rc = Fail(sweep.status());
      return;
    }
    while (!no_wait && !IsFinal(sweep->state())) {
      absl::SleepFor(absl::Milliseconds(100));
      sweep = OrExit(c->GetSweep(sweep_id));
    }
    std::printf("sweep %lld %s\n", static_cast<long long>(sweep_id),
                IsFinal(sweep->state()) ? hpo::client::StateName(sweep->state()).c_str() : "canceling");
  });
  for (bool pause : {true, false}) {
    auto* cmd = app.add_subcommand(pause ? "pause" : "resume",
                                   pause ? "stop launching new trials (running ones go on)" : "launch trials again");
    cmd->add_option("sweep", sweep_id, "sweep id")->required();
    cmd->callback([&, pause] {
      auto c = Connect();
      auto sweep = pause ? c->Pause(sweep_id) : c->Resume(sweep_id);
      if (!sweep.ok()) rc = Fail(sweep.status());
      else std::printf("sweep %lld %s\n", static_cast<long long>(sweep_id), hpo::client::StateName(sweep->state()).c_str());
    });
  }

  // best
  bool best_json = false;
  auto* best = app.add_subcommand("best", "the best trial: objective and parameters");
  best->add_option("sweep", sweep_id, "sweep id")->required();
  best->add_flag("--json", best_json, "as JSON");
  best->callback([&] {
    auto c = Connect();
    auto sweep = OrExit(c->GetSweep(sweep_id));
    if (sweep.best_trial_id() == 0) {
      std::fprintf(stderr, "hpo best: sweep %lld has no finished trial with a '%s' yet\n",
                   static_cast<long long>(sweep_id), sweep.objective_metric().c_str());
      rc = kExitError;
      return;
    }
    v1::Trial t = OrExit(c->GetTrial(sweep.best_trial_id(), false)).trial();
    if (best_json) {
      std::printf("%s", hpo::client::TrialsJson(sweep, {t}).c_str());
      return;
    }
    std::printf("trial %lld (#%lld) %s %s = %s\n", static_cast<long long>(t.id()),
                static_cast<long long>(t.number()), hpo::client::StateName(t.state()).c_str(),
                sweep.objective_metric().c_str(), hpo::client::NumberText(t.objective()).c_str());
    for (const auto& [k, v] : std::map(t.params().begin(), t.params().end())) {
      std::printf("  %s: %s\n", k.c_str(), hpo::client::ValueText(v).c_str());
    }
  });

  // logs
  int64_t trial_id = 0;
  bool stderr_log = false;
  int64_t bytes = 64 * 1024;
  auto* logs = app.add_subcommand("logs", "the end of a trial's stdout (or stderr)");
  logs->add_option("trial", trial_id, "trial id")->required();
  logs->add_flag("--stderr", stderr_log, "show stderr instead of stdout");
  logs->add_option("--bytes", bytes, "how much of the end to show")->capture_default_str();
  logs->callback([&] {
    auto c = Connect();
    v1::TailTrialLogRequest req;
    req.set_trial_id(trial_id);
    req.set_stream(stderr_log ? v1::TailTrialLogRequest::STREAM_STDERR : v1::TailTrialLogRequest::STREAM_STDOUT);
    req.set_max_bytes(bytes);
    auto resp = OrExit(c->TailLog(req));
    if (resp.truncated()) std::fprintf(stderr, "(showing the last %lld bytes of %s)\n", static_cast<long long>(bytes), resp.path().c_str());
    std::fwrite(resp.data().data(), 1, resp.data().size(), stdout);
  });

  // export
  std::string format = "json", out_file;
  auto* exp = app.add_subcommand("export", "every trial with params, last metrics, objective and backend ids");
  exp->add_option("sweep", sweep_id, "sweep id")->required();
  exp->add_option("--format", format, "json | csv")->capture_default_str()->check(CLI::IsMember({"json", "csv"}));
  exp->add_option("-o,--output", out_file, "write to this file instead of stdout");
  exp->callback([&] {
    auto c = Connect();
    auto sweep = OrExit(c->GetSweep(sweep_id));
    auto trials = AllTrials(*c, sweep_id);
    std::string text = format == "csv" ? hpo::client::TrialsCsv(trials) : hpo::client::TrialsJson(sweep, trials);
    if (out_file.empty()) {
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else if (absl::Status s = hpo::WriteFileAtomic(out_file, text); !s.ok()) {
      rc = Fail(s);
    }
  });

  // plot: matplotlib through the Python package next to this build (build/python)
  std::string plot_kind = "curves", plot_out;
  auto* plot = app.add_subcommand("plot", "plot a sweep to a PNG: learning curves, objective by trial, parallel coordinates");
  plot->add_option("sweep", sweep_id, "sweep id")->required();
  plot->add_option("--kind", plot_kind, "curves | objective | parallel")->capture_default_str()
      ->check(CLI::IsMember({"curves", "objective", "parallel"}));
  plot->add_option("-o,--output", plot_out, "PNG file to write")->required();
  plot->callback([&] {
    Connect();  // starts the daemon when needed, like every other command
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    std::string pydir = ec ? "" : (self.parent_path().parent_path() / "python").string();
    std::string pythonpath = pydir;
    if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old) pythonpath += std::string(":") + old;
    ::setenv("PYTHONPATH", pythonpath.c_str(), 1);
    std::string id = std::to_string(sweep_id);
    execl("/usr/bin/python3", "/usr/bin/python3", "-m", "hpo.plot", id.c_str(), "--kind", plot_kind.c_str(),
          "-o", plot_out.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "hpo plot: cannot run /usr/bin/python3: %s\n", std::strerror(errno));
    rc = kExitError;
  });

  // user: tokens of other users of a shared daemon (files in the data dir; see server/auth.h)
  auto* user = app.add_subcommand("user", "the owner of a shared daemon: give other users tokens");
  user->require_subcommand(1);
  std::string user_name;
  auto valid_name = [](const std::string& n) -> std::string {
    if (n.empty() || n.size() > 64 || n[0] == '.' || n.find_first_not_of(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != std::string::npos) {
      return "a user name is 1-64 letters, digits, '.', '_' or '-', not starting with '.'";
    }
    return "";
  };
  auto* user_add = user->add_subcommand("add", "make a token for NAME (prints the token file to hand over)");
  user_add->add_option("name", user_name, "user name")->required()->check(valid_name);
  user_add->callback([&] {
    hpo::DataDir dir = hpo::DataDir::FromEnvironment();
    std::string path = dir.users_dir() + "/" + user_name + ".token";
    if (absl::Status s = hpo::MakeDirs(dir.users_dir(), 0700); !s.ok()) { rc = Fail(s); return; }
    if (::access(path.c_str(), F_OK) == 0) {
      rc = Fail(absl::AlreadyExistsError(absl::StrCat("user ", user_name, " already has a token: ", path)));
      return;
    }
    if (absl::Status s = hpo::WriteFileAtomic(path, hpo::NewToken() + "\n", 0600); !s.ok()) { rc = Fail(s); return; }
    std::printf("%s\n", path.c_str());
    std::fprintf(stderr, "hand this file to %s privately; they set HPO_SERVER=HOST:PORT and "
                 "HPO_TOKEN_FILE=<their copy>, and see only their own sweeps\n", user_name.c_str());
  });
  auto* user_rm = user->add_subcommand("rm", "revoke NAME's token (within a second)");
  user_rm->add_option("name", user_name, "user name")->required()->check(valid_name);
  user_rm->callback([&] {
    std::string path = hpo::DataDir::FromEnvironment().users_dir() + "/" + user_name + ".token";
    if (::unlink(path.c_str()) != 0) {
      rc = Fail(absl::NotFoundError(absl::StrCat("no token for user ", user_name, " (", path, ")")));
    }
  });
  auto* user_ls = user->add_subcommand("ls", "list users with a token");
  user_ls->callback([&] {
    std::error_code ec;
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(hpo::DataDir::FromEnvironment().users_dir(), ec)) {
      if (e.path().extension() == ".token") names.push_back(e.path().stem().string());
    }
    std::sort(names.begin(), names.end());
    for (const auto& n : names) std::printf("%s\n", n.c_str());
  });

  // report / exec (inside trials)
  int64_t step = -1;
  std::vector<std::string> pairs;
  auto* report = app.add_subcommand("report", "inside a trial: push metrics (exit 10 when hpod says stop)");
  report->add_option("--step", step, "step (epoch) of the report; default: the trial's last step + 1");
  report->add_option("metrics", pairs, "name=value pairs")->required();
  report->callback([&] { rc = Report(step, pairs); });
  std::vector<std::string> cmd;
  std::string metric, regex_text;
  auto* exec = app.add_subcommand("exec", "inside a trial: run CMD, report every figure-of-merit line of its stdout");
  exec->add_option("--metric", metric, "metric name for the values (default: the sweep's objective metric)");
  exec->add_option("--regex", regex_text, "regex whose group 1 is the value (default: the sweep's fom_regex, 'FoM: <number>')");
  exec->add_option("command", cmd, "the command and its arguments, after --")->required();
  exec->callback([&] { rc = Exec(cmd, metric, regex_text); });

  CLI11_PARSE(app, argc, argv);
  return rc;
}
