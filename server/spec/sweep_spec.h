#pragma once
// SweepSpec: a sweep file (YAML) parsed and validated.
//
// ParseSweepSpec never throws: every problem becomes one line "file:line:column: what is wrong"
// in the result's errors, and the spec is set only when there are none. The grammar is
// documented in docs/sweep-spec.md. Thread-compatible.

#include <csignal>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "algorithms/sampler.h"
#include "algorithms/search_space.h"
#include "algorithms/stopper.h"
#include "backend/resources.h"
#include "common/fom_regex.h"

namespace hpo::server {

struct Objective {
  std::string metric;
  algorithms::Direction direction = algorithms::Direction::kMinimize;
  std::optional<double> goal;  // the sweep ends GOAL_REACHED when a trial reaches it
  bool use_best = false;       // false: a trial's objective is its last value; true: its best
};

// Metrics hpod measures itself, for objectives and constraints: named under "hpo.", which no
// report may use. A trial's running time over its segments, in seconds, and its GPU-hours (its
// GPUs times that time). A finished trial has them among its last metrics.
inline constexpr char kRuntimeMetric[] = "hpo.runtime_s";
inline constexpr char kGpuHoursMetric[] = "hpo.gpu_hours";
inline constexpr char kMeasuredPrefix[] = "hpo.";
bool IsMeasuredMetric(const std::string& metric);

// One line of `constraints:` ("latency_ms <= 20"): a trial that misses it is infeasible.
struct Constraint {
  std::string metric;
  bool at_most = true;  // `<=`; false: `>=`
  double bound = 0;
  // How far `value` misses the bound; 0 when it meets it.
  double Violation(double value) const;
  std::string Text() const;  // "latency_ms <= 20"
};

struct Budget {
  int64_t max_trials = 0;  // 0: the sampler's capacity (grid) — random needs a bound
  int64_t max_concurrent = 1;
  int64_t max_failed = 10;  // the sweep ends FAILED when this many trials failed; 0: never
  std::optional<absl::Duration> wall_time;
  // No trial starts once the sweep's trials used this many GPU-hours (GPUs held times running
  // time, over segments and retries); the running ones finish.
  std::optional<double> gpu_hours;
  // ... and node-hours (nodes held times time held): see server/core/usage.h for what is counted.
  std::optional<double> node_hours;
  // A trial is stopped (STOPPED) once it reports this step; 0: never. A pilot's trials run a few
  // steps this way (hpo plan --pilot).
  int64_t max_trial_steps = 0;
};

// The `checkpoint:` section: the sweep's trials are resumable. A trial an interruption takes (a
// time limit, a preemption, a node failure) continues from its checkpoint as its next segment:
// the same trial, id, curve and early-stopping rung.
struct Checkpointing {
  bool resumable = false;  // the section is there
  int signal = SIGUSR1;    // what tells a trial to checkpoint and exit
  // How long before its allocation or job ends a trial gets the signal: what it needs to write
  // its checkpoint and exit.
  absl::Duration grace = absl::Minutes(2);
  int max_segments = 100;  // a trial interrupted more often than this ends LOST
};

// The hang watchdog (`health:`): a running trial that has made no report for its timeout is
// caught. It gets `signal` first (when set: a trainer may dump its stacks), is stopped `grace`
// later, and its segment is interrupted as hung: it continues from its checkpoint when the sweep
// is resumable, else it is retried; either way it does not count toward budget.max_failed.
struct Health {
  enum class Mode { kNone, kFixed, kAuto };
  Mode mode = Mode::kAuto;
  absl::Duration timeout = absl::ZeroDuration();  // kFixed
  // kAuto: this many times the median interval between the trial's own reports, and never less
  // than `floor`. A trial with fewer than two reports is not watched (its first report may come
  // after a long setup); resources.time_limit still bounds it.
  double factor = 10;
  absl::Duration floor = absl::Minutes(10);
  int signal = 0;  // 0: none, straight to the stop
  absl::Duration grace = absl::Seconds(30);
  // Fail-fast: when the sweep's first `fail_fast` trials to end all failed within
  // `fail_fast_within` of their start, the same way (exit code or signal, and the last line of
  // their stderr), the sweep is paused with that line. 0: off.
  int fail_fast = 3;
  absl::Duration fail_fast_within = absl::Minutes(1);
  // How long a trial whose reports came `median` apart (nullopt: fewer than two reports) may stay
  // silent; nullopt: it is not watched.
  std::optional<absl::Duration> TimeoutFor(std::optional<absl::Duration> median) const {
    if (mode == Mode::kFixed) return timeout;
    if (mode == Mode::kNone || !median) return std::nullopt;
    return std::max(floor, *median * factor);
  }
};

// Which ends of a trial are the infrastructure's rather than the configuration's (`failures:`):
// a trial that exits non-zero and matches a rule is LOST (retried elsewhere, or continued from
// its checkpoint) instead of FAILED, and does not count toward budget.max_failed.
struct FailureRule {
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string stderr_pattern;  // a regular expression (ECMAScript) searched in its stderr's end
  std::string Describe() const;
};
struct FailureRules {
  // Read before `rules`: the ends of a GPU or its fabric going bad (DefaultInfrastructureRules).
  bool defaults = true;
  std::vector<FailureRule> rules;
  // A node on which this many of the sweep's trials failed by the infrastructure's fault (a rule
  // matched) is quarantined: the sweep places nothing more there until the user allows it again
  // (`hpo nodes SWEEP --allow NODE`). 0: never.
  int quarantine_after = 2;
  // Never more than this share of the nodes the sweep's trials ran on is quarantined at once (a
  // fault that follows every node is not the nodes'); 1: no cap.
  double quarantine_max_share = 0.5;
  // A quarantine ends by itself after this long (the node may have been repaired); 0: only
  // `hpo nodes --allow` ends it.
  absl::Duration quarantine_for = absl::Hours(1);
  // The sweep pauses at every this many trials it lost to the infrastructure (failures rules,
  // hangs): a cluster that fails everything is not retried without end. 0: never.
  int max_infrastructure = 20;
};
// The built-in rules: an uncorrectable ECC error, a GPU fallen off the bus, NCCL's system and
// remote errors, CUDA's device-unavailable and unknown errors.
const std::vector<FailureRule>& DefaultInfrastructureRules();

// The `plan:` section: what an estimate of the sweep's cost cannot know from its schedule
// (server/core/estimate.h).
struct PlanInputs {
  int64_t steps = 0;  // steps a trial reports when nothing stops it; 0: unknown
  std::optional<absl::Duration> step_time;  // the time of one step
  int64_t like = 0;                         // an earlier sweep whose trials say both (0: none)
};

// The `pilot:` section, which `hpo plan --pilot` writes into the pilot it runs (PilotYaml): its
// trials from number `full_trials` on are stopped (STOPPED) once they report step `steps`; the
// first `full_trials` run to their end (or budget.max_trial_steps), to learn a trial's length.
struct PilotRun {
  int64_t steps = 0;  // 0: no section
  int64_t full_trials = 0;
  // Whether trial `number` is one of the short ones, stopped at `steps`.
  bool Short(int64_t number) const { return steps > 0 && number >= full_trials; }
};

struct SweepSpec {
  std::string name;
  std::string source;    // file name, for messages
  std::string base_dir;  // absolute; relative paths resolve against it
  algorithms::SearchSpace space;
  // The objective: with `objectives:`, the first of them (what single-objective parts read:
  // the curves, the watch table's best column).
  Objective objective;
  std::vector<Objective> objectives;  // every objective, in the file's order (one or more)
  std::vector<Constraint> constraints;
  std::vector<std::string> command;  // argv template, or one shell line when command_is_shell
  bool command_is_shell = false;
  bool pass_flags = false;  // append --name=value for every parameter
  std::map<std::string, std::string> env;
  std::string workdir;  // absolute
  Budget budget;
  backend::Resources resources;  // per trial; gpus from gpus_param when that is set
  std::string gpus_param;        // `gpus: "{name}"`: each trial's GPU count is that parameter
  std::vector<int> gpu_options;  // the GPU counts a trial may ask for, ascending
  backend::Placement placement;  // the `slurm:` section
  algorithms::AlgorithmSpec algorithm;
  algorithms::StopperSpec early_stopping;
  uint64_t seed = 0;
  std::string fom_regex;  // for `hpo exec`; group 1 is the value
  absl::Duration stop_grace = absl::Seconds(10);
  int stop_signal = 15;  // SIGTERM; what a stopped trial gets before the grace period
  int max_retries = 2;   // retries of trials the infrastructure lost
  Checkpointing checkpoint;
  Health health;
  FailureRules failures;
  PlanInputs plan;
  PilotRun pilot;
  // The rule a trial that exited with `exit_code` / `term_signal` and wrote `stderr_tail` last
  // matches (its Describe()), or nullopt: a failure of the configuration. In a trial of several
  // tasks (MultiTask) a stderr pattern is looked for in the output of the task that failed
  // first (common/task_output.h), or in every task's when that is not known.
  std::optional<std::string> InfrastructureFailure(int exit_code, int term_signal,
                                                   const std::string& stderr_tail) const;
  // A trial runs more than one task (Slurm runs them with `srun --label`).
  bool MultiTask() const;
  // Configurations that run first (the file's `enqueue:`), in order; they count toward
  // budget.max_trials.
  std::vector<algorithms::Params> enqueue;
  // `warm_start: {sweep: ID}`: that sweep's completed trials feed this one's sampler (0: none).
  int64_t warm_start_sweep = 0;
  // `backend: external`: a trial asked for (`hpo ask`) and not heard from (a report, a tell)
  // for this long is LOST (`external: {timeout: D}`).
  absl::Duration external_timeout = absl::Minutes(10);

  // The argv of one trial: placeholders filled, flags appended.
  // {checkpoint_in} is `checkpoint_in` ("" for a trial that starts from scratch; its own
  // checkpoint for a resumed segment), {checkpoint_out} is <trial_dir>/checkpoint.
  std::vector<std::string> RenderCommand(const algorithms::Params& params, int64_t trial_id,
                                         int64_t trial_number, int64_t sweep_id,
                                         const std::string& trial_dir,
                                         const std::string& checkpoint_in = "") const;
  // The sweep ranks trials by constrained Pareto dominance: several objectives, or constraints.
  bool Pareto() const { return objectives.size() > 1 || !constraints.empty(); }
  // The direction of each objective.
  std::vector<algorithms::Direction> Directions() const;
  // Whether an objective or a constraint reads `metric`.
  bool Uses(const std::string& metric) const;
  // What one trial asks for, given its parameters.
  backend::Resources TrialResources(const algorithms::Params& params) const;
  // The smallest and the largest request a trial of this sweep may make.
  backend::Resources MinResources() const;
  backend::Resources MaxResources() const;
  // How many trials the sweep runs at most (0: unbounded until wall time).
  int64_t TrialLimit(const algorithms::Sampler& sampler) const;
  // A few lines describing the spec, for `hpo validate`.
  std::string Summary(const algorithms::Sampler& sampler) const;
};

// What a sweep file leaves out means: the defaults of one version of the sweep-file language,
// `auto`'s choices included. A sweep is stored with the version it was submitted under and runs
// with it from then on, after a restart and under every later release (docs/operations.md,
// "Upgrading"). A release that changes a default, or what `auto` chooses, adds a version and
// keeps the older ones.
struct SpecDefaults {
  int version = 1;
  std::string algorithm = "auto";       // `algorithm:` left out
  std::string early_stopping = "auto";  // `early_stopping:` left out
  int64_t max_concurrent = 1;           // budget.max_concurrent
  int64_t max_failed = 10;              // budget.max_failed
  absl::Duration stop_grace = absl::Seconds(10);
  int stop_signal = SIGTERM;
  int max_retries = 2;
  Checkpointing checkpoint;           // grace, max_segments and signal of a `checkpoint:` section
  Health health;                      // `health:`, as a whole and key by key
  bool failure_rules = true;          // failures.defaults: the built-in infrastructure rules
  int quarantine_after = 2;           // failures.quarantine_after
  double quarantine_max_share = 0.5;  // failures.quarantine_max_share
  absl::Duration quarantine_for = absl::Hours(1);  // failures.quarantine_for
  int max_infrastructure = 20;                     // failures.max_infrastructure
  absl::Duration external_timeout = absl::Minutes(10);
};
// Every version this hpod knows, oldest first; the last is what a new sweep is submitted under.
const std::vector<SpecDefaults>& SpecDefaultVersions();

struct ParseOptions {
  // The defaults to fill in (null: the newest of SpecDefaultVersions()).
  const SpecDefaults* defaults = nullptr;
  // For a stored sweep that an earlier release accepted: what this release refuses becomes a
  // warning (ParseResult::warnings) and is read as its default, and the spec is set whenever a
  // sampler can still be built for it.
  bool lenient = false;
};

struct ParseResult {
  std::optional<SweepSpec> spec;
  // The spec's sampler, built once while checking the spec; set with `spec`.
  std::unique_ptr<algorithms::Sampler> sampler;
  std::vector<std::string> errors;
  // ParseOptions::lenient: what this release would have refused, in the errors' form.
  std::vector<std::string> warnings;
};

inline constexpr size_t kMaxSpecBytes = 1 << 20;
inline constexpr size_t kMaxParameters = 256;

ParseResult ParseSweepSpec(const std::string& yaml, const std::string& source,
                           const std::string& base_dir, const ParseOptions& options = {});

// The pilot of the sweep file `yaml` (hpo plan --pilot): named NAME-pilot, `full` + `trials`
// random configurations of its space run at its concurrency (at most that many): the first
// `full` to their end (or the file's budget.max_trial_steps), to learn a trial's length, the
// other `trials` each stopped once it reports step `steps` (its `pilot:` section). Its early
// stopping, enqueued configurations, warm start, plan and other budgets are dropped, the rest
// (command, resources, placement) kept. Checks only the pilot's own bounds; the result is a
// sweep file to parse like any other.
absl::StatusOr<std::string> PilotYaml(const std::string& yaml, int64_t trials, int64_t steps,
                                      int64_t full = 0);

}  // namespace hpo::server
