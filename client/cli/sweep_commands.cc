#include "client/cli/sweep_commands.h"

#include <algorithm>
#include <cstdio>

#include "client/cli/cli.h"
#include "client/cli/watch_commands.h"
#include "client/table.h"
#include "common/duration.h"
#include "common/files.h"
#include "hpo/v1/states.h"

namespace hpo::client::cli {
namespace {

// The request's spec, source and base directory from a sweep file; exits when it cannot be read.
template <typename Request>
void ReadSpec(const std::string& file, Request& req) {
  absl::StatusOr<std::string> text = ReadFile(file);
  if (!text.ok()) std::exit(Fail(text.status()));
  req.set_spec_yaml(*text);
  req.set_source(file);
  req.set_base_dir(DirName(AbsolutePath(file)));
}

}  // namespace

SweepCommands::SweepCommands(CLI::App& app, int& rc) : rc_(rc) {
  CLI::App* validate =
      app.add_subcommand("validate", "check a sweep file; errors name file:line:column");
  validate->add_option("file", validate_.file, "sweep YAML")->required();
  validate->callback([this] { Validate(); });

  CLI::App* plan = app.add_subcommand(
      "plan",
      "what a sweep file would cost before it runs: trials, steps, GPU-hours, node-hours, wall "
      "time (each with a range) and, on Slurm, the queue wait");
  plan->add_option("file", plan_.file, "sweep YAML")->required();
  plan->add_option("--like", plan_.like, "learn a step's time and a trial's steps from this sweep");
  plan->add_option("--steps", plan_.steps, "steps a trial reports when nothing stops it");
  plan->add_option("--step-time", plan_.step_time, "the time of one step (30s, 2m, ...)");
  plan->add_flag("--pilot", plan_.pilot,
                 "measure a step's time first: run the file's pilot (a few random configurations "
                 "for a few steps each, and one to its end where a trial's length is not known; "
                 "a sweep of its own named NAME-pilot) and plan like it");
  plan->add_option("--pilot-trials", plan_.pilot_trials, "the pilot's trials")
      ->capture_default_str();
  plan->add_option("--pilot-steps", plan_.pilot_steps, "steps each pilot trial runs")
      ->capture_default_str();
  plan->callback([this] { Plan(); });

  CLI::App* submit = app.add_subcommand("submit", "submit a sweep; prints its id as the last line");
  submit->add_option("file", submit_.file, "sweep YAML")->required();
  submit->add_option("--name", submit_.name, "name of the sweep (default: the file's name:)");
  submit->add_flag("--watch", submit_.watch, "watch the sweep until it ends");
  submit->callback([this] { Submit(submit_); });

  CLI::App* ls = app.add_subcommand("ls", "list sweeps");
  ls->add_flag("--active", ls_.active, "only RUNNING and PAUSED sweeps");
  ls->callback([this] { List(); });

  CLI::App* fork = app.add_subcommand(
      "fork",
      "submit FILE (a changed space, say) as a new sweep that inherits SWEEP's completed trials "
      "that lie in its space: they feed its sampler without being run again (marked warm_start)");
  fork->add_option("sweep", fork_.from, "the sweep to inherit from")->required();
  fork->add_option("file", fork_.file, "sweep YAML")->required();
  fork->add_option("--name", fork_.name, "name of the new sweep");
  fork->add_flag("--watch", fork_.watch, "follow it with the live table");
  fork->callback([this] { Submit(fork_); });

  CLI::App* show = app.add_subcommand("show", "show a sweep: state, counts, best, spec");
  show->add_option("sweep", show_.sweep, "sweep id")->required();
  show->add_flag("--spec", show_.spec, "also print the submitted YAML");
  show->callback([this] { Show(); });

  CLI::App* cancel = app.add_subcommand(
      "cancel", "cancel a sweep: running trials get SIGTERM, then SIGKILL after the grace period");
  cancel->add_option("sweep", cancel_.sweep, "sweep id")->required();
  cancel->add_flag("--no-wait", cancel_.no_wait,
                   "return at once instead of waiting for the trials to end");
  cancel->callback([this] { Cancel(); });

  CLI::App* pause = app.add_subcommand("pause", "stop launching new trials (running ones go on)");
  pause->add_option("sweep", pause_.sweep, "sweep id")->required();
  pause->callback([this] { PauseOrResume(true); });
  CLI::App* resume = app.add_subcommand("resume", "launch trials again");
  resume->add_option("sweep", resume_.sweep, "sweep id")->required();
  resume->callback([this] { PauseOrResume(false); });

  CLI::App* nodes = app.add_subcommand(
      "nodes",
      "the nodes where a sweep's trials failed by the infrastructure's fault, and which of them "
      "are quarantined");
  nodes->add_option("sweep", nodes_.sweep, "sweep id")->required();
  nodes->add_option("--allow", nodes_.allow, "let this quarantined node back into the sweep");
  nodes->callback([this] { Nodes(); });
}

void SweepCommands::Nodes() {
  auto c = Connect();
  absl::StatusOr<v1::Sweep> sweep =
      nodes_.allow.empty() ? c->GetSweep(nodes_.sweep) : c->AllowNode(nodes_.sweep, nodes_.allow);
  if (!sweep.ok()) {
    rc_ = Fail(sweep.status());
    return;
  }
  if (!nodes_.allow.empty()) {
    std::printf("node %s allowed back into sweep %lld\n", nodes_.allow.c_str(),
                static_cast<long long>(nodes_.sweep));
  }
  std::printf("%s", client::NodesTable(*sweep).c_str());
}

void SweepCommands::Validate() {
  v1::ValidateSweepRequest req;
  ReadSpec(validate_.file, req);
  auto c = Connect();
  v1::ValidateSweepResponse resp = OrExit(c->Validate(req));
  if (!resp.valid()) {
    for (const auto& e : resp.errors()) std::fprintf(stderr, "%s\n", e.c_str());
    rc_ = kExitError;
    return;
  }
  std::printf("%s: valid\n%s", validate_.file.c_str(), resp.summary().c_str());
}

void SweepCommands::Plan() {
  v1::PlanSweepRequest req;
  ReadSpec(plan_.file, req);
  req.set_like_sweep(plan_.like);
  req.set_steps(plan_.steps);
  if (!plan_.step_time.empty()) {
    absl::StatusOr<absl::Duration> d = ParseDuration(plan_.step_time);
    if (!d.ok() || *d <= absl::ZeroDuration()) {
      std::fprintf(stderr, "hpo plan: --step-time: '%s' is not a duration like 30s or 2m\n",
                   plan_.step_time.c_str());
      rc_ = kExitError;
      return;
    }
    req.set_step_seconds(absl::ToDoubleSeconds(*d));
  }
  if (plan_.pilot && (plan_.like > 0 || !plan_.step_time.empty())) {
    std::fprintf(stderr,
                 "hpo plan: --pilot measures a step's time; it does not go with --like or "
                 "--step-time\n");
    rc_ = kExitError;
    return;
  }
  auto c = Connect();
  auto plan = [&]() -> bool {
    v1::PlanSweepResponse resp = OrExit(c->Plan(req));
    for (const auto& e : resp.errors()) std::fprintf(stderr, "%s\n", e.c_str());
    if (resp.errors_size() > 0) return false;
    std::printf("plan for %s:\n%s", plan_.file.c_str(), client::PlanText(resp.estimate()).c_str());
    return true;
  };
  if (!plan_.pilot) {
    if (!plan()) rc_ = kExitError;
    return;
  }
  // The file is checked before the pilot costs anything; where a trial's length is not known,
  // one trial of the pilot runs to its end to learn it.
  v1::PlanSweepRequest check = req;
  check.set_pilot(true);
  v1::PlanSweepResponse first = OrExit(c->Plan(check));
  if (first.errors_size() > 0) {
    for (const auto& e : first.errors()) std::fprintf(stderr, "%s\n", e.c_str());
    rc_ = kExitError;
    return;
  }
  const int64_t full = first.length_unknown() ? 1 : 0;
  v1::SubmitSweepRequest sreq;
  ReadSpec(plan_.file, sreq);
  sreq.set_pilot_trials(plan_.pilot_trials);
  sreq.set_pilot_steps(plan_.pilot_steps);
  sreq.set_pilot_full_trials(full);
  absl::StatusOr<v1::Sweep> pilot = c->Submit(sreq);
  if (!pilot.ok()) {
    rc_ = Fail(pilot.status());
    return;
  }
  std::fprintf(stderr, "pilot: sweep %lld '%s', %lld trial(s) of %lld step(s)%s, %lld at a time\n",
               static_cast<long long>(pilot->id()), pilot->name().c_str(),
               static_cast<long long>(plan_.pilot_trials),
               static_cast<long long>(plan_.pilot_steps),
               full > 0 ? " and 1 to its end (a trial's length is not known)" : "",
               static_cast<long long>(pilot->max_concurrent()));
  absl::StatusOr<v1::Sweep> ended =
      FollowUntilEnded(c, pilot->id(), absl::InfiniteFuture(), nullptr);
  if (!ended.ok()) {
    rc_ = Fail(ended.status());
    return;
  }
  std::fprintf(stderr, "pilot: sweep %lld ended %s\n", static_cast<long long>(pilot->id()),
               v1::StateName(ended->state()).c_str());
  // Its allocations end once released (their agents end them); until then the queue wait the
  // plan asks slurmctld for would count them as in the way.
  for (absl::Time until = absl::Now() + absl::Minutes(1); ended->nodes_held() > 0;) {
    if (absl::Now() > until) break;
    absl::SleepFor(absl::Milliseconds(500));
    ended = c->GetSweep(pilot->id());
    if (!ended.ok()) {
      rc_ = Fail(ended.status());
      return;
    }
  }
  req.set_like_sweep(pilot->id());
  if (!plan()) {
    std::fprintf(stderr, "hpo plan: see hpo show %lld and hpo trials %lld for the pilot\n",
                 static_cast<long long>(pilot->id()), static_cast<long long>(pilot->id()));
    rc_ = kExitError;
  }
}

void SweepCommands::Submit(const FileOptions& options) {
  v1::SubmitSweepRequest req;
  ReadSpec(options.file, req);
  req.set_name(options.name);
  req.set_warm_start_sweep(options.from);
  auto c = Connect();
  auto sweep = c->Submit(req);
  if (!sweep.ok()) {
    rc_ = Fail(sweep.status());
    return;
  }
  std::fprintf(stderr, "submitted sweep %lld '%s' (%s, %lld trial(s) max, %lld at a time)\n",
               static_cast<long long>(sweep->id()), sweep->name().c_str(),
               sweep->algorithm().c_str(), static_cast<long long>(sweep->max_trials()),
               static_cast<long long>(sweep->max_concurrent()));
  if (options.watch) WatchSweep(sweep->id(), 0.5, "objective");
  std::printf("%lld\n", static_cast<long long>(sweep->id()));
}

void SweepCommands::List() {
  auto c = Connect();
  auto sweeps = OrExit(c->ListSweeps(ls_.active));
  std::printf("%-5s %-24s %-12s %-8s %-40s %-12s %s\n", "id", "name", "state", "backend", "trials",
              "GPU-hours", "best");
  for (const auto& s : sweeps) std::printf("%s\n", client::SweepLine(s).c_str());
}

void SweepCommands::Show() {
  auto c = Connect();
  auto sweep = OrExit(c->GetSweep(show_.sweep));
  auto trials = AllTrials(*c, show_.sweep);
  std::printf("%s", client::SweepHeader(sweep, trials).c_str());
  std::printf("source %s, algorithm %s, early stopping %s, backend %s, %lld at a time\n",
              sweep.source().c_str(), sweep.algorithm().c_str(), sweep.early_stopping().c_str(),
              sweep.backend().c_str(), static_cast<long long>(sweep.max_concurrent()));
  std::printf("defaults: version %d%s\n", sweep.defaults_version(),
              sweep.hpod_version().empty()
                  ? ""
                  : (" (submitted to hpod " + sweep.hpod_version() + ")").c_str());
  for (const std::string& w : sweep.stored_warnings()) {
    std::printf("runs as stored; this hpod would refuse: %s\n", w.c_str());
  }
  if (!sweep.algorithm_choice().empty()) {
    std::printf("algorithm auto: %s\n", sweep.algorithm_choice().c_str());
  }
  if (!sweep.early_stopping_choice().empty()) {
    std::printf("early stopping auto: %s\n", sweep.early_stopping_choice().c_str());
  }
  std::printf("%s\n", client::GpuHoursText(sweep).c_str());
  if (std::string q = client::QuarantineText(sweep); !q.empty()) std::printf("%s\n", q.c_str());
  // The plan counts configurations run; a retry of a lost trial is the same configuration.
  size_t configurations = static_cast<size_t>(std::count_if(
      trials.begin(), trials.end(), [](const v1::Trial& t) { return t.retry_of() == 0; }));
  if (std::string p = client::PlanVsUsed(sweep, configurations); !p.empty()) {
    std::printf("%s\n", p.c_str());
  }
  if (show_.spec) std::printf("\n%s", sweep.spec_yaml().c_str());
}

void SweepCommands::Cancel() {
  auto c = Connect();
  auto sweep = c->Cancel(cancel_.sweep);
  if (!sweep.ok()) {
    rc_ = Fail(sweep.status());
    return;
  }
  if (!cancel_.no_wait && !v1::IsFinal(sweep->state())) {
    // Its trials get the grace period to stop; the stream says when the last one did.
    sweep = FollowUntilEnded(c, cancel_.sweep, absl::InfiniteFuture(), nullptr);
    if (!sweep.ok()) {
      rc_ = Fail(sweep.status());
      return;
    }
  }
  std::printf("sweep %lld %s\n", static_cast<long long>(cancel_.sweep),
              v1::IsFinal(sweep->state()) ? v1::StateName(sweep->state()).c_str() : "canceling");
}

void SweepCommands::PauseOrResume(bool pause) {
  int64_t id = pause ? pause_.sweep : resume_.sweep;
  auto c = Connect();
  auto sweep = pause ? c->Pause(id) : c->Resume(id);
  if (!sweep.ok()) {
    rc_ = Fail(sweep.status());
    return;
  }
  std::printf("sweep %lld %s\n", static_cast<long long>(id), v1::StateName(sweep->state()).c_str());
}

}  // namespace hpo::client::cli
