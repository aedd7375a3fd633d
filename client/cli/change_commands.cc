#include "client/cli/change_commands.h"

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/cli/cli.h"
#include "common/duration.h"
#include "hpo/v1/states.h"

namespace hpo::client::cli {

namespace {

// "N" (set) or "+N" (add) as a positive number; false when it is neither.
template <typename T>
bool SetOrAdd(const std::string& text, T& set, T& add) {
  bool plus = !text.empty() && text[0] == '+';
  T value{};
  bool ok;
  if constexpr (std::is_integral_v<T>) {
    int64_t v = 0;
    ok = absl::SimpleAtoi(plus ? text.substr(1) : text, &v);
    value = static_cast<T>(v);
  } else {
    ok = absl::SimpleAtod(plus ? text.substr(1) : text, &value);
  }
  if (!ok || !(value > 0)) return false;
  (plus ? add : set) = value;
  return true;
}

}  // namespace

ChangeCommands::ChangeCommands(CLI::App& app, int& rc) : rc_(rc) {
  CLI::App* extend = app.add_subcommand(
      "extend",
      "give a sweep more budget; one that ran out (COMPLETED, TIMED_OUT) reopens and its search "
      "goes on as if the budget had been larger from the start");
  extend->add_option("sweep", extend_.sweep, "sweep id")->required();
  extend->add_option("--trials", extend_.trials, "N: the new number of trials; +N: N more");
  extend->add_option("--wall-time", extend_.wall_time,
                     "D: the sweep may run D more from now (90s, 15m, 2h, 1d)");
  extend->add_option("--concurrent", extend_.concurrent, "N: trials at once from now on");
  extend->add_option("--gpu-hours", extend_.gpu_hours, "X: the new GPU-hour budget; +X: X more");
  extend->add_option("--node-hours", extend_.node_hours, "X: the new node-hour budget; +X: X more");
  extend->callback([this] { Extend(); });

  CLI::App* enqueue = app.add_subcommand(
      "enqueue",
      "run a given configuration before anything the sampler proposes; it counts toward "
      "budget.max_trials (raised when needed), and a sweep that ran out of trials reopens");
  enqueue->add_option("sweep", enqueue_.sweep, "sweep id")->required();
  enqueue
      ->add_option("values", enqueue_.values,
                   "name=value for every parameter (a fixed one may be left out)")
      ->required();
  enqueue->callback([this] { Enqueue(); });

  CLI::App* rm = app.add_subcommand(
      "rm", "remove an ended sweep: its trials, reports and events, and its trial directories");
  rm->add_option("sweep", rm_.sweep, "sweep id")->required();
  rm->add_flag("--yes,-y", rm_.yes, "do not ask for a confirmation (for scripts)");
  rm->callback([this] { Remove(); });
}

void ChangeCommands::Enqueue() {
  v1::EnqueueRequest req;
  req.set_sweep_id(enqueue_.sweep);
  v1::Configuration* point = req.add_points();
  for (const std::string& v : enqueue_.values) {
    size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "hpo enqueue: '%s': give name=value\n", v.c_str());
      rc_ = kExitUsage;
      return;
    }
    std::string name = v.substr(0, eq);
    if (point->values().count(name)) {
      std::fprintf(stderr, "hpo enqueue: %s is given twice\n", name.c_str());
      rc_ = kExitUsage;
      return;
    }
    (*point->mutable_values())[name] = v.substr(eq + 1);
  }
  auto c = Connect();
  absl::StatusOr<v1::Sweep> sweep = c->Enqueue(req);
  if (!sweep.ok()) {
    rc_ = Fail(sweep.status());
    return;
  }
  std::printf("sweep %lld %s: %s\n", static_cast<long long>(sweep->id()),
              v1::StateName(sweep->state()).c_str(), sweep->message().c_str());
}

void ChangeCommands::Remove() {
  auto c = Connect();
  v1::Sweep sweep = OrExit(c->GetSweep(rm_.sweep));
  if (!v1::IsFinal(sweep.state())) {  // the daemon refuses it too; say so before asking
    rc_ = Fail(absl::FailedPreconditionError(
        absl::StrCat("sweep ", rm_.sweep, " is ", v1::StateName(sweep.state()),
                     "; only an ended sweep can be removed (hpo cancel ", rm_.sweep, " first)")));
    return;
  }
  if (!rm_.yes) {
    int64_t trials = 0;
    for (const auto& [state, n] : sweep.trial_counts()) trials += n;
    std::fprintf(stderr,
                 "remove sweep %lld '%s' (%s, %lld trial(s)) and its trial directories? [y/N] ",
                 static_cast<long long>(sweep.id()), sweep.name().c_str(),
                 v1::StateName(sweep.state()).c_str(), static_cast<long long>(trials));
    char answer[16] = {0};
    if (std::fgets(answer, sizeof answer, stdin) == nullptr ||
        (answer[0] != 'y' && answer[0] != 'Y')) {
      std::fprintf(stderr, "\nnot removed (answer y, or give --yes)\n");
      rc_ = 1;
      return;
    }
  }
  absl::StatusOr<std::vector<std::string>> dirs = c->Remove(rm_.sweep);
  if (!dirs.ok()) {
    rc_ = Fail(dirs.status());
    return;
  }
  std::printf("sweep %lld removed\n", static_cast<long long>(rm_.sweep));
}

void ChangeCommands::Extend() {
  v1::ExtendSweepRequest req;
  req.set_sweep_id(extend_.sweep);
  auto usage = [&](const std::string& what) {
    std::fprintf(stderr, "hpo extend: %s\n", what.c_str());
    rc_ = kExitUsage;
  };
  if (!extend_.trials.empty()) {
    int64_t set = 0, add = 0;
    if (!SetOrAdd(extend_.trials, set, add)) {
      return usage("--trials " + extend_.trials + ": give a number of trials N or +N, above 0");
    }
    req.set_max_trials(set);
    req.set_add_trials(add);
  }
  if (!extend_.wall_time.empty()) {
    absl::StatusOr<absl::Duration> d = ParseDuration(extend_.wall_time);
    if (!d.ok() || *d <= absl::ZeroDuration()) {
      return usage("--wall-time " + extend_.wall_time + ": give a duration above 0 (90s, 2h)");
    }
    req.set_wall_time_seconds(absl::ToDoubleSeconds(*d));
  }
  if (extend_.concurrent < 0) return usage("--concurrent: give a number above 0");
  req.set_max_concurrent(extend_.concurrent);
  // --gpu-hours, --node-hours: X or +X, into the request's pair of fields.
  auto hours = [&](const std::string& text, const char* flag, const char* unit, auto set_to,
                   auto add_to) {
    double set = 0, add = 0;
    if (text.empty()) return true;
    if (!SetOrAdd(text, set, add)) {
      usage(absl::StrCat(flag, " ", text, ": give ", unit, " X or +X, above 0"));
      return false;
    }
    (req.*set_to)(set);
    (req.*add_to)(add);
    return true;
  };
  if (!hours(extend_.gpu_hours, "--gpu-hours", "GPU-hours", &v1::ExtendSweepRequest::set_gpu_hours,
             &v1::ExtendSweepRequest::set_add_gpu_hours) ||
      !hours(extend_.node_hours, "--node-hours", "node-hours",
             &v1::ExtendSweepRequest::set_node_hours,
             &v1::ExtendSweepRequest::set_add_node_hours)) {
    return;
  }
  auto c = Connect();
  absl::StatusOr<v1::Sweep> sweep = c->Extend(req);
  if (!sweep.ok()) {
    rc_ = Fail(sweep.status());
    return;
  }
  std::printf("sweep %lld %s: %s (%lld trial(s) max, %lld at a time)\n",
              static_cast<long long>(sweep->id()), v1::StateName(sweep->state()).c_str(),
              sweep->message().c_str(), static_cast<long long>(sweep->max_trials()),
              static_cast<long long>(sweep->max_concurrent()));
}

}  // namespace hpo::client::cli
