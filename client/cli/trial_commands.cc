#include "client/cli/trial_commands.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "client/cli/cli.h"
#include "client/table.h"
#include "common/files.h"
#include "hpo/v1/states.h"

namespace hpo::client::cli {

TrialCommands::TrialCommands(CLI::App& app, int& rc) : rc_(rc) {
  CLI::App* trials = app.add_subcommand("trials", "table of a sweep's trials");
  trials->add_option("sweep", trials_.sweep, "sweep id")->required();
  trials->add_option("--sort", trials_.sort, "number | objective | recent")
      ->capture_default_str()
      ->check(CLI::IsMember({"number", "objective", "recent"}));
  trials->add_option("--state", trials_.states,
                     "only trials in these states (RUNNING, COMPLETED, ...)");
  trials->add_option("--limit", trials_.limit, "at most this many rows");
  trials->add_flag("--where", trials_.where,
                   "add each trial's GPUs and backend id (pid, Slurm job id and nodes)");
  trials->add_flag("--pareto", trials_.pareto,
                   "only the Pareto front (a sweep with several objectives or constraints)");
  trials->callback([this] { Trials(); });

  CLI::App* best = app.add_subcommand(
      "best",
      "the best trial: objective and parameters; with several objectives, the Pareto front");
  best->add_option("sweep", best_.sweep, "sweep id")->required();
  best->add_flag("--json", best_.json, "as JSON");
  best->callback([this] { Best(); });

  CLI::App* logs = app.add_subcommand("logs", "the end of a trial's stdout (or stderr)");
  logs->add_option("trial", logs_.trial, "trial id")->required();
  logs->add_flag("--stderr", logs_.stderr_log, "show stderr instead of stdout");
  logs->add_option("--bytes", logs_.bytes, "how much of the end to show")->capture_default_str();
  logs->callback([this] { Logs(); });

  CLI::App* exp = app.add_subcommand(
      "export", "every trial with params, last metrics, objective and backend ids");
  exp->add_option("sweep", export_.sweep, "sweep id")->required();
  exp->add_option("--format", export_.format, "json | csv")
      ->capture_default_str()
      ->check(CLI::IsMember({"json", "csv"}));
  exp->add_option("-o,--output", export_.output, "write to this file instead of stdout");
  exp->callback([this] { Export(); });

  CLI::App* plot = app.add_subcommand(
      "plot",
      "plot a sweep to a PNG: learning curves, objective by trial, parallel coordinates; with "
      "several objectives the Pareto front (pairs of objectives) and its hypervolume");
  plot->add_option("sweep", plot_.sweep, "sweep id")->required();
  plot->add_option("--kind", plot_.kind, "curves | objective | parallel | pareto | hypervolume")
      ->capture_default_str()
      ->check(CLI::IsMember({"curves", "objective", "parallel", "pareto", "hypervolume"}));
  plot->add_option("-o,--output", plot_.output, "PNG file to write")->required();
  plot->callback([this] { Plot(); });
}

void TrialCommands::Trials() {
  v1::ListTrialsRequest req;
  req.set_sweep_id(trials_.sweep);
  req.set_order(trials_.sort == "objective" ? v1::TRIAL_ORDER_OBJECTIVE
                : trials_.sort == "recent"  ? v1::TRIAL_ORDER_RECENT
                                            : v1::TRIAL_ORDER_NUMBER);
  req.set_limit(trials_.limit);
  req.set_pareto(trials_.pareto);
  for (std::string s : trials_.states) {
    for (auto& ch : s) ch = static_cast<char>(std::toupper(ch));
    v1::TrialState st;
    if (!v1::TrialState_Parse("TRIAL_STATE_" + s, &st)) {
      std::fprintf(stderr, "hpo trials: unknown state '%s'\n", s.c_str());
      rc_ = kExitUsage;
      return;
    }
    req.add_states(st);
  }
  auto c = Connect();
  auto sweep = OrExit(c->GetSweep(trials_.sweep));
  if (trials_.pareto && !client::IsPareto(sweep)) {
    std::fprintf(stderr,
                 "hpo trials: sweep %lld has one objective and no constraints: no Pareto front "
                 "(--sort objective ranks it)\n",
                 static_cast<long long>(trials_.sweep));
    rc_ = kExitUsage;
    return;
  }
  auto trials = OrExit(c->ListTrials(req));
  client::TableOptions opt;
  opt.where = trials_.where;
  if (::isatty(STDOUT_FILENO)) opt.max_width = TerminalSize().first;
  std::printf("%s", client::TrialTable(sweep, trials, opt).c_str());
}

void TrialCommands::Best() {
  auto c = Connect();
  auto sweep = OrExit(c->GetSweep(best_.sweep));
  if (sweep.objectives_size() > 1) {  // the Pareto front
    v1::ListTrialsRequest req;
    req.set_sweep_id(best_.sweep);
    req.set_pareto(true);
    auto front = OrExit(c->ListTrials(req));
    if (best_.json) {
      std::printf("%s", client::TrialsJson(sweep, front).c_str());
      return;
    }
    if (front.empty()) {
      std::fprintf(stderr, "hpo best: sweep %lld has no completed trial with every objective yet\n",
                   static_cast<long long>(best_.sweep));
      rc_ = kExitError;
      return;
    }
    std::printf("Pareto front of sweep %lld: %zu trial(s) of %s\n",
                static_cast<long long>(best_.sweep), front.size(),
                client::ObjectivesText(sweep).c_str());
    std::printf("%s", client::TrialTable(sweep, front, {}).c_str());
    return;
  }
  if (sweep.best_trial_id() == 0) {
    std::fprintf(stderr, "hpo best: sweep %lld has no finished trial with a '%s' yet\n",
                 static_cast<long long>(best_.sweep), sweep.objective_metric().c_str());
    rc_ = kExitError;
    return;
  }
  v1::Trial t = OrExit(c->GetTrial(sweep.best_trial_id(), false)).trial();
  if (best_.json) {
    std::printf("%s", client::TrialsJson(sweep, {t}).c_str());
    return;
  }
  std::printf("trial %lld (#%lld) %s %s = %s\n", static_cast<long long>(t.id()),
              static_cast<long long>(t.number()), v1::StateName(t.state()).c_str(),
              sweep.objective_metric().c_str(), client::NumberText(t.objective()).c_str());
  for (const auto& [k, v] : std::map(t.params().begin(), t.params().end())) {
    std::printf("  %s: %s\n", k.c_str(), client::ValueText(v).c_str());
  }
}

void TrialCommands::Logs() {
  auto c = Connect();
  v1::TailTrialLogRequest req;
  req.set_trial_id(logs_.trial);
  req.set_stream(logs_.stderr_log ? v1::TailTrialLogRequest::STREAM_STDERR
                                  : v1::TailTrialLogRequest::STREAM_STDOUT);
  req.set_max_bytes(logs_.bytes);
  auto resp = OrExit(c->TailLog(req));
  if (resp.truncated()) {
    std::fprintf(stderr, "(showing the last %lld bytes of %s)\n",
                 static_cast<long long>(logs_.bytes), resp.path().c_str());
  }
  std::fwrite(resp.data().data(), 1, resp.data().size(), stdout);
}

void TrialCommands::Export() {
  auto c = Connect();
  auto sweep = OrExit(c->GetSweep(export_.sweep));
  auto trials = AllTrials(*c, export_.sweep);
  std::string text =
      export_.format == "csv" ? client::TrialsCsv(trials) : client::TrialsJson(sweep, trials);
  if (export_.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else if (absl::Status s = WriteFileAtomic(export_.output, text); !s.ok()) {
    rc_ = Fail(s);
  }
}

// matplotlib, through the Python package that came with this hpo: build/python next to
// build/bin, or lib/python3/dist-packages next to an installed bin/. The interpreter is
// $HPO_PYTHON, else the one hpo was configured with (HPO_PYTHON in CMake).
void TrialCommands::Plot() {
  Connect();  // starts the daemon when needed, like every other command
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::string pythonpath;
  if (!ec) {
    std::filesystem::path root = self.parent_path().parent_path();
    for (auto dir : {root / "python", root / "lib" / "python3" / "dist-packages"}) {
      if (std::filesystem::exists(dir / "hpo" / "plot.py")) {
        pythonpath = dir.string();
        break;
      }
    }
  }
  if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old) {
    pythonpath += (pythonpath.empty() ? "" : ":") + std::string(old);
  }
  ::setenv("PYTHONPATH", pythonpath.c_str(), 1);
  const char* env = std::getenv("HPO_PYTHON");
  std::string python = env != nullptr && *env ? env : HPO_PYTHON;
  std::string id = std::to_string(plot_.sweep);
  execlp(python.c_str(), python.c_str(), "-m", "hpo.plot", id.c_str(), "--kind", plot_.kind.c_str(),
         "-o", plot_.output.c_str(), static_cast<char*>(nullptr));
  std::fprintf(stderr,
               "hpo plot: cannot run %s (set HPO_PYTHON to a python3 with matplotlib): %s\n",
               python.c_str(), std::strerror(errno));
  rc_ = kExitError;
}

}  // namespace hpo::client::cli
