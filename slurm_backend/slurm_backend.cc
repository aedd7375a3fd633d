#include "slurm_backend/slurm_backend.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/layout.h"
#include "common/shell_quote.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

extern char** environ;

namespace hpo::slurm {

using backend::BackendEvent;
using backend::ExitRecord;
using backend::Interruption;
using backend::LaunchSpec;
using backend::Placement;
using backend::Resources;
using backend::TrialProcess;

namespace {

// What hpod passes on of its own environment: not what Slurm sets for each job and step (hpod
// may itself run inside a job), nor GPUs; SLURM_CONF so that srun finds the cluster.
bool InheritForSlurm(absl::string_view key) {
  if (key == "SLURM_CONF") return true;
  return !absl::StartsWith(key, "SLURM_") && key != "CUDA_VISIBLE_DEVICES";
}

// Each task of a step records, before it execs the trial's command, what only the step is told:
// its step id, its node and its GPUs (SLURM_STEP_GPUS: the node's indices; else
// CUDA_VISIBLE_DEVICES). So a step's id and nodes are known however short it ran (slurmctld
// forgets a step as soon as it ends), and so are the GPUs Slurm picked. One file per task in
// the trial directory ($0); a failed write (a directory the node cannot see) is ignored.
constexpr char kTaskRecordScript[] =
    "{ printf '%s %s %s\\n' \"$SLURM_STEP_ID\" \"$SLURMD_NODENAME\" "
    "\"${SLURM_STEP_GPUS:-$CUDA_VISIBLE_DEVICES}\" > \"$0/.hpo-task.$SLURM_PROCID\"; } "
    "2>/dev/null; exec \"$@\"";

}  // namespace

SlurmBackend::SlurmBackend(std::unique_ptr<SlurmApi> api, const Clock& clock, Options options)
    : api_(std::move(api)),
      calls_(options.query_thread),
      clock_(clock),
      options_(std::move(options)),
      pool_(*api_, calls_, clock_, options_.instance, options_.agent) {
  if (options_.query_thread) query_thread_ = std::make_unique<QueryThread>(*api_);
  LoadPartitions();
}

SlurmBackend::~SlurmBackend() {
  for (auto& [trial_id, step] : steps_) {
    if (step.step_id) CancelStep(trial_id, step.job_id, *step.step_id);
    SignalSrun(step, SIGKILL);
  }
  for (auto& [trial_id, step] : steps_) {
    int status = 0;
    if (!step.agent && !step.process.adopted) ::waitpid(step.process.pid, &status, 0);
  }
  // The pool cancels the allocations as it goes.
}

void SlurmBackend::CancelStep(int64_t trial_id, uint32_t job_id, uint32_t step_id) {
  calls_.Post([api = api_.get(), trial_id, job_id, step_id]() -> SlurmCalls::Then {
    if (absl::Status s = api->CancelStep(job_id, step_id); !s.ok()) {
      spdlog::warn("trial {}: cannot cancel Slurm step {}.{}: {}", trial_id, job_id, step_id,
                   s.ToString());
    }
    return nullptr;
  });
}

void SlurmBackend::CancelJob(int64_t trial_id, uint32_t job_id) {
  calls_.Post([api = api_.get(), trial_id, job_id]() -> SlurmCalls::Then {
    if (absl::Status s = api->Cancel(job_id); !s.ok()) {
      spdlog::warn("trial {}: cannot cancel Slurm job {}: {}", trial_id, job_id, s.ToString());
    }
    return nullptr;
  });
}

void SlurmBackend::Reached(Signals& signals, const absl::Status& s) {
  if (s.ok()) {
    signals.reached = true;
  } else if (absl::IsNotFound(s) && !signals.reached) {
    signals.ended_first = true;  // slurmctld's word on how it ended comes with the next poll
  }
}

void SlurmBackend::SignalJob(int64_t trial_id, uint32_t job_id, int signal, bool or_cancel) {
  calls_.Post([this, api = api_.get(), trial_id, job_id, signal, or_cancel]() -> SlurmCalls::Then {
    absl::Status s = api->Signal(job_id, signal);
    if (!s.ok() && !absl::IsNotFound(s) && or_cancel) {
      s = api->Cancel(job_id);  // pending jobs cannot be signaled
    }
    if (!s.ok() && !absl::IsNotFound(s)) {
      spdlog::warn("trial {}: cannot signal Slurm job {}: {}", trial_id, job_id, s.ToString());
    }
    return [this, trial_id, job_id, s]() {
      if (auto it = jobs_.find(trial_id); it != jobs_.end() && it->second.job_id == job_id) {
        Reached(it->second.signals, s);
      }
    };
  });
}

void SlurmBackend::SignalStep(const Step& step, int signal) {
  calls_.Post([this, api = api_.get(), trial_id = step.trial_id, job_id = step.job_id,
               step_id = step.step_id, name = step.name, signal]() -> SlurmCalls::Then {
    // A step whose id its tasks have not written down yet is looked for by its name.
    std::optional<StepStatus> found;
    if (!step_id) {
      absl::StatusOr<std::vector<StepStatus>> steps = api->QuerySteps(job_id);
      if (steps.ok()) {
        for (StepStatus& st : *steps) {
          if (st.name == name) found = std::move(st);
        }
      }
    }
    std::optional<uint32_t> id = step_id ? step_id
                                 : found ? std::optional(found->step_id)
                                         : std::nullopt;
    absl::Status signaled;
    if (id) {
      signaled = api->SignalStep(job_id, *id, signal);
      if (!signaled.ok() && !absl::IsNotFound(signaled)) {
        spdlog::warn("trial {}: cannot signal its step {}.{}: {}", trial_id, job_id, *id,
                     signaled.ToString());
      }
    }
    return [this, trial_id, id, found = std::move(found), signal, signaled]() {
      auto it = steps_.find(trial_id);
      if (it == steps_.end()) return;  // ended meanwhile
      Step& step = it->second;
      if (id) {
        Reached(step.signals, signaled);
      } else {
        step.signals.reached = true;  // srun passes it on
      }
      if (found) Identified(step, found->step_id, found->nodes, events_);
      // Not registered yet: srun itself passes the signal on (or gives up creating the step).
      if (!id) SignalSrun(step, signal);
    };
  });
}

void SlurmBackend::Identified(Step& step, uint32_t step_id, const std::string& nodes,
                              std::vector<BackendEvent>& out) {
  if (step.step_id) return;
  step.step_id = step_id;
  if (!nodes.empty()) step.nodelist = nodes;
  BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kUpdated, step.trial_id, clock_.Now());
  e.backend_id = StepBackendId(step);
  out.push_back(std::move(e));
}

std::string SlurmBackend::JobName(const LaunchSpec& spec) {
  std::string name = absl::StrCat("hpo-", spec.sweep_id, "-", spec.trial_id);
  if (spec.segment > 1) absl::StrAppend(&name, ".", spec.segment);
  return name;
}

JobRequest SlurmBackend::Request(const LaunchSpec& spec, const std::string& shim) {
  JobRequest r;
  r.name = JobName(spec);
  // One task: the batch script is the trial. Several tasks (or nodes): the batch script starts
  // them all as one step; every task runs the command, rank 0 ($SLURM_PROCID) is the one to report.
  int tasks = spec.resources.nodes * spec.resources.tasks_per_node;
  r.script = "#!/bin/sh\n";
  if (!shim.empty()) {
    // Under hpo-shim, which writes the trial's parameters and, when it ends, its exit record into
    // the trial directory: its outcome is known after slurmctld forgot the job (MinJobAge).
    // Slurm signals every process of the batch step; the shim outlives its copy of each.
    absl::StrAppend(&r.script, "exec ", ShellQuote(shim), " ", ShellQuote(spec.trial_dir), " --");
  } else {
    // The trial's parameters go into its directory first (what hpo-shim does on the other paths).
    absl::StrAppend(&r.script,
                    "[ -z \"$HPO_PARAMS_JSON\" ] || printf '%s\\n' \"$HPO_PARAMS_JSON\" > ",
                    ShellQuote(layout::TrialDir(spec.trial_dir).params()), " 2>/dev/null\nexec");
  }
  r.script += tasks > 1 ? " srun --kill-on-bad-exit=1 --label" : "";
  if (tasks > 1 && spec.resources.gpus_per_task > 0) {
    absl::StrAppend(&r.script, " --gpus-per-task=", spec.resources.gpus_per_task);
  }
  for (const auto& a : spec.argv) r.script += " " + ShellQuote(a);
  r.script += "\n";
  r.workdir = spec.workdir;
  const layout::TrialDir dir(spec.trial_dir);
  r.stdout_path = dir.stdout_log();
  r.stderr_path = dir.stderr_log();
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string key = kv.substr(0, eq);
    if (!InheritForSlurm(key)) continue;
    env[key] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : spec.env) env[k] = v;
  for (const auto& [k, v] : env) r.environment.push_back(k + "=" + v);
  r.nodes = spec.resources.nodes;
  r.tasks_per_node = spec.resources.tasks_per_node;
  r.cpus_per_task = spec.resources.cpus;
  r.gpus_per_node = spec.resources.gpus;
  ApplyPlacement(spec.placement, r);
  // Every segment (and a retry) adds to the trial's logs.
  r.append_output = true;
  if (spec.checkpoint_signal > 0) {
    r.warn_signal = spec.checkpoint_signal;
    r.warn_seconds = static_cast<uint16_t>(
        std::clamp<int64_t>(absl::ToInt64Seconds(spec.checkpoint_grace), 1, 65535));
  }
  return r;
}

JobRequest SlurmBackend::AllocationRequest(int64_t sweep_id, const Placement& p) const {
  return slurm::AllocationRequest(absl::StrCat("hpo-alloc-", options_.instance, "-", sweep_id),
                                  sweep_id, p);
}

std::vector<std::string> SlurmBackend::StepArgv(uint32_t job_id,
                                                const std::vector<std::string>& nodes,
                                                const LaunchSpec& spec,
                                                int64_t mem_per_cpu_mb) const {
  const Resources& r = spec.resources;
  std::vector<std::string> argv = {
      options_.srun,
      absl::StrCat("--jobid=", job_id),
      "--exact",
      "--quiet",
      absl::StrCat("--job-name=", JobName(spec)),
      absl::StrCat("--nodes=", r.nodes),
      absl::StrCat("--ntasks=", r.nodes * r.tasks_per_node),
      absl::StrCat("--ntasks-per-node=", r.tasks_per_node),
      absl::StrCat("--cpus-per-task=", r.cpus),
      absl::StrCat("--nodelist=", absl::StrJoin(nodes, ",")),
      // A step that names no GRES in a GPU allocation would get all of its GPUs.
      r.gpus_per_task > 0 ? absl::StrCat("--gpus-per-task=", r.gpus_per_task)
      : r.gpus > 0        ? absl::StrCat("--gres=gpu:", r.gpus)
                          : std::string("--gres=none"),
      "--kill-on-bad-exit=1",
  };
  if (mem_per_cpu_mb > 0) argv.push_back(absl::StrCat("--mem-per-cpu=", mem_per_cpu_mb));
  if (r.time_limit > absl::ZeroDuration()) {
    argv.push_back(
        absl::StrCat("--time=", absl::ToInt64Minutes(absl::Ceil(r.time_limit, absl::Minutes(1)))));
  }
  // Each line of a trial of several tasks names its task: the failures rules read the output
  // of the task that failed first (common/task_output.h).
  if (r.nodes * r.tasks_per_node > 1) argv.push_back("--label");
  argv.insert(argv.end(), {"/bin/sh", "-c", kTaskRecordScript, spec.trial_dir});
  argv.insert(argv.end(), spec.argv.begin(), spec.argv.end());
  return argv;
}

bool SlurmBackend::CanLaunch(int64_t sweep_id, const Resources& r, const Placement& p) {
  if (SlurmOf(p).mode == "jobs") return true;  // Slurm queues the job
  return pool_.CanPlace(sweep_id, r, p);
}

absl::Status SlurmBackend::Launch(const LaunchSpec& spec) {
  if (jobs_.count(spec.trial_id) || steps_.count(spec.trial_id) || queued_.count(spec.trial_id)) {
    return absl::AlreadyExistsError(absl::StrCat("trial ", spec.trial_id, " already runs"));
  }
  Queued q;
  q.spec = spec;
  if (SlurmOf(spec.placement).mode != "jobs" && spec.checkpoint_signal > 0) {
    pool_.NoteCheckpointGrace(spec.sweep_id, spec.checkpoint_grace);
  }
  if (SlurmOf(spec.placement).mode != "jobs") {  // a step takes its room in an allocation now
    std::optional<AllocationPool::Placed> placed =
        pool_.Place(spec.trial_id, spec.sweep_id, spec.resources);
    if (!placed) {
      return absl::ResourceExhaustedError("no room for the trial in the sweep's allocations");
    }
    q.placed = std::move(*placed);
  }
  queued_[spec.trial_id] = std::move(q);
  return absl::OkStatus();
}

void SlurmBackend::LaunchFailed(int64_t trial_id, const absl::Status& why) {
  BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kLaunchFailed, trial_id, clock_.Now());
  e.message = std::string(why.message());
  e.infra = !absl::IsInvalidArgument(why);  // Slurm refused the request itself: the sweep's fault
  events_.push_back(std::move(e));
}

void SlurmBackend::StartJob(const LaunchSpec& spec) {
  submitting_[spec.trial_id] = NewJob(0, spec);
  calls_.Post(
      [this, api = api_.get(), trial_id = spec.trial_id,
       request = Excluding(Request(spec, options_.shim), spec.sweep_id)]() -> SlurmCalls::Then {
        absl::StatusOr<uint32_t> id = api->Submit(request);
        return [this, trial_id, id]() { JobSubmitted(trial_id, id); };
      });
}

void SlurmBackend::JobSubmitted(int64_t trial_id, const absl::StatusOr<uint32_t>& id) {
  auto it = submitting_.find(trial_id);
  if (it == submitting_.end()) return;  // detached meanwhile
  Job job = std::move(it->second);
  submitting_.erase(it);
  if (!id.ok()) {
    LaunchFailed(trial_id, id.status());
    return;
  }
  job.job_id = *id;
  bool stop = job.stop_requested;
  jobs_[trial_id] = std::move(job);
  fast_until_ = clock_.Now() + options_.fast_query_window;
  spdlog::debug("trial {}: Slurm job {}", trial_id, *id);
  if (stop) (void)Signal(trial_id);  // stopped while slurmctld answered
}

SlurmBackend::Job SlurmBackend::NewJob(uint32_t job_id, const LaunchSpec& spec) {
  Job job;
  job.job_id = job_id;
  job.dir = spec.trial_dir;
  job.segment = spec.segment;
  job.stop_signal = spec.stop_signal;
  job.checkpoint_signal = spec.checkpoint_signal;
  job.checkpoint_grace = spec.checkpoint_grace;
  job.time_limit = absl::Minutes(SlurmOf(spec.placement).time_limit_minutes);
  return job;
}

void SlurmBackend::SetCheckpointing(const LaunchSpec& spec, Step& step) {
  step.name = JobName(spec);
  step.checkpoint_signal = spec.checkpoint_signal;
  step.checkpoint_grace = spec.checkpoint_grace;
  step.time_limit = spec.resources.time_limit;
}

backend::SpawnSpec SlurmBackend::StepSpawn(const LaunchSpec& spec, uint32_t job_id,
                                           const std::vector<std::string>& nodes,
                                           int64_t mem_per_cpu_mb) const {
  const layout::TrialDir dir(spec.trial_dir);
  backend::SpawnSpec spawn;
  spawn.argv = StepArgv(job_id, nodes, spec, mem_per_cpu_mb);
  spawn.env = spec.env;
  spawn.inherit = InheritForSlurm;
  spawn.workdir = spec.workdir;
  spawn.stdout_path = dir.stdout_log();
  spawn.stderr_path = dir.stderr_log();
  spawn.shim = options_.shim;
  spawn.env["HPO_TRIAL_ID"] = std::to_string(spec.trial_id);  // how a restart knows it again
  spawn.shim_dir = spec.trial_dir;
  return spawn;
}

v1::AgentOrder SlurmBackend::AgentLaunchOrder(const LaunchSpec& spec,
                                              const backend::SpawnSpec& spawn) {
  // The allocation's agent starts it, with the environment hpod would have given it.
  v1::AgentOrder order;
  v1::AgentLaunch* launch = order.mutable_launch();
  launch->set_trial_id(spec.trial_id);
  launch->set_segment(spec.segment);
  for (const std::string& arg : spawn.argv) launch->add_argv(arg);
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == absl::string_view::npos || !InheritForSlurm(kv.substr(0, eq))) continue;
    (*launch->mutable_env())[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  for (const auto& [k, v] : spawn.env) (*launch->mutable_env())[k] = v;
  launch->set_workdir(spawn.workdir);
  launch->set_stdout_path(spawn.stdout_path);
  launch->set_stderr_path(spawn.stderr_path);
  launch->set_trial_dir(spec.trial_dir);
  return order;
}

void SlurmBackend::StartStep(const LaunchSpec& spec, const AllocationPool::Placed& placed) {
  backend::SpawnSpec spawn = StepSpawn(spec, placed.job_id, placed.nodes, placed.mem_per_cpu_mb);
  Step step;
  step.trial_id = spec.trial_id;
  step.sweep_id = spec.sweep_id;
  step.job_id = placed.job_id;
  step.process.trial_id = spec.trial_id;
  step.process.dir = spec.trial_dir;
  step.process.segment = spec.segment;
  if (placed.agent) {
    step.agent = true;
    step.launch_order = AgentLaunchOrder(spec, spawn);
    step.launch_seq = options_.agent.hub->Order(placed.job_id, *step.launch_order);
  } else {
    absl::StatusOr<backend::Spawned> spawned = backend::Spawn(spawn);
    if (spawned.ok() && spawned->exec_errno != 0) {
      spawned = absl::UnavailableError(
          absl::StrCat("cannot run ", options_.srun, ": ", std::strerror(spawned->exec_errno)));
    }
    if (!spawned.ok()) {
      pool_.Release(spec.trial_id, clock_.Now());
      LaunchFailed(spec.trial_id, spawned.status());
      return;
    }
    step.process.pid = spawned->pid;
    watcher_.Watch(step.process.pid);
  }
  step.nodelist = absl::StrJoin(placed.nodes, ",");
  step.stderr_path = spawn.stderr_path;
  step.launched = clock_.Now();
  step.stop_signal = spec.stop_signal;
  step.tasks = spec.resources.nodes * spec.resources.tasks_per_node;
  step.tasks_checked = step.launched;
  SetCheckpointing(spec, step);
  BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kStarted, spec.trial_id, step.launched);
  e.backend_id = StepBackendId(step);
  events_.push_back(std::move(e));
  steps_[spec.trial_id] = std::move(step);
}

void SlurmBackend::Act() {
  std::map<int64_t, Queued> launches;
  launches.swap(queued_);
  for (auto& [trial_id, q] : launches) {
    if (SlurmOf(q.spec.placement).mode == "jobs") {
      StartJob(q.spec);
    } else {
      StartStep(q.spec, q.placed);
    }
  }
  std::vector<std::pair<int64_t, int>> sends;
  sends.swap(to_send_);
  for (auto [trial_id, signal] : sends) {
    if (auto it = steps_.find(trial_id); it != steps_.end()) {
      SignalStep(it->second, signal);
    } else if (auto job = jobs_.find(trial_id); job != jobs_.end()) {
      SignalJob(trial_id, job->second.job_id, signal, /*or_cancel=*/false);
    }
  }
  std::vector<int64_t> checkpoints;
  checkpoints.swap(to_checkpoint_);
  for (int64_t trial_id : checkpoints) SignalCheckpoint(trial_id);
  std::vector<int64_t> stops;
  stops.swap(to_signal_);
  for (int64_t trial_id : stops) {
    if (absl::Status s = Signal(trial_id); !s.ok()) {
      spdlog::warn("trial {}: stop: {}", trial_id, s.ToString());
    }
  }
}

std::string SlurmBackend::StepBackendId(const Step& s) const {
  return absl::StrCat("slurm:job=", s.job_id,
                      " step=", s.step_id ? std::to_string(*s.step_id) : "pending",
                      " nodes=", s.nodelist, s.agent ? " agent" : "");
}

absl::Status SlurmBackend::Stop(int64_t trial_id, absl::Duration grace) {
  if (auto q = queued_.find(trial_id); q != queued_.end()) {  // never started: it ends now
    if (SlurmOf(q->second.spec.placement).mode != "jobs") pool_.Release(trial_id, clock_.Now());
    queued_.erase(q);
    events_.push_back(BackendEvent::StoppedBeforeStart(trial_id, clock_.Now()));
    return absl::OkStatus();
  }
  if (auto it = steps_.find(trial_id); it != steps_.end()) {
    Step& step = it->second;
    if (step.stop_requested) return absl::OkStatus();
    step.stop_requested = true;
    step.grace = grace;
    to_signal_.push_back(trial_id);
    return absl::OkStatus();
  }
  auto it = jobs_.find(trial_id);
  if (it == jobs_.end()) {
    auto submitting = submitting_.find(trial_id);
    if (submitting == submitting_.end()) {
      return absl::NotFoundError(absl::StrCat("trial ", trial_id, " has no Slurm job or step"));
    }
    // Signaled once slurmctld names its job (JobSubmitted).
    submitting->second.stop_requested = true;
    submitting->second.grace = grace;
    return absl::OkStatus();
  }
  Job& job = it->second;
  if (job.stop_requested) return absl::OkStatus();
  job.stop_requested = true;
  job.grace = grace;
  to_signal_.push_back(trial_id);
  return absl::OkStatus();
}

absl::Status SlurmBackend::SendSignal(int64_t trial_id, int signal) {
  if (!steps_.count(trial_id) && !jobs_.count(trial_id)) {
    return absl::NotFoundError(
        absl::StrCat("trial ", trial_id, " has no running Slurm job or step"));
  }
  to_send_.emplace_back(trial_id, signal);
  return absl::OkStatus();
}

absl::Status SlurmBackend::Signal(int64_t trial_id) {
  absl::Time now = clock_.Now();
  if (auto it = steps_.find(trial_id); it != steps_.end()) {
    Step& step = it->second;
    step.kill_at = now + step.grace;
    SignalStep(step, step.stop_signal);
    return absl::OkStatus();
  }
  auto it = jobs_.find(trial_id);
  if (it == jobs_.end()) return absl::OkStatus();  // ended meanwhile, or not submitted yet
  Job& job = it->second;
  job.kill_at = now + job.grace;
  SignalJob(trial_id, job.job_id, job.stop_signal, /*or_cancel=*/true);
  return absl::OkStatus();
}

std::string SlurmBackend::Describe() const {
  return absl::StrCat("slurm: ", pool_.Describe(), ", ", steps_.size(), " step(s), ", jobs_.size(),
                      " job(s)");
}

}  // namespace hpo::slurm
