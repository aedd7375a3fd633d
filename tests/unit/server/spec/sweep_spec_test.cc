#include "server/spec/sweep_spec.h"

#include <csignal>

#include "common/task_output.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "slurm_backend/slurm_placement.h"

namespace hpo::server {
namespace {

using ::testing::HasSubstr;

constexpr const char* kGood = R"(name: demo
command: [python3, train.py, "--lr={lr}", "--act={act}", "--dir={trial_dir}"]
parameters:
  lr: {type: float, low: 1.0e-4, high: 0.1, log: true}
  units: {type: int, low: 16, high: 128, step: 16}
  act: [relu, tanh]
  flag: {type: categorical, values: [true, false, "1"]}
  epochs: 10
objective: {metric: val_loss, direction: minimize, goal: 0.05, use: best}
env: {OMP_NUM_THREADS: "1"}
workdir: sub
budget: {max_trials: 30, max_concurrent: 4, max_failed: 3, wall_time: 2h}
resources: {gpus: 1, cpus: 2}
seed: 9
stop_grace: 30s
)";

TEST(SweepSpec, ParsesEverySection) {
  ParseResult r = ParseSweepSpec(kGood, "demo.yaml", "/base");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  const SweepSpec& s = *r.spec;
  EXPECT_EQ(s.name, "demo");
  ASSERT_EQ(s.space.params.size(), 5u);
  EXPECT_EQ(s.space.params[0].name, "lr");  // file order kept
  EXPECT_TRUE(s.space.params[0].log);
  EXPECT_EQ(*s.space.params[1].step, 16);
  EXPECT_EQ(s.space.params[3].choices[0], algorithms::ParamValue(true));
  EXPECT_EQ(s.space.params[3].choices[2],
            algorithms::ParamValue(std::string("1")));  // quoted stays a string
  EXPECT_EQ(s.space.params[4].type, algorithms::ParamType::kFixed);
  EXPECT_EQ(s.objective.metric, "val_loss");
  EXPECT_TRUE(s.objective.use_best);
  EXPECT_EQ(*s.objective.goal, 0.05);
  EXPECT_EQ(s.workdir, "/base/sub");
  EXPECT_EQ(s.budget.max_trials, 30);
  EXPECT_EQ(*s.budget.wall_time, absl::Hours(2));
  EXPECT_EQ(s.resources.gpus, 1);
  EXPECT_EQ(s.seed, 9u);
  EXPECT_EQ(s.stop_grace, absl::Seconds(30));
  EXPECT_EQ(s.env.at("OMP_NUM_THREADS"), "1");
}

TEST(SweepSpec, RendersPlaceholdersAndFlags) {
  SweepSpec s = *ParseSweepSpec(kGood, "demo.yaml", "/base").spec;
  algorithms::Params p = {{"lr", 0.001},
                          {"act", std::string("tanh")},
                          {"units", int64_t{32}},
                          {"flag", true},
                          {"epochs", int64_t{10}}};
  EXPECT_THAT(
      s.RenderCommand(p, 7, 3, 1, "/d/t3"),
      ::testing::ElementsAre("python3", "train.py", "--lr=0.001", "--act=tanh", "--dir=/d/t3"));
  s.pass_flags = true;
  auto argv = s.RenderCommand(p, 7, 3, 1, "/d/t3");
  EXPECT_EQ(argv.back(), "--units=32");
  ParseResult shell = ParseSweepSpec(R"(command: "run --name {act} --x {{literal}}"
parameters: {act: ["a b"]}
objective: {metric: m, direction: max}
budget: {max_trials: 1})",
                                     "s.yaml", "/");
  ASSERT_TRUE(shell.errors.empty()) << shell.errors.front();
  EXPECT_THAT(shell.spec->RenderCommand({{"act", std::string("a b")}}, 1, 0, 1, "/t"),
              ::testing::ElementsAre("/bin/sh", "-c", "run --name 'a b' --x {literal}"));
}

std::vector<std::string> Errors(const std::string& yaml) {
  return ParseSweepSpec(yaml, "bad.yaml", "/").errors;
}

TEST(SweepSpec, ErrorsNameFileLineColumn) {
  auto e = Errors(
      "parameters:\n  lr: {type: float, low: 1, high: 0}\nobjective: {metric: m, direction: "
      "max}\ncommand: x\nbudget: {max_trials: 2}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("bad.yaml:2:7:"));
  EXPECT_THAT(e[0], HasSubstr("low must not exceed high"));

  e = Errors("parameters:\n  lr: [1, 2\nobjective: x\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("bad.yaml:"));
  EXPECT_THAT(e[0], HasSubstr("YAML syntax error"));
}

TEST(SweepSpec, UnknownKeysSuggestTheNearOne) {
  auto e = Errors(R"(parameters: {x: [1, 2]}
objective: {metric: m, direction: max}
command: x
budget: {max_trial: 5}
)");
  ASSERT_FALSE(e.empty());
  EXPECT_THAT(
      e[0],
      HasSubstr("bad.yaml:4:10: unknown key 'max_trial' in budget (did you mean 'max_trials'?)"));
}

TEST(SweepSpec, CollectsSeveralErrors) {
  auto e = Errors(R"(parameters:
  x: {type: float, low: 0, high: one}
  y: {type: magic}
objective: {metric: m, direction: sideways}
command: [run, "{z}"]
budget: {max_concurrent: 0}
)");
  ASSERT_GE(e.size(), 5u);
  std::string all;
  for (auto& s : e) all += s + "\n";
  EXPECT_THAT(all, HasSubstr(":2:"));
  EXPECT_THAT(all, HasSubstr("must be a finite number"));
  EXPECT_THAT(all, HasSubstr("unknown type 'magic'"));
  EXPECT_THAT(all, HasSubstr("direction must be minimize or maximize"));
  EXPECT_THAT(all, HasSubstr("unknown placeholder {z}"));
  EXPECT_THAT(all, HasSubstr("max_concurrent must be between 1"));
}

TEST(SweepSpec, RandomNeedsABound) {
  auto e = Errors(
      "parameters: {x: {type: float, low: 0, high: 1}}\nobjective: {metric: m, direction: "
      "min}\ncommand: x\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("max_trials or budget.wall_time"));
  // A grid is bounded by itself.
  EXPECT_TRUE(Errors("parameters: {x: [1, 2]}\nobjective: {metric: m, direction: min}\ncommand: "
                     "x\nalgorithm: grid\n")
                  .empty());
}

TEST(SweepSpec, AKeyGivenTwiceIsAnError) {
  // A parameter given twice would be two parameters of one name.
  auto e = Errors(R"(parameters:
  lr: {type: float, low: 0.001, high: 1.0, log: true}
  hidden: [4, 8]
  lr: {type: float, low: 0.003, high: 1.0, log: true}
objective: {metric: m, direction: max}
command: x
budget: {max_trials: 5, max_trials: 6}
)");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_THAT(e[0], HasSubstr("bad.yaml:4:3: 'lr' is given twice (first on line 2)"));
  EXPECT_THAT(e[1], HasSubstr("bad.yaml:7:25: 'max_trials' is given twice (first on line 7)"));
  // At the top, and inside a list.
  e = Errors(
      "parameters: {x: [1, 2]}\nobjective: {metric: m, direction: max}\ncommand: x\n"
      "objective: {metric: n, direction: min}\nenqueue: [{x: 1, x: 2}]\n");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_THAT(e[0], HasSubstr("bad.yaml:4:1: 'objective' is given twice (first on line 2)"));
  EXPECT_THAT(e[1], HasSubstr("bad.yaml:5:18: 'x' is given twice (first on line 5)"));
  // The same value under an alias is not a key given twice.
  EXPECT_TRUE(Errors("parameters: {x: &v [1, 2], y: *v}\nobjective: {metric: m, direction: max}\n"
                     "command: x\nbudget: {max_trials: 5}\n")
                  .empty());
}

TEST(SweepSpec, RefusesEmptyAndHugeFiles) {
  EXPECT_THAT(Errors(""), ::testing::ElementsAre(HasSubstr("empty")));
  EXPECT_THAT(Errors(std::string(kMaxSpecBytes + 1, '#')),
              ::testing::ElementsAre(HasSubstr("bytes; at most")));
}

constexpr const char* kBase =
    "parameters: {g: [1, 2], x: {type: float, low: 0, high: 1}}\n"
    "objective: {metric: m, direction: min}\ncommand: x\n"
    "budget: {max_trials: 10, max_concurrent: 4}\n";

TEST(SweepSpec, GpusFromAParameter) {
  ParseResult r =
      ParseSweepSpec(std::string(kBase) + "resources: {gpus: \"{g}\", cpus: 2}\n", "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  const SweepSpec& s = *r.spec;
  EXPECT_EQ(s.gpus_param, "g");
  EXPECT_THAT(s.gpu_options, ::testing::ElementsAre(1, 2));
  EXPECT_EQ(s.MinResources().gpus, 1);
  EXPECT_EQ(s.MaxResources().gpus, 2);
  EXPECT_EQ(s.TrialResources({{"g", int64_t{2}}, {"x", 0.5}}).gpus, 2);
  EXPECT_EQ(s.TrialResources({{"g", int64_t{1}}, {"x", 0.5}}).cpus, 2);
  // Allocation defaults: the largest trial's GPUs; CPUs for the trials those GPUs hold.
  EXPECT_EQ(slurm::SlurmOf(s.placement).mode, "steps");
  EXPECT_EQ(slurm::SlurmOf(s.placement).allocation.gpus_per_node, 2);
  EXPECT_EQ(slurm::SlurmOf(s.placement).allocation.cpus_per_node, 2);

  auto e = Errors(std::string(kBase) + "resources: {gpus: \"{x}\"}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("5:19: resources gpus: parameter 'x' must be an int"));
  e = Errors(std::string(kBase) + "resources: {gpus: \"{nope}\"}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("no parameter 'nope'"));
}

TEST(SweepSpec, SlurmSectionAndStopSignal) {
  ParseResult r = ParseSweepSpec(
      std::string(kBase) +
          "resources: {gpus: \"{g}\"}\n"
          "stop_signal: SIGUSR1\n"
          "slurm:\n"
          "  partition: gpu\n"
          "  time_limit: 2h\n"
          "  exclusive: true\n"
          "  allocation: {nodes: 2, gpus_per_node: 4, memory: 64G, max: 3, idle_timeout: 5s}\n",
      "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.spec->placement.backend, "slurm") << "a slurm: section asks for Slurm";
  EXPECT_TRUE(r.spec->placement.InAllocations("slurm"));
  EXPECT_FALSE(r.spec->placement.InAllocations("local"));
  const slurm::SlurmPlacement& p = slurm::SlurmOf(r.spec->placement);
  EXPECT_EQ(r.spec->stop_signal, SIGUSR1);
  EXPECT_EQ(p.partition, "gpu");
  EXPECT_EQ(p.time_limit_minutes, 120);
  EXPECT_TRUE(p.exclusive);
  EXPECT_EQ(p.allocation.nodes, 2);
  EXPECT_EQ(p.allocation.gpus_per_node, 4);
  EXPECT_EQ(p.allocation.cpus_per_node, 4);  // 4 GPUs hold four 1-GPU trials of 1 CPU
  EXPECT_EQ(p.allocation.memory_mb, 64 * 1024);
  EXPECT_EQ(p.allocation.max, 3);
  EXPECT_EQ(p.allocation.idle_timeout, absl::Seconds(5));

  auto e = Errors(std::string(kBase) + "stop_signal: SIGNOPE\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("5:14: stop_signal must be a signal name"));
  e = Errors(std::string(kBase) +
             "resources: {gpus: 2}\nslurm:\n  allocation: {gpus_per_node: 1, memory: lots}\n");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_THAT(e[0], HasSubstr("slurm allocation memory must be a size"));
  EXPECT_THAT(
      e[1], HasSubstr("7:15: slurm allocation has 1 GPU(s) per node but a trial asks for up to 2"));
  e = Errors(std::string(kBase) + "slurm: {mode: step}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("slurm mode must be steps or jobs"));
  // jobs mode does not hold allocations, so their shape is not checked.
  EXPECT_TRUE(Errors(std::string(kBase) +
                     "resources: {gpus: 2}\nslurm: {mode: jobs, allocation: {gpus_per_node: 1}}\n")
                  .empty());
}

TEST(SweepSpec, Health) {
  // Watched by default, at the trial's own pace.
  ParseResult r = ParseSweepSpec(kBase, "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.spec->health.mode, Health::Mode::kAuto);
  EXPECT_EQ(r.spec->health.TimeoutFor(std::nullopt), std::nullopt) << "fewer than two reports";
  EXPECT_EQ(r.spec->health.TimeoutFor(absl::Seconds(10)), absl::Minutes(10)) << "the floor";
  EXPECT_EQ(r.spec->health.TimeoutFor(absl::Minutes(5)), absl::Minutes(50));
  r = ParseSweepSpec(
      std::string(kBase) + "health: {report_timeout: 20m, signal: SIGUSR1, grace: 45s}\n", "s.yaml",
      "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.spec->health.mode, Health::Mode::kFixed);
  EXPECT_EQ(r.spec->health.TimeoutFor(std::nullopt), absl::Minutes(20));
  EXPECT_EQ(r.spec->health.signal, SIGUSR1);
  EXPECT_EQ(r.spec->health.grace, absl::Seconds(45));
  r = ParseSweepSpec(std::string(kBase) + "health: {report_timeout: none}\n", "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.spec->health.TimeoutFor(absl::Seconds(1)), std::nullopt);

  auto e = Errors(std::string(kBase) +
                  "health: {report_timeout: soon, factor: 1, signal: KILL, stacks: yes}\n");
  ASSERT_EQ(e.size(), 4u);
  EXPECT_THAT(e[0], HasSubstr("5:57: unknown key 'stacks' in health"));
  EXPECT_THAT(e[1], HasSubstr("5:26: health report_timeout: 'soon' is not a duration"));
  EXPECT_THAT(e[2], HasSubstr("5:40: health factor must be between 2 and 1000"));
  EXPECT_THAT(e[3], HasSubstr("5:51: health signal must be a signal a trial can catch"));
}

// A trial of two tasks (srun --label): rank 1 raises, rank 0 then prints NCCL's "remote process
// exited". The rule speaks for the task srun says failed first; without srun's word, only for
// what every task says.
TEST(SweepSpec, InATrialOfSeveralTasksRulesReadTheTaskThatFailedFirst) {
  ParseResult r = ParseSweepSpec(std::string(kBase) + "resources: {nodes: 2}\n", "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  const SweepSpec& spec = *r.spec;
  ASSERT_TRUE(spec.MultiTask());
  const std::string raised =
      "1: Traceback (most recent call last):\n1: ValueError: bad lr\n"
      "0: RuntimeError: NCCL error: remote process exited or there was a network error\n"
      "srun: error: n2: task 1: Exited with exit code 1\n"
      "srun: error: n1: task 0: Killed\n";
  EXPECT_EQ(spec.InfrastructureFailure(1, 0, raised), std::nullopt) << "rank 1's own bug";
  TaskOutput out = SplitTaskOutput(raised);
  EXPECT_EQ(out.culprit, std::set<int>{1});
  EXPECT_EQ(out.culprit_node, "n2");
  const std::string ecc =
      "0: step 3\n1: CUDA error: uncorrectable ECC error encountered\n"
      "srun: error: n2: task 1: Exited with exit code 1\n";
  EXPECT_THAT(spec.InfrastructureFailure(1, 0, ecc).value_or(""), HasSubstr("ECC"))
      << "the failing rank's GPU";
  // Killed whole (no task's own end): a pattern only every task says.
  const std::string one = "0: NCCL error: unhandled system error\n1: ValueError: bad lr\n";
  EXPECT_EQ(spec.InfrastructureFailure(-1, 9, one), std::nullopt);
  const std::string all =
      "0: NCCL error: unhandled system error\n 1: NCCL error: unhandled system error\n";
  EXPECT_THAT(spec.InfrastructureFailure(-1, 9, all).value_or(""), HasSubstr("NCCL"));
  EXPECT_EQ(SplitTaskOutput("srun: error: n1: tasks 0,2-3: Exited with exit code 2\n").culprit,
            (std::set<int>{0, 2, 3}));
  EXPECT_EQ(StripTaskLabel(" 1: slurmstepd-n1: error: ***"), "slurmstepd-n1: error: ***");
  EXPECT_EQ(StripTaskLabel("srun: error: x"), "srun: error: x");
  // A trial of one task is read whole, numbers at the start of its lines or not.
  ParseResult single = ParseSweepSpec(kBase, "s.yaml", "/");
  ASSERT_TRUE(single.spec.has_value());
  EXPECT_THAT(single.spec->InfrastructureFailure(1, 0, "0: fine\n3: uncorrectable ECC error\n")
                  .value_or(""),
              HasSubstr("ECC"));
}

// A user's pattern is matched in time linear in the text: one that backtracking engines take
// exponential time over (here 2^40 ways to split the a's) answers at once, and forms that need
// backtracking are refused with the reason.
TEST(SweepSpec, PatternsUsersGiveCannotStallAMatch) {
  ParseResult r = ParseSweepSpec(std::string(kBase) +
                                     "failures: {defaults: false, infrastructure: "
                                     "[{stderr: '^(a+)+$'}]}\n"
                                     "fom_regex: 'loss=(\\d+\\.\\d+)$'\n",
                                 "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  const std::string evil = std::string(40, 'a') + "b";
  absl::Time start = absl::Now();
  EXPECT_EQ(r.spec->InfrastructureFailure(1, 0, evil), std::nullopt);
  EXPECT_EQ(r.spec->InfrastructureFailure(1, 0, std::string(40, 'a')), "stderr /^(a+)+$/");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(r.spec->fom_regex, "loss=(\\d+\\.\\d+)$");

  auto e = Errors(std::string(kBase) +
                  "failures: {infrastructure: [{stderr: '(a)\\1'}, {stderr: 'x(?=y)'}]}\n"
                  "fom_regex: 'FoM: \\d+'\n");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_THAT(e[0], HasSubstr("fom_regex needs a capture group"));
  EXPECT_THAT(e[1], HasSubstr("failures stderr is not a valid regular expression: invalid escape"));
  EXPECT_THAT(
      e[2], HasSubstr("failures stderr is not a valid regular expression: invalid perl operator"));
}

TEST(SweepSpec, FailureRulesTellTheInfrastructuresFailuresFromTheConfigurations) {
  ParseResult r = ParseSweepSpec(kBase, "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  const SweepSpec& plain = *r.spec;
  EXPECT_EQ(plain.failures.quarantine_after, 2) << "the default";
  EXPECT_EQ(plain.InfrastructureFailure(1, 0, "Traceback...\nValueError: bad lr\n"), std::nullopt);
  EXPECT_THAT(
      plain.InfrastructureFailure(1, 0, "step 3\nCUDA error: uncorrectable ECC error encountered\n")
          .value_or(""),
      HasSubstr("uncorrectable ECC error"));
  r = ParseSweepSpec(std::string(kBase) +
                         "failures:\n  defaults: false\n  quarantine_after: 0\n  infrastructure:\n"
                         "    - {exit_code: 75}\n    - {signal: SIGBUS}\n"
                         "    - {stderr: 'Lustre.*timed out', exit_code: 1}\n",
                     "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  const SweepSpec& own = *r.spec;
  EXPECT_EQ(own.failures.quarantine_after, 0) << "never";
  EXPECT_EQ(own.InfrastructureFailure(75, 0, ""), "exit code 75");
  EXPECT_EQ(own.InfrastructureFailure(-1, SIGBUS, ""), "signal SIGBUS");
  EXPECT_EQ(own.InfrastructureFailure(1, 0, "read: Lustre: request timed out\n"),
            "exit code 1, stderr /Lustre.*timed out/");
  EXPECT_EQ(own.InfrastructureFailure(2, 0, "read: Lustre: request timed out\n"), std::nullopt);
  EXPECT_EQ(own.InfrastructureFailure(1, 0, "uncorrectable ECC error"), std::nullopt)
      << "defaults off";

  auto e = Errors(std::string(kBase) +
                  "failures: {infrastructure: [{exit_code: 0}, {stderr: '('}, {}, {signal: NOPE}], "
                  "quarantine_after: -1}\n");
  ASSERT_EQ(e.size(), 5u);
  EXPECT_THAT(e[0], HasSubstr("failures quarantine_after must be between 0 and 1000"));
  EXPECT_THAT(e[1], HasSubstr("failures exit_code"));
  EXPECT_THAT(e[2], HasSubstr("failures stderr is not a valid regular expression"));
  EXPECT_THAT(e[3], HasSubstr("a failures rule needs exit_code, signal or stderr"));
  EXPECT_THAT(e[4], HasSubstr("failures signal must be a signal name"));

  EXPECT_EQ(plain.failures.quarantine_max_share, 0.5) << "the default";
  EXPECT_EQ(plain.failures.quarantine_for, absl::Hours(1));
  EXPECT_EQ(plain.failures.max_infrastructure, 20);
  r = ParseSweepSpec(std::string(kBase) +
                         "failures: {quarantine_max_share: 0.25, quarantine_for: 30m, "
                         "max_infrastructure: 5}\n",
                     "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.spec->failures.quarantine_max_share, 0.25);
  EXPECT_EQ(r.spec->failures.quarantine_for, absl::Minutes(30));
  EXPECT_EQ(r.spec->failures.max_infrastructure, 5);
  e = Errors(std::string(kBase) +
             "failures: {quarantine_max_share: 0, quarantine_for: soon, max_infrastructure: -1}\n");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_THAT(e[0], HasSubstr("failures quarantine_max_share must be above 0 and at most 1"));
  EXPECT_THAT(e[1], HasSubstr("failures quarantine_for"));
  EXPECT_THAT(e[2], HasSubstr("failures max_infrastructure must be between 0 and"));
}

TEST(SweepSpec, CheckpointAndTimeLimits) {
  ParseResult r = ParseSweepSpec(std::string(kBase) +
                                     "checkpoint: {signal: USR2, grace: 90s, max_segments: 7}\n"
                                     "resources: {time_limit: 61s}\n"
                                     "slurm: {time_limit: 1h}\n",
                                 "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_TRUE(r.spec->checkpoint.resumable);
  EXPECT_EQ(r.spec->checkpoint.signal, SIGUSR2);
  EXPECT_EQ(r.spec->checkpoint.grace, absl::Seconds(90));
  EXPECT_EQ(r.spec->checkpoint.max_segments, 7);
  EXPECT_EQ(r.spec->resources.time_limit, absl::Minutes(2));  // rounded up to minutes
  // An empty section takes the defaults; without one, trials are not resumable.
  r = ParseSweepSpec(std::string(kBase) + "checkpoint: {}\n", "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.spec->checkpoint.signal, SIGUSR1);
  EXPECT_EQ(r.spec->checkpoint.grace, absl::Minutes(2));
  EXPECT_FALSE(ParseSweepSpec(kBase, "s.yaml", "/").spec->checkpoint.resumable);

  auto e = Errors(std::string(kBase) + "checkpoint: {signal: KILL, grace: 0s, max_segments: 0}\n");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_THAT(e[0], HasSubstr("5:22: checkpoint signal must be a signal a trial can catch"));
  EXPECT_THAT(e[1], HasSubstr("5:35: checkpoint grace must be between 1s and 18h"));
  EXPECT_THAT(e[2], HasSubstr("5:53: checkpoint max_segments"));
  e = Errors(std::string(kBase) + "checkpoint: {grace: 2h}\nslurm: {time_limit: 1h}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("5:21: checkpoint grace (2h) must be shorter than the time limit"));
  e = Errors(std::string(kBase) + "resources: {time_limit: 2h}\nslurm: {time_limit: 1h}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("5:25: resources time_limit (2h) exceeds slurm time_limit (1h)"));
  e = Errors(std::string(kBase) +
             "resources: {time_limit: 30m}\nslurm: {mode: jobs, time_limit: 1h}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("6:33: in jobs mode a trial's job has one time limit"));
  e = Errors(std::string(kBase) + "resources: {time_limit: 20s}\ncheckpoint: [x]\n");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_THAT(e[0], HasSubstr("5:25: resources time_limit must be at least 1m"));
  EXPECT_THAT(e[1], HasSubstr("6:13: checkpoint must be a mapping"));
}

TEST(SweepSpec, ObjectivesAndConstraints) {
  const std::string base = "parameters: {x: [1, 2]}\ncommand: x\n";
  ParseResult r = ParseSweepSpec(base +
                                     "objectives:\n"
                                     "  - {metric: val_acc, direction: maximize}\n"
                                     "  - {metric: hpo.gpu_hours, direction: min}\n"
                                     "constraints: [\"latency_ms <= 20\", \"hpo.runtime_s>=1.5\"]\n"
                                     "algorithm: nsga2\nearly_stopping: asha\n"
                                     "budget: {max_trials: 10}\n",
                                 "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  const SweepSpec& spec = *r.spec;
  ASSERT_EQ(spec.objectives.size(), 2u);
  EXPECT_EQ(spec.objective.metric, "val_acc") << "the first, for single-objective parts";
  EXPECT_EQ(spec.objectives[1].metric, "hpo.gpu_hours");
  EXPECT_EQ(spec.objectives[1].direction, algorithms::Direction::kMinimize);
  ASSERT_EQ(spec.constraints.size(), 2u);
  EXPECT_EQ(spec.constraints[0].Text(), "latency_ms <= 20");
  EXPECT_FALSE(spec.constraints[1].at_most);
  EXPECT_EQ(spec.constraints[1].Violation(1.0), 0.5);
  EXPECT_EQ(spec.constraints[0].Violation(19), 0.0);
  EXPECT_TRUE(spec.Pareto());
  EXPECT_TRUE(spec.Uses("hpo.runtime_s"));
  EXPECT_EQ(r.sampler->Name(), "nsga2");
  EXPECT_EQ(spec.algorithm.nsga2_crossover_rate, 0.9);
  // One objective with a constraint is ranked by Pareto too.
  r = ParseSweepSpec(base +
                         "objective: {metric: m, direction: min}\nconstraints: [\"m >= 0\"]\n"
                         "algorithm: grid\n",
                     "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_TRUE(r.spec->Pareto());

  auto e = Errors(base +
                  "objective: {metric: m, direction: min}\n"
                  "objectives: [{metric: m, direction: min}]\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("4:13: give objective (one) or objectives (several), not both"));
  e = Errors(base +
             "objectives:\n  - {metric: a, direction: up}\n  - {metric: hpo.flops, direction: "
             "min}\n  - {metric: a, direction: max}\n  - {metric: b}\n");
  ASSERT_EQ(e.size(), 4u) << e[0];
  EXPECT_THAT(e[0],
              HasSubstr("4:28: objectives[1] direction must be minimize or maximize, not 'up'"));
  EXPECT_THAT(e[1], HasSubstr("5:14: objectives[2] metric 'hpo.flops': names under hpo. are the "
                              "metrics hpod measures: hpo.runtime_s, hpo.gpu_hours"));
  EXPECT_THAT(e[2], HasSubstr("6:14: objectives[3]: a twice"));
  EXPECT_THAT(e[3], HasSubstr("7:5: objectives[4] needs direction"));
  e = Errors(base + "objective: {metric: hpo.runtime_s, direction: min}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("3:21: objective metric 'hpo.runtime_s' is measured by hpod: it can "
                              "be one of several objectives"));
  e = Errors(base +
             "objectives: [{metric: a, direction: max}, {metric: b, direction: min}]\n"
             "constraints: [\"a < 3\", \"b <= x\", 7]\n");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_THAT(e[0], HasSubstr("4:15: constraints[1] 'a < 3' must read METRIC <= NUMBER"));
  EXPECT_THAT(e[1], HasSubstr("4:24: constraints[2]: 'x' is not a finite number"));
  EXPECT_THAT(e[2], HasSubstr("4:34: constraints[3] '7' must read"));
  e = Errors(base +
             "objectives: [{metric: a, direction: max}, {metric: b, direction: min}]\n"
             "algorithm: genetic\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("genetic ranks trials by one objective; with several objectives or "
                              "constraints use nsga2, tpe"));
  e = Errors(base +
             "objectives: [{metric: a, direction: max}, {metric: b, direction: min}]\n"
             "early_stopping: median\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("4:17: early_stopping median compares one objective"));
}

TEST(SweepSpec, GpuHourBudget) {
  ParseResult r = ParseSweepSpec(
      "parameters: {x: [1]}\nobjective: {metric: m, direction: min}\ncommand: x\n"
      "budget: {max_trials: 3, gpu_hours: 12.5}\nresources: {gpus: 1}\n",
      "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.spec->budget.gpu_hours, 12.5);
  auto e = Errors(
      "parameters: {x: [1]}\nobjective: {metric: m, direction: min}\ncommand: x\n"
      "budget: {max_trials: 3, gpu_hours: 0}\nresources: {gpus: 1}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("4:36: budget gpu_hours must be a number of GPU-hours above 0"));
  e = Errors(
      "parameters: {x: [1]}\nobjective: {metric: m, direction: min}\ncommand: x\n"
      "budget: {max_trials: 3, gpu_hours: 2}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("4:36: budget gpu_hours: the sweep's trials use no GPUs"));
  r = ParseSweepSpec(
      "parameters: {x: [1]}\nobjective: {metric: m, direction: min}\ncommand: x\n"
      "budget: {max_trials: 3, node_hours: 48}\n",
      "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.spec->budget.node_hours, 48);
  e = Errors(
      "parameters: {x: [1]}\nobjective: {metric: m, direction: min}\ncommand: x\n"
      "budget: {max_trials: 3, node_hours: -1}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("4:37: budget node_hours must be a number of node-hours above 0"));
  e = Errors(
      "parameters: {x: [1]}\nobjective: {metric: m, direction: min}\ncommand: x\n"
      "budget: {max_trials: 3, max_trial_steps: 0}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("4:42: budget max_trial_steps"));
}

TEST(SweepSpec, APilotIsTheSweepsSpaceAndCommandForAFewStepsOfAFewRandomTrials) {
  const std::string yaml =
      "name: big  # the sweep\n"
      "parameters: {lr: {type: float, low: 0.001, high: 1, log: true}, act: [relu, tanh]}\n"
      "objective: {metric: loss, direction: minimize}\n"
      "command: [python, train.py, --lr, '{lr}']\n"
      "algorithm: {name: tpe, startup_trials: 5}\n"
      "early_stopping: {name: asha, max_resource: 50}\n"
      "budget: {max_trials: 500, max_concurrent: 8, gpu_hours: 100}\n"
      "enqueue: [{lr: 0.01, act: relu}]\n"
      "plan: {steps: 50}\n"
      "resources: {gpus: 2}\n";
  absl::StatusOr<std::string> pilot = PilotYaml(yaml, 3, 5);
  ASSERT_TRUE(pilot.ok()) << pilot.status();
  ParseResult r = ParseSweepSpec(*pilot, "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front() << "\n" << *pilot;
  const SweepSpec& spec = *r.spec;
  EXPECT_EQ(spec.name, "big-pilot");
  EXPECT_EQ(spec.algorithm.name, "random");
  EXPECT_EQ(spec.early_stopping.name, "none");
  EXPECT_EQ(spec.budget.max_trials, 3);
  EXPECT_EQ(spec.budget.max_concurrent, 3);
  EXPECT_EQ(spec.budget.max_trial_steps, 0);
  EXPECT_EQ(spec.pilot.steps, 5);
  EXPECT_EQ(spec.pilot.full_trials, 0);
  EXPECT_TRUE(spec.pilot.Short(0));
  EXPECT_FALSE(spec.budget.gpu_hours.has_value());
  EXPECT_TRUE(spec.enqueue.empty());
  EXPECT_EQ(spec.plan.steps, 0);
  EXPECT_EQ(spec.resources.gpus, 2);
  EXPECT_EQ(spec.command, (std::vector<std::string>{"python", "train.py", "--lr", "{lr}"}));
  EXPECT_EQ(spec.space.params.size(), 2u);

  EXPECT_THAT(std::string(PilotYaml(yaml, 0, 5).status().message()), HasSubstr("1 to 64 trials"));
  EXPECT_THAT(std::string(PilotYaml(yaml, 2, 1).status().message()), HasSubstr("at least 2"));
  EXPECT_FALSE(PilotYaml("[1, 2]", 2, 5).ok());
  EXPECT_THAT(std::string(PilotYaml(yaml, 2, 5, 5).status().message()),
              HasSubstr("0 to 4 trials to their end"));
}

// Where a trial's length is not known, the pilot's first trial runs to its end (or to the file's
// own budget.max_trial_steps), the others stop at the pilot's step.
TEST(SweepSpec, APilotCanRunItsFirstTrialToItsEnd) {
  const std::string yaml =
      "parameters: {lr: {type: float, low: 0.001, high: 1, log: true}}\n"
      "objective: {metric: loss, direction: minimize}\n"
      "command: [python, train.py, --lr, '{lr}']\n"
      "budget: {max_trials: 50, max_concurrent: 8, max_trial_steps: 300}\n";
  absl::StatusOr<std::string> pilot = PilotYaml(yaml, 2, 5, 1);
  ASSERT_TRUE(pilot.ok()) << pilot.status();
  ParseResult r = ParseSweepSpec(*pilot, "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front() << "\n" << *pilot;
  const SweepSpec& spec = *r.spec;
  EXPECT_EQ(spec.name, "pilot");
  EXPECT_EQ(spec.budget.max_trials, 3);
  EXPECT_EQ(spec.budget.max_concurrent, 3);
  EXPECT_EQ(spec.budget.max_trial_steps, 300);
  EXPECT_EQ(spec.pilot.steps, 5);
  EXPECT_EQ(spec.pilot.full_trials, 1);
  EXPECT_FALSE(spec.pilot.Short(0));
  EXPECT_TRUE(spec.pilot.Short(1));
  EXPECT_TRUE(spec.pilot.Short(2));
  EXPECT_FALSE(PilotRun{}.Short(0));  // no pilot section: nothing is short

  // The section as a file may give it, checked like the rest.
  const std::string head =
      "parameters: {x: [1, 2]}\nobjective: {metric: loss, direction: minimize}\ncommand: [t]\n";
  std::vector<std::string> e = ParseSweepSpec(head + "pilot: {steps: 1}\n", "s.yaml", "/").errors;
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("s.yaml:4:"));
  EXPECT_THAT(e[0], HasSubstr("pilot steps"));
  e = ParseSweepSpec(head + "pilot: {steps: 5, full_trials: 9}\n", "s.yaml", "/").errors;
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("pilot full_trials"));
  e = ParseSweepSpec(head + "pilot: {full_trials: 1}\n", "s.yaml", "/").errors;
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("pilot needs steps"));
  e = ParseSweepSpec(head + "pilot: {steps: 5, trials: 2}\n", "s.yaml", "/").errors;
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("trials"));
}

TEST(SweepSpec, EnqueuedConfigurationsAndTheBackend) {
  const std::string head =
      "parameters:\n  lr: {type: float, low: 0.001, high: 1, log: true}\n"
      "  n: {type: int, low: 1, high: 9, step: 2}\n  act: [relu, tanh]\n  seed: {type: fixed, "
      "value: 3}\n"
      "objective: {metric: m, direction: min}\ncommand: x\nbudget: {max_trials: 3}\n";
  ParseResult r = ParseSweepSpec(
      head + "enqueue:\n  - {lr: 0.01, n: 5, act: tanh}\nbackend: local\n", "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.spec->enqueue.size(), 1u);
  EXPECT_EQ(std::get<double>(r.spec->enqueue[0].at("lr")), 0.01);
  EXPECT_EQ(std::get<int64_t>(r.spec->enqueue[0].at("n")), 5);
  EXPECT_EQ(std::get<int64_t>(r.spec->enqueue[0].at("seed")), 3) << "a fixed one is filled in";
  EXPECT_EQ(r.spec->placement.backend, "local");
  // Each wrong entry is told at its line.
  auto e = Errors(head +
                  "enqueue:\n  - {lr: 0.01, n: 4, act: tanh}\n  - {lr: 2, n: 5, act: tanh}\n"
                  "  - {lr: 0.1, n: 5, act: gelu}\n  - {lr: 0.1, n: 5}\n  - {lr: 0.1, n: 5, act: "
                  "relu, x: 1}\n");
  ASSERT_EQ(e.size(), 5u);
  EXPECT_THAT(
      e[0],
      HasSubstr("10:5: enqueue: n=4 is outside the space (n is an int in [1, 9] with step 2)"));
  EXPECT_THAT(e[1], HasSubstr("11:5: enqueue: lr=2 is outside the space"));
  EXPECT_THAT(e[2], HasSubstr("12:5: enqueue: act=gelu is not one of its choices (relu, tanh)"));
  EXPECT_THAT(e[3], HasSubstr("13:5: enqueue: no value for parameter 'act'"));
  EXPECT_THAT(e[4], HasSubstr("14:5: enqueue: no parameter 'x' in the space"));
  e = Errors(head + "enqueue:\n" + std::string(4, ' ') + "- {lr: 0.1, n: 5, act: relu}\n" +
             "    - {lr: 0.1, n: 5, act: relu}\n    - {lr: 0.1, n: 5, act: relu}\n    - {lr: 0.1, "
             "n: 5, act: relu}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("enqueue: 4 configurations, more than budget.max_trials (3)"));
  // A slurm: section asks for Slurm unless the file says otherwise.
  r = ParseSweepSpec(head + "slurm: {partition: gpu}\n", "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.spec->placement.backend, "slurm");
  r = ParseSweepSpec(head + "slurm: {partition: gpu}\nbackend: local\n", "s.yaml", "/");
  EXPECT_EQ(r.spec->placement.backend, "local");
  r = ParseSweepSpec(head, "s.yaml", "/");
  EXPECT_EQ(r.spec->placement.backend, "") << "the daemon's default";
  e = Errors(head + "backend: cloud\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("9:10: backend must be local, slurm or external"));
}

TEST(SweepSpec, GeneticSettings) {
  ParseResult r = ParseSweepSpec(
      std::string(kBase) +
          "algorithm: {name: genetic, population: 12, tournament: 4, crossover_rate: 0.7,"
          " mutation_rate: 0.2, mutation_scale: 0.05, elitism: 1, demes: 3, migration_interval: "
          "5}\n",
      "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  const algorithms::AlgorithmSpec& a = r.spec->algorithm;
  EXPECT_EQ(a.name, "genetic");
  EXPECT_EQ(a.population, 12);
  EXPECT_EQ(a.tournament, 4);
  EXPECT_EQ(a.crossover_rate, 0.7);
  EXPECT_EQ(a.mutation_rate, 0.2);
  EXPECT_EQ(a.mutation_scale, 0.05);
  EXPECT_EQ(a.elitism, 1);
  EXPECT_EQ(a.demes, 3);
  EXPECT_EQ(a.migration_interval, 5);
  auto e = Errors(std::string(kBase) +
                  "algorithm: {name: genetic, population: 4, elitism: 4, mutation_rate: 2}\n");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_THAT(e[0], HasSubstr("5:70: algorithm mutation_rate must be between 0 and 1"));
  EXPECT_THAT(e[1], HasSubstr("algorithm elitism must be below population"));
}

TEST(SweepSpec, TpeAndAshaSettings) {
  ParseResult r = ParseSweepSpec(
      std::string(kBase) +
          "algorithm: {name: tpe, startup_trials: 5, multivariate: false}\n"
          "early_stopping: {name: asha, min_resource: 2, max_resource: 54, bootstrap: 5}\n",
      "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.spec->algorithm.startup_trials, 5);
  EXPECT_FALSE(r.spec->algorithm.tpe_multivariate);
  EXPECT_EQ(r.spec->early_stopping.bootstrap, 5);
  EXPECT_TRUE(ParseSweepSpec(std::string(kBase) + "algorithm: tpe\n", "s.yaml", "/")
                  .spec->algorithm.tpe_multivariate);
  auto e = Errors(
      std::string(kBase) +
      "algorithm: {name: tpe, multivariate: 3}\nearly_stopping: {name: asha, bootstrap: -1}\n");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_THAT(e[0], HasSubstr("5:"));
  EXPECT_THAT(e[0], HasSubstr("multivariate"));
  EXPECT_THAT(e[1], HasSubstr("6:"));
  EXPECT_THAT(e[1], HasSubstr("bootstrap"));
  r = ParseSweepSpec(
      std::string(kBase) + "early_stopping: {name: asha, max_resource: 60, min_correlation: 0.5}\n",
      "s.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.spec->early_stopping.min_correlation, 0.5);
  e = Errors(std::string(kBase) + "early_stopping: {name: asha, min_correlation: 0.5}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("5:47: early_stopping min_correlation needs max_resource"));
  e = Errors(std::string(kBase) +
             "early_stopping: {name: asha, max_resource: 9, min_correlation: 2}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("min_correlation must be between 0 and 1"));
}

}  // namespace
}  // namespace hpo::server

namespace hpo::server {
namespace {

// A file that names no algorithm and no early stopping gets auto for both, with what auto
// needs from the rest of the file; auto takes no settings of its own.
TEST(SweepSpec, AutoIsTheDefaultAndTakesNoSettings) {
  const std::string base =
      "parameters: {x: {type: float, low: 0, high: 1}}\nobjective: {metric: m, direction: min}\n"
      "command: x\nbudget: {max_trials: 50, max_concurrent: 4, max_trial_steps: 30}\n";
  ParseResult r = ParseSweepSpec(base + "plan: {steps: 40}\n", "a.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.spec->algorithm.name, "auto");
  EXPECT_EQ(r.spec->algorithm.max_trials, 50);
  EXPECT_EQ(r.spec->algorithm.concurrency, 4);
  EXPECT_EQ(r.spec->early_stopping.name, "auto");
  EXPECT_EQ(r.spec->early_stopping.steps, 30) << "the shorter of plan.steps and the cap";
  EXPECT_EQ(r.spec->early_stopping.steps_from, "budget.max_trial_steps");
  EXPECT_THAT(r.spec->Summary(*r.sampler), HasSubstr("algorithm: auto (tpe: TPE, multivariate"));
  EXPECT_THAT(r.spec->Summary(*r.sampler),
              HasSubstr("early stopping: auto (asha, rungs at steps 1, 3, 9, 27 of 30 "
                        "(budget.max_trial_steps)"));
  auto e = Errors(base + "algorithm: {name: auto, startup_trials: 5}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("bad.yaml:5:12: algorithm auto chooses its own settings"));
  e = Errors(base + "early_stopping: {name: auto, min_resource: 2}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0], HasSubstr("early_stopping auto chooses its own settings"));
  r = ParseSweepSpec(base + "algorithm: {name: pbt, population: 4}\n", "a.yaml", "/");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_FALSE(r.spec->early_stopping.none_because.empty()) << "pbt: no early stopping";
}

// What a file leaves out is filled in from a version of the defaults; the newest unless told.
TEST(SweepSpec, OmissionsTakeTheDefaultsOfTheVersionAskedFor) {
  ASSERT_FALSE(SpecDefaultVersions().empty());
  ParseResult now = ParseSweepSpec(kBase, "s.yaml", "/");
  ASSERT_TRUE(now.errors.empty()) << now.errors.front();
  EXPECT_EQ(now.spec->algorithm.name, SpecDefaultVersions().back().algorithm);
  EXPECT_EQ(now.spec->early_stopping.name, SpecDefaultVersions().back().early_stopping);

  SpecDefaults older;
  older.version = 7;
  older.algorithm = "random";
  older.early_stopping = "none";
  older.max_failed = 4;
  older.max_retries = 0;
  older.health.mode = Health::Mode::kNone;
  older.health.fail_fast = 0;
  older.failure_rules = false;
  ParseResult then = ParseSweepSpec(kBase, "s.yaml", "/", ParseOptions{&older, false});
  ASSERT_TRUE(then.errors.empty()) << then.errors.front();
  EXPECT_EQ(then.spec->algorithm.name, "random");
  EXPECT_EQ(then.spec->early_stopping.name, "none");
  EXPECT_EQ(then.spec->budget.max_failed, 4);
  EXPECT_EQ(then.spec->max_retries, 0);
  EXPECT_EQ(then.spec->health.mode, Health::Mode::kNone);
  EXPECT_EQ(then.spec->health.fail_fast, 0);
  EXPECT_FALSE(then.spec->failures.defaults);
  // What the file says wins over any version's defaults.
  ParseResult said = ParseSweepSpec(std::string(kBase) + "algorithm: tpe\nmax_retries: 5\n",
                                    "s.yaml", "/", ParseOptions{&older, false});
  ASSERT_TRUE(said.errors.empty()) << said.errors.front();
  EXPECT_EQ(said.spec->algorithm.name, "tpe");
  EXPECT_EQ(said.spec->max_retries, 5);
}

// A stored file this release refuses (a key it no longer knows, a bound it added) is read as
// far as it can be, with warnings; only one no sampler can run stays an error.
TEST(SweepSpec, LenientReadingKeepsAStoredSweepThatNoLongerValidates) {
  std::string file = std::string(kBase) + "retired_option: 3\nmax_retries: 500\n";
  ASSERT_FALSE(Errors(file).empty());
  ParseResult r = ParseSweepSpec(file, "s.yaml", "/", ParseOptions{nullptr, true});
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_TRUE(r.spec.has_value());
  ASSERT_NE(r.sampler, nullptr);
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_THAT(r.warnings[0], HasSubstr("unknown key 'retired_option'"));
  EXPECT_THAT(r.warnings[1], HasSubstr("max_retries must be between 0 and 100"));
  EXPECT_EQ(r.spec->max_retries, SpecDefaultVersions().back().max_retries);
  // A valid file reads alike either way, with no warnings.
  ParseResult clean = ParseSweepSpec(kBase, "s.yaml", "/", ParseOptions{nullptr, true});
  EXPECT_TRUE(clean.errors.empty());
  EXPECT_TRUE(clean.warnings.empty());
  // One that cannot be read at all stays refused.
  ParseResult broken =
      ParseSweepSpec("parameters: [unclosed\n", "s.yaml", "/", ParseOptions{nullptr, true});
  EXPECT_FALSE(broken.errors.empty());
  EXPECT_FALSE(broken.spec.has_value());
}

}  // namespace
}  // namespace hpo::server
