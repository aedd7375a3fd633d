// What a parsed sweep spec says: a trial's argv and resources, the sweep's trial limit and its
// summary. The parsing is in sweep_spec.cc.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "algorithms/auto_sampler.h"
#include "algorithms/auto_stopper.h"
#include "common/shell_quote.h"
#include "server/spec/sweep_spec.h"
#include "slurm_backend/slurm_placement.h"

namespace hpo::server {

std::vector<std::string> SweepSpec::RenderCommand(const algorithms::Params& params,
                                                  int64_t trial_id, int64_t trial_number,
                                                  int64_t sweep_id, const std::string& trial_dir,
                                                  const std::string& checkpoint_in) const {
  auto lookup = [&](const std::string& key) -> std::string {
    if (key == "trial_id") return std::to_string(trial_id);
    if (key == "trial_number") return std::to_string(trial_number);
    if (key == "sweep_id") return std::to_string(sweep_id);
    if (key == "trial_dir") return trial_dir;
    if (key == "checkpoint_in") return checkpoint_in;
    if (key == "checkpoint_out") return trial_dir + "/checkpoint";
    auto it = params.find(key);
    return it == params.end() ? "" : algorithms::FormatValue(it->second);
  };
  auto render = [&](const std::string& text, bool quote) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      char c = text[i];
      if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
        out += c;
        ++i;
      } else if (c == '{') {
        size_t end = text.find('}', i);
        std::string v = lookup(text.substr(i + 1, end - i - 1));
        out += quote ? ShellQuote(v) : v;
        i = end;
      } else {
        out += c;
      }
    }
    return out;
  };
  std::vector<std::string> argv;
  if (command_is_shell) {
    std::string line = render(command[0], true);
    if (pass_flags) {
      for (const auto& [k, v] : params)
        line += " " + ShellQuote("--" + k + "=" + algorithms::FormatValue(v));
    }
    return {"/bin/sh", "-c", line};
  }
  for (const auto& arg : command) argv.push_back(render(arg, false));
  if (pass_flags) {
    for (const auto& [k, v] : params) argv.push_back("--" + k + "=" + algorithms::FormatValue(v));
  }
  return argv;
}

int64_t SweepSpec::TrialLimit(const algorithms::Sampler& sampler) const {
  std::optional<int64_t> cap = sampler.MaxTrials(space);
  if (budget.max_trials > 0 && cap) return std::min(budget.max_trials, *cap);
  if (budget.max_trials > 0) return budget.max_trials;
  return cap.value_or(0);
}

std::string SweepSpec::Summary(const algorithms::Sampler& sampler) const {
  std::string out = absl::StrCat("name: ", name.empty() ? "(unnamed)" : name, "\n");
  absl::StrAppend(&out, "parameters: ", space.params.size(), " (");
  std::vector<std::string> names;
  for (const auto& p : space.params) names.push_back(p.name);
  absl::StrAppend(&out, absl::StrJoin(names, ", "), ")\n");
  if (objectives.size() > 1) {
    std::vector<std::string> parts;
    for (const Objective& o : objectives) {
      parts.push_back(absl::StrCat(
          o.direction == algorithms::Direction::kMinimize ? "minimize " : "maximize ", o.metric));
    }
    absl::StrAppend(&out, "objectives: ", absl::StrJoin(parts, ", "),
                    " (last values; the Pareto front)");
  } else {
    absl::StrAppend(
        &out, "objective: ",
        objective.direction == algorithms::Direction::kMinimize ? "minimize " : "maximize ",
        objective.metric, objective.use_best ? " (best value)" : " (last value)");
  }
  if (objective.goal) absl::StrAppend(&out, ", goal ", *objective.goal);
  if (!constraints.empty()) {
    std::vector<std::string> parts;
    for (const Constraint& c : constraints) parts.push_back(c.Text());
    absl::StrAppend(&out, "\nconstraints: ", absl::StrJoin(parts, ", "),
                    " (a trial that misses one ranks after every one that meets them)");
  }
  absl::StrAppend(&out, "\nalgorithm: ", sampler.Name());
  if (const auto* chooser = dynamic_cast<const algorithms::AutoSampler*>(&sampler)) {
    absl::StrAppend(&out, " (", chooser->choice().spec.name, ": ", chooser->choice().why, ")");
  }
  if (auto cap = sampler.MaxTrials(space)) {
    absl::StrAppend(&out, " (", *cap, " grid points");
    if (budget.max_trials > 0 && budget.max_trials < *cap) {
      absl::StrAppend(&out, "; max_trials ", budget.max_trials, " runs only the first ",
                      budget.max_trials);
    }
    absl::StrAppend(&out, ")");
  }
  absl::StrAppend(&out, "\nearly stopping: ", early_stopping.name);
  if (early_stopping.name == "auto") {
    algorithms::AutoStopper chooser(early_stopping,
                                    Pareto() ? Directions() : std::vector<algorithms::Direction>{});
    absl::StrAppend(&out, " (", chooser.Choice(), ")");
  } else if (Pareto() && early_stopping.name != "none") {
    absl::StrAppend(&out, " (multi-objective: ranked by Pareto front, then epsilon-net)");
  }
  int64_t limit = TrialLimit(sampler);
  absl::StrAppend(&out, "\ntrials: ", limit > 0 ? std::to_string(limit) : "until wall_time", ", ",
                  budget.max_concurrent, " at a time");
  if (budget.wall_time)
    absl::StrAppend(&out, ", wall time ", absl::FormatDuration(*budget.wall_time));
  if (budget.max_trial_steps > 0)
    absl::StrAppend(&out, ", each stopped at step ", budget.max_trial_steps);
  std::string gpus = gpus_param.empty() ? std::to_string(resources.gpus)
                                        : absl::StrCat(absl::StrJoin(gpu_options, "/"),
                                                       " (parameter ", gpus_param, ")");
  absl::StrAppend(&out, "\nresources per trial: ", gpus, " GPU(s) per node, ", resources.cpus,
                  " CPU(s) per task");
  if (resources.nodes > 1 || resources.tasks_per_node > 1) {
    absl::StrAppend(&out, ", ", resources.nodes, " node(s) x ", resources.tasks_per_node,
                    " task(s)");
  }
  if (resources.time_limit > absl::ZeroDuration()) {
    absl::StrAppend(&out, ", at most ", absl::FormatDuration(resources.time_limit), " each");
  }
  if (checkpoint.resumable) {
    const char* sig = sigabbrev_np(checkpoint.signal);
    absl::StrAppend(&out, "\nresumable: SIG", sig != nullptr ? sig : "?", " ",
                    absl::FormatDuration(checkpoint.grace),
                    " before an allocation or job ends; continued from {checkpoint_in} up to ",
                    checkpoint.max_segments, " segments");
  }
  if (health.mode != Health::Mode::kNone) {
    absl::StrAppend(&out, "\nhang watchdog: a trial ",
                    health.mode == Health::Mode::kFixed
                        ? absl::StrCat("with no report for ", absl::FormatDuration(health.timeout))
                        : absl::StrCat("silent for ", health.factor,
                                       "x its usual interval between reports (at least ",
                                       absl::FormatDuration(health.floor), ")"));
    if (health.signal != 0) {
      const char* sig = sigabbrev_np(health.signal);
      absl::StrAppend(&out, " gets SIG", sig != nullptr ? sig : "?", ", is stopped ",
                      absl::FormatDuration(health.grace), " later");
    } else {
      absl::StrAppend(&out, " is stopped");
    }
    absl::StrAppend(
        &out, checkpoint.resumable ? " and continues from its checkpoint" : " and is retried");
  }
  if (health.fail_fast > 0) {
    absl::StrAppend(&out, "\nfail fast: paused if its first ", health.fail_fast,
                    " trials to end all fail within ",
                    absl::FormatDuration(health.fail_fast_within), " the same way");
  }
  const slurm::SlurmPlacement& on_slurm = slurm::SlurmOf(placement);
  if (on_slurm.mode == "steps") {
    const slurm::AllocationShape& a = on_slurm.allocation;
    absl::StrAppend(&out, "\nslurm steps mode (with --backend slurm): up to ", a.max,
                    " allocation(s) of ", a.nodes, " node(s) x ", a.gpus_per_node, " GPU(s), ",
                    a.cpus_per_node, " CPU(s)");
  } else {
    absl::StrAppend(&out, "\nslurm jobs mode (with --backend slurm): one batch job per trial");
  }
  absl::StrAppend(&out, "\nworkdir: ", workdir, "\n");
  return out;
}

backend::Resources SweepSpec::TrialResources(const algorithms::Params& params) const {
  backend::Resources r = resources;
  if (!gpus_param.empty()) {
    auto it = params.find(gpus_param);
    if (it != params.end()) {
      if (std::optional<double> v = algorithms::NumericValue(it->second))
        r.gpus = static_cast<int>(*v);
    }
  }
  return r;
}

backend::Resources SweepSpec::MinResources() const {
  backend::Resources r = resources;
  r.gpus = gpu_options.empty() ? resources.gpus : gpu_options.front();
  return r;
}

backend::Resources SweepSpec::MaxResources() const {
  backend::Resources r = resources;
  r.gpus = gpu_options.empty() ? resources.gpus : gpu_options.back();
  return r;
}

}  // namespace hpo::server
