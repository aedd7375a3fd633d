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

// How long a step's tasks have to write down its id (RecordTasks) before slurmctld is asked for
// it: a node that does not share the trial directory never does.
constexpr absl::Duration kStepRecordWait = absl::Seconds(5);

// Each task of a step records, before it execs the trial's command, what only the step is told:
// its step id, its node and its GPUs (SLURM_STEP_GPUS: the node's indices; else
// CUDA_VISIBLE_DEVICES). So a step's id and nodes are known however short it ran (slurmctld
// forgets a step as soon as it ends), and so are the GPUs Slurm picked. One file per task in
// the trial directory ($0); a failed write (a directory the node cannot see) is ignored.
constexpr char kTaskRecordScript[] =
    "{ printf '%s %s %s\\n' \"$SLURM_STEP_ID\" \"$SLURMD_NODENAME\" "
    "\"${SLURM_STEP_GPUS:-$CUDA_VISIBLE_DEVICES}\" > \"$0/.hpo-task.$SLURM_PROCID\"; } "
    "2>/dev/null; exec \"$@\"";

// What a step's tasks recorded in `dir`.
struct TaskRecords {
  int files = 0;  // how many tasks did
  std::optional<uint32_t> step_id;
  std::set<std::string> nodes;
  std::string gpus;  // "n1:0,1 n2:2,3" (nodes in name order, each one's GPUs ascending)
};

TaskRecords ReadTaskRecords(const std::string& dir) {
  TaskRecords out;
  std::map<std::string, std::set<int>> by_node;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (!absl::StartsWith(entry.path().filename().string(), layout::kTaskRecordPrefix)) continue;
    absl::StatusOr<std::string> text = ReadFile(entry.path().string());
    if (!text.ok()) continue;
    std::vector<std::string> fields =
        absl::StrSplit(absl::StripAsciiWhitespace(*text), ' ', absl::SkipEmpty());
    uint32_t step_id = 0;
    if (fields.size() < 2 || !absl::SimpleAtoi(fields[0], &step_id)) continue;
    ++out.files;
    out.step_id = step_id;
    out.nodes.insert(fields[1]);
    if (fields.size() < 3) continue;
    for (absl::string_view g : absl::StrSplit(fields[2], ',', absl::SkipEmpty())) {
      int index = 0;
      if (absl::SimpleAtoi(g, &index)) by_node[fields[1]].insert(index);
    }
  }
  std::vector<std::string> parts;
  for (const auto& [node, gpus] : by_node) {
    parts.push_back(absl::StrCat(node, ":", absl::StrJoin(gpus, ",")));
  }
  out.gpus = absl::StrJoin(parts, " ");
  return out;
}

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

void SlurmBackend::LoadPartitions() {
  partitions_at_ = clock_.Now();
  calls_.Post([this, api = api_.get()]() -> SlurmCalls::Then {
    absl::StatusOr<std::vector<PartitionLimits>> parts = api->QueryPartitions();
    if (!parts.ok()) {
      spdlog::warn(
          "cannot read the partitions' time limits (asking slurmctld for each "
          "allocation's instead): {}",
          parts.status().ToString());
      return nullptr;
    }
    return [this, parts = std::move(*parts)]() mutable { pool_.SetPartitions(std::move(parts)); };
  });
}

SlurmBackend::QueryThread::QueryThread(SlurmApi& api) : api_(api) {
  thread_ = std::thread([this] { Loop(); });
}

SlurmBackend::QueryThread::~QueryThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SlurmBackend::QueryThread::SetWakeup(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  wake_ = std::move(wake);
}

void SlurmBackend::QueryThread::Ask() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    asked_ = busy_ = true;
  }
  cv_.notify_all();
}

bool SlurmBackend::QueryThread::Busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

std::optional<absl::StatusOr<std::vector<JobStatus>>> SlurmBackend::QueryThread::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<absl::StatusOr<std::vector<JobStatus>>> out;
  out.swap(answer_);
  return out;
}

void SlurmBackend::QueryThread::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return asked_ || stopping_; });
    if (stopping_) return;
    asked_ = false;
    lock.unlock();
    absl::StatusOr<std::vector<JobStatus>> mine = api_.QueryMine();
    lock.lock();
    answer_ = std::move(mine);
    busy_ = false;
    if (wake_) wake_();
  }
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

void SlurmBackend::SignalJob(int64_t trial_id, uint32_t job_id, int signal, bool or_cancel) {
  calls_.Post([api = api_.get(), trial_id, job_id, signal, or_cancel]() -> SlurmCalls::Then {
    absl::Status s = api->Signal(job_id, signal);
    if (!s.ok() && or_cancel) s = api->Cancel(job_id);  // pending jobs cannot be signaled
    if (!s.ok()) {
      spdlog::warn("trial {}: cannot signal Slurm job {}: {}", trial_id, job_id, s.ToString());
    }
    return nullptr;
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
    if (id) {
      if (absl::Status s = api->SignalStep(job_id, *id, signal); !s.ok()) {
        spdlog::warn("trial {}: cannot signal its step {}.{}: {}", trial_id, job_id, *id,
                     s.ToString());
      }
    }
    return [this, trial_id, id, found = std::move(found), signal]() {
      auto it = steps_.find(trial_id);
      if (it == steps_.end()) return;  // ended meanwhile
      Step& step = it->second;
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
  r.script += tasks > 1 ? " srun --kill-on-bad-exit=1" : "";
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
  argv.insert(argv.end(), {"/bin/sh", "-c", kTaskRecordScript, spec.trial_dir});
  argv.insert(argv.end(), spec.argv.begin(), spec.argv.end());
  return argv;
}

absl::Status SlurmBackend::CheckFits(const Resources& r, const Placement& p) {
  if (SlurmOf(p).mode == "jobs") return absl::OkStatus();  // only slurmctld can say (Vet)
  const AllocationShape& a = SlurmOf(p).allocation;
  if (r.nodes > a.nodes || r.gpus > a.gpus_per_node ||
      r.cpus * r.tasks_per_node > a.cpus_per_node) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a trial (", r.nodes, " node(s), ", r.gpus, " GPU(s) and ", r.cpus * r.tasks_per_node,
        " CPU(s) per node) does not fit in the sweep's allocation (", a.nodes, " node(s), ",
        a.gpus_per_node, " GPU(s) and ", a.cpus_per_node, " CPU(s) per node)"));
  }
  return absl::OkStatus();
}

JobRequest SlurmBackend::ProbeRequest(const Resources& r, const Placement& p) {
  LaunchSpec probe;
  probe.argv = {"true"};
  probe.workdir = "/tmp";
  probe.trial_dir = "/tmp";
  probe.resources = r;
  probe.placement = p;
  JobRequest req = Request(probe);
  req.environment = {"HPO_PROBE=1"};
  return req;
}

void SlurmBackend::ExpectedStart(const Resources& r, const Placement& p, Started done) {
  const SlurmPlacement& where = SlurmOf(p);
  if (where.mode != "jobs" && where.allocation.job != 0) {  // the user's own: no queue
    return done(
        QueueWait{clock_.Now(), absl::StrCat("the user's allocation ", where.allocation.job)});
  }
  const AllocationShape& a = where.allocation;
  std::string what =
      where.mode == "jobs"
          ? absl::StrCat("one trial's job (", r.nodes, " node(s), ", r.gpus, " GPU(s) each)")
          : absl::StrCat("the sweep's first allocation (", a.nodes, " node(s) with ",
                         a.gpus_per_node, " GPU(s) and ", a.cpus_per_node, " CPU(s) each)");
  JobRequest req = where.mode == "jobs" ? ProbeRequest(r, p) : AllocationRequest(0, p);
  calls_.Post([api = api_.get(), req = std::move(req), what, done]() -> SlurmCalls::Then {
    absl::StatusOr<absl::Time> start = api->WillRun(req);
    // A start a year or more ahead is slurmctld finding no time for the job at all (the nodes it
    // could use are held without an end, or are still being cleaned after a job), not a wait.
    if (start.ok() && *start - absl::Now() > absl::Hours(24 * 300)) {
      start = absl::UnavailableError(absl::StrCat(
          "unknown: slurmctld finds no start time for ", what,
          " now (its nodes are held without an end, or still being cleaned after a job)"));
    }
    return [done, start, what]() {
      if (!start.ok()) return done(start.status());
      done(QueueWait{*start, what});
    };
  });
}

void SlurmBackend::Vet(int64_t sweep_id, const Resources& r, const Placement& p, bool starts_now,
                       Vetted done) {
  const SlurmPlacement& where = SlurmOf(p);
  if (where.mode == "jobs") {  // the request of one trial's job, checked
    JobRequest req = ProbeRequest(r, p);
    calls_.Post([api = api_.get(), req = std::move(req), done]() -> SlurmCalls::Then {
      absl::Status s = api->WillRun(req).status();
      return [done, s]() { done(s); };
    });
    return;
  }
  const AllocationShape& a = where.allocation;
  if (a.job != 0) {  // the user's own allocation: is it there?
    calls_.Post([api = api_.get(), job = a.job, done]() -> SlurmCalls::Then {
      absl::StatusOr<std::vector<JobStatus>> mine = api->QueryMine();
      absl::Status s = mine.status();
      if (mine.ok()) {
        s = absl::InvalidArgumentError(absl::StrCat("slurm allocation job ", job,
                                                    " is not a pending or running job of yours"));
        for (const JobStatus& j : *mine) {
          if (j.job_id == job && (j.state == JobState::kRunning || j.state == JobState::kPending))
            s = absl::OkStatus();
        }
      }
      return [done, s]() { done(s); };
    });
    return;
  }
  // The sweep's allocation: requested now when the sweep starts now (slurmctld's answer to
  // that request is the check, as with a user's own sbatch), checked with will_run otherwise.
  std::string shape =
      absl::StrCat("the sweep's allocation (", a.nodes, " node(s) with ", a.gpus_per_node,
                   " GPU(s) and ", a.cpus_per_node, " CPU(s) each): ");
  Vetted said = [done, shape](const absl::Status& s) {
    done(s.ok() ? s : absl::Status(s.code(), absl::StrCat(shape, s.message())));
  };
  if (sweep_id > 0 && starts_now && pool_.RequestFirst(sweep_id, p, said)) return;
  calls_.Post([api = api_.get(), req = AllocationRequest(0, p), said]() -> SlurmCalls::Then {
    absl::Status s = api->WillRun(req).status();
    return [said, s]() { said(s); };
  });
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

std::vector<std::string> SlurmBackend::NodesOf(const std::string& backend_id) const {
  size_t at = backend_id.find(" nodes=");
  if (at == std::string::npos) return {};
  at += 7;
  std::string list = backend_id.substr(at, backend_id.find(' ', at) - at);
  if (list.empty()) return {};
  return api_->ExpandHostlist(list);
}

void SlurmBackend::ExcludeNodes(int64_t sweep_id, const std::set<std::string>& nodes) {
  if (nodes.empty()) {
    excluded_.erase(sweep_id);
  } else {
    excluded_[sweep_id] = nodes;
  }
  pool_.Exclude(sweep_id, nodes);
}

JobRequest SlurmBackend::Excluding(JobRequest r, int64_t sweep_id) const {
  if (auto it = excluded_.find(sweep_id); it != excluded_.end()) {
    r.exclude = absl::StrJoin(it->second, ",");
  }
  return r;
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

std::vector<BackendEvent> SlurmBackend::Poll() {
  calls_.RunDone();  // what slurmctld answered since the last Poll
  std::vector<BackendEvent> out;
  out.swap(events_);
  HearAgents();
  absl::Time start = clock_.Now();
  if (start - partitions_at_ >= kPartitionsAge && calls_.Idle()) LoadPartitions();
  bool stopping = false;  // a stopped trial's job is watched closely until it goes
  for (const auto& [id, job] : jobs_) stopping |= job.stop_requested;
  bool fast = start < fast_until_ || stopping;
  absl::Duration interval = fast ? options_.fast_query_interval : options_.query_interval;
  // The agents tell hpod what it needs of the allocations they run in: slurmctld is asked now
  // and then only, for what they cannot see (a time limit changed, a preemption).

  if (!fast && jobs_.empty() && swept_leftovers_ && pool_.CoveredByAgents(start)) {
    interval = std::max(interval, options_.agent_query_interval);
  }
  // slurmctld refused or did not answer: ask less and less often (up to 5 minutes).
  interval = std::max(interval, query_backoff_);
  // The interval counts from when there was something to watch (a new allocation is first
  // asked about an interval after its request, by when its agent has usually called).
  bool watch = !jobs_.empty() || !pool_.empty() || !swept_leftovers_;
  if (watch && !watching_) watch_since_ = start;
  watching_ = watch;
  absl::Time since = swept_leftovers_ ? std::max(last_query_, watch_since_) : last_query_;
  bool due = watch && (start - since >= interval || ((pool_.WantsTimes() || ask_now_) &&
                                                     query_backoff_ == absl::ZeroDuration()));
  if (due && (!query_thread_ || !query_thread_->Busy())) {
    last_query_ = start;
    if (query_thread_) {
      query_thread_->Ask();
    } else {
      TakeMine(api_->QueryMine(), out);
    }
  }
  if (query_thread_) {
    if (std::optional<absl::StatusOr<std::vector<JobStatus>>> mine = query_thread_->Take()) {
      TakeMine(std::move(*mine), out);
    }
  }
  CheckpointSteps(out);
  ReapSteps(out);
  IdentifySteps();
  absl::Time now = clock_.Now();
  for (auto& [trial_id, step] : steps_) {
    RecordTasks(step, /*force=*/false, out);
    if (step.kill_at && now >= *step.kill_at) {
      spdlog::info("trial {}: step did not end within its grace period; canceling it", trial_id);
      if (step.step_id)
        CancelStep(trial_id, step.job_id, *step.step_id);
      else
        SignalSrun(step, SIGKILL);
      step.kill_at.reset();
    }
  }
  // A new allocation whose agent will say when it runs needs no close watch; one without an
  // agent is watched closely from when slurmctld names it.
  bool grew = pool_.Resize();
  bool awaiting = pool_.AwaitingQuery();
  if (awaiting && (grew || !awaiting_query_)) fast_until_ = now + options_.fast_query_window;
  awaiting_query_ = awaiting;
  for (backend::AllocationUsage& u : pool_.TakeUsage()) {
    BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kAllocation, 0, now);
    e.allocation = std::move(u);
    out.push_back(std::move(e));
  }
  return out;
}

void SlurmBackend::TakeMine(absl::StatusOr<std::vector<JobStatus>> mine,
                            std::vector<BackendEvent>& out) {
  if (!mine.ok()) {
    query_backoff_ = std::clamp(query_backoff_ * 2, options_.query_interval + absl::Seconds(1),
                                absl::Minutes(5));
    spdlog::warn("Slurm query failed{} (asking again in {}): {}",
                 absl::IsResourceExhausted(mine.status()) ? ": slurmctld is rate-limiting" : "",
                 absl::FormatDuration(query_backoff_), mine.status().ToString());
    return;
  }
  last_answer_ = last_query_;  // what slurmctld knew when it was asked
  ask_now_ = false;
  if (query_backoff_ > absl::ZeroDuration()) spdlog::info("slurmctld answers again");
  query_backoff_ = absl::ZeroDuration();
  std::map<uint32_t, const JobStatus*> by_id;
  for (const JobStatus& s : *mine) by_id[s.job_id] = &s;
  // Allocations an earlier run of this daemon left behind: swept once no request of this run is
  // between slurmctld and the pool (an allocation slurmctld already lists, whose answer has not
  // reached the pool yet, is this run's own).
  if (!swept_leftovers_ && calls_.Idle()) {
    pool_.SweepLeftovers(*mine, live_sweeps_);
    live_sweeps_.clear();
    swept_leftovers_ = true;
  }
  PollJobs(by_id, out);
  pool_.Update(by_id);
}

void SlurmBackend::CheckpointSteps(std::vector<BackendEvent>& out) {
  absl::Time now = clock_.Now();
  for (auto& [trial_id, step] : steps_) {
    if (step.checkpoint_signal == 0 || step.stop_requested ||
        step.interrupted != Interruption::kNone) {
      continue;
    }
    // The first of: the allocation's end (or its preemption, at once), the step's own limit.
    std::optional<AllocationPool::Ending> end = pool_.EndOf(step.job_id);
    absl::Time at = absl::InfiniteFuture();
    Interruption why = Interruption::kNone;
    std::string what;
    if (end) {
      at = end->why == Interruption::kPreempted ? end->at : end->at - step.checkpoint_grace;
      why = end->why;
      what = end->why == Interruption::kPreempted
                 ? absl::StrCat("allocation ", step.job_id, " is being preempted")
                 : absl::StrCat("allocation ", step.job_id, " ends at its time limit in ",
                                absl::FormatDuration(absl::Trunc(end->at - now, absl::Seconds(1))));
    }
    if (step.time_limit > absl::ZeroDuration() &&
        step.launched + step.time_limit - step.checkpoint_grace < at) {
      at = step.launched + step.time_limit - step.checkpoint_grace;
      why = Interruption::kTimeLimit;
      what = absl::StrCat("its time limit (", absl::FormatDuration(step.time_limit), ") is near");
    }
    if (now < at) continue;
    // The controller records the request first; the signal goes at the next Act().
    step.interrupted = why;
    BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kCheckpoint, trial_id, now);
    e.interruption = why;
    e.message = what;
    out.push_back(std::move(e));
    to_checkpoint_.push_back(trial_id);
  }
}

void SlurmBackend::SignalCheckpoint(int64_t trial_id) {
  auto it = steps_.find(trial_id);
  if (it == steps_.end() || it->second.stop_requested) return;  // ended or stopped meanwhile
  Step& step = it->second;
  spdlog::info("trial {}: telling it to checkpoint (signal {})", trial_id, step.checkpoint_signal);
  SignalStep(step, step.checkpoint_signal);
}

void SlurmBackend::ReapSteps(std::vector<BackendEvent>& out) {
  for (auto it = steps_.begin(); it != steps_.end();) {
    Step& step = it->second;
    ExitRecord outcome;
    TrialProcess::State state =
        step.agent ? CheckAgentStep(step, &outcome) : step.process.Check(&outcome);
    if (state == TrialProcess::State::kRunning) {
      ++it;
      continue;
    }
    // A step that ended badly while slurmctld has not been asked for a while (the agents tell
    // hpod the rest): its allocation may be being preempted, which only slurmctld says. Its end
    // waits for slurmctld's next answer (asked now), briefly.
    if (step.agent && state == TrialProcess::State::kEnded && !step.stop_requested &&
        step.interrupted == Interruption::kNone &&
        (outcome.exit_code != 0 || outcome.term_signal != 0)) {
      absl::Time now = clock_.Now();
      if (!step.ended_badly_at) step.ended_badly_at = now;
      if (last_answer_ < *step.ended_badly_at && now - *step.ended_badly_at < kEndAnswerWait) {
        ask_now_ = true;
        ++it;
        continue;
      }
    }
    RecordTasks(step, /*force=*/true, out);
    out.push_back(StepEnded(step, state == TrialProcess::State::kEnded ? &outcome : nullptr));
    if (step.agent)
      options_.agent.hub->Acknowledge(step.job_id, step.trial_id, step.process.segment);
    it = steps_.erase(it);
  }
}

namespace {

// What Slurm said ended a step, in the lines slurmstepd writes to its stderr
// ("*** STEP 12.3 ON n1 CANCELLED AT ... DUE TO TIME LIMIT ***"); kNone when it said nothing.
// The log holds every segment of a resumable trial: only the lines about this step (its full
// id, when known) count.
Interruption SlurmSaid(const std::string& tail, uint32_t job_id, std::optional<uint32_t> step_id) {
  std::string step =
      absl::StrCat("*** STEP ", job_id, ".", step_id ? absl::StrCat(*step_id, " ") : std::string());
  std::string job = absl::StrCat("*** JOB ", job_id, " ");
  Interruption said = Interruption::kNone;
  for (absl::string_view line : absl::StrSplit(tail, '\n')) {
    bool about_step = absl::StrContains(line, step) && absl::StrContains(line, "CANCELLED");
    if (!about_step && !absl::StrContains(line, job)) continue;
    if (absl::StrContains(line, "DUE TO TIME LIMIT")) {
      said = Interruption::kTimeLimit;
    } else if (absl::StrContains(line, "DUE TO PREEMPTION")) {
      said = Interruption::kPreempted;
    } else if (absl::StrContains(line, "DUE TO NODE FAIL")) {
      said = Interruption::kNodeFailure;
    } else if (said == Interruption::kNone) {
      said = Interruption::kCanceledOutside;
    }
  }
  return said;
}

}  // namespace

BackendEvent SlurmBackend::StepEnded(Step& step, const ExitRecord* outcome) {
  absl::Time now = clock_.Now();
  BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kExited, step.trial_id, now);
  e.stop_requested = step.stop_requested;
  AllocationPool::Gone gone = pool_.WhyGone(step.job_id);
  if (outcome == nullptr) {
    e.kind = BackendEvent::Kind::kLost;
    e.message = step.agent ? absl::StrCat("allocation ", step.job_id,
                                          "'s agent lost the step, and it left no exit record")
                           : "the trial's srun process disappeared";
    e.interruption = Interruption::kVanished;
    if (step.agent && !gone.why.empty()) {  // the agent went with its allocation
      e.message = gone.why;
      e.interruption = gone.interruption;
    }
  } else {
    e.exit_code = outcome->exit_code;
    e.term_signal = outcome->term_signal;
    if (outcome->exec_errno != 0) {
      e.kind = BackendEvent::Kind::kLost;
      e.message =
          absl::StrCat("cannot run ", options_.srun, ": ", std::strerror(outcome->exec_errno));
    }
  }
  std::optional<AllocationPool::Ending> ending = pool_.EndOf(step.job_id);
  std::string id =
      absl::StrCat(step.job_id, ".", step.step_id ? std::to_string(*step.step_id) : "");
  if (e.kind == BackendEvent::Kind::kExited && !step.stop_requested &&
      step.interrupted != Interruption::kNone) {
    // Told to checkpoint: however it exited, it continues as its next segment.
    e.kind = BackendEvent::Kind::kLost;
    e.interruption = step.interrupted;
    e.message =
        absl::StrCat("step ", id, " checkpointed and exited ahead of ",
                     step.interrupted == Interruption::kPreempted ? "its allocation's preemption"
                                                                  : "a time limit");
  } else if (e.kind == BackendEvent::Kind::kExited && !step.stop_requested && ending &&
             ending->why == Interruption::kPreempted && e.exit_code != 0) {
    // Slurm signals the steps of a preempted allocation itself, before its GraceTime ends.
    e.kind = BackendEvent::Kind::kLost;
    e.interruption = Interruption::kPreempted;
    e.message = absl::StrCat("step ", id, " ended when allocation ", step.job_id, " was preempted");
  }
  if (e.kind == BackendEvent::Kind::kExited && !step.stop_requested) {
    // Did the trial end by itself, or was it taken away? The allocation's end, or srun's own
    // words, say which; a trial cut short is not done even if it exited 0 on the signal.
    bool truncated = false;
    std::string tail = TailFile(step.stderr_path, 8192, &truncated).value_or("");
    Interruption said = SlurmSaid(tail, step.job_id, step.step_id);
    if (!gone.why.empty() && (e.exit_code != 0 || said != Interruption::kNone)) {
      e.kind = BackendEvent::Kind::kLost;
      e.message = gone.why;
      e.interruption = gone.interruption;
    } else if (said != Interruption::kNone) {
      e.kind = BackendEvent::Kind::kLost;
      e.message = absl::StrCat("step ", id, " was ended by ", backend::InterruptionWords(said));
      if (said == Interruption::kCanceledOutside) {
        e.message = absl::StrCat("step ", id, " was canceled outside hpod");
      }
      e.interruption = said;
    } else if (e.exit_code != 0 && (absl::StrContains(tail, "Unable to create step") ||
                                    absl::StrContains(tail, "Job step aborted"))) {
      e.kind = BackendEvent::Kind::kLost;
      e.message = absl::StrCat("Slurm ended step ", id, " or could not start it (see stderr.log)");
      e.interruption = Interruption::kVanished;
    }
  }
  pool_.Release(step.trial_id, now);
  return e;
}

void SlurmBackend::IdentifySteps() {
  // Step ids are for the record and for signals, and the steps' tasks write them down as they
  // start (RecordTasks); slurmctld is asked only for a step older than kStepRecordWait whose
  // tasks did not (a trial directory the node does not share), at most once per query interval,
  // one call per allocation, never for every step on the cluster. (A signal looks for its own
  // step: SignalStep.)
  absl::Time now = clock_.Now();
  if (now - last_steps_query_ < options_.query_interval) return;
  std::set<uint32_t> jobs;
  for (auto& [trial_id, step] : steps_) {
    // (Poll has looked for the tasks' records every second meanwhile.)
    if (!step.step_id && now - step.launched >= kStepRecordWait) jobs.insert(step.job_id);
  }
  if (jobs.empty()) return;
  last_steps_query_ = now;
  calls_.Post([this, api = api_.get(), jobs]() -> SlurmCalls::Then {
    std::map<std::pair<uint32_t, std::string>, StepStatus> by_name;
    for (uint32_t job_id : jobs) {
      absl::StatusOr<std::vector<StepStatus>> steps = api->QuerySteps(job_id);
      if (!steps.ok()) {
        spdlog::warn("Slurm step query failed: {}", steps.status().ToString());
        continue;
      }
      for (StepStatus& st : *steps) by_name[{st.job_id, st.name}] = std::move(st);
    }
    return [this, by_name = std::move(by_name)]() {
      for (auto& [trial_id, step] : steps_) {
        auto found = by_name.find({step.job_id, step.name});  // the name StepArgv gave it
        if (found != by_name.end()) {
          Identified(step, found->second.step_id, found->second.nodes, events_);
        }
      }
    };
  });
}

void SlurmBackend::RecordTasks(Step& step, bool force, std::vector<BackendEvent>& out) {
  absl::Time now = clock_.Now();
  if (step.tasks_recorded || (!force && now - step.tasks_checked < absl::Seconds(1))) return;
  step.tasks_checked = now;
  TaskRecords records = ReadTaskRecords(step.process.dir);
  bool changed = false;
  if (!step.step_id && records.step_id) {  // known as soon as one task said so
    step.step_id = records.step_id;
    changed = true;
  }
  if (records.files >= step.tasks || force) {
    step.tasks_recorded = true;
    if (!records.nodes.empty()) {
      step.nodelist = absl::StrJoin(records.nodes, ",");
      changed = true;
    }
  }
  if (!changed && records.gpus.empty()) return;
  BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kUpdated, step.trial_id, now);
  e.backend_id = StepBackendId(step);
  if (step.tasks_recorded) e.gpus = std::move(records.gpus);
  out.push_back(std::move(e));
}

void SlurmBackend::JobEndedByRecord(int64_t trial_id, const Job& job, const ExitRecord& rec,
                                    std::vector<BackendEvent>& out) {
  absl::Time now = clock_.Now();
  if (!job.started) {
    BackendEvent started = BackendEvent::Of(BackendEvent::Kind::kStarted, trial_id, now);
    started.backend_id = absl::StrCat("slurm:job=", job.job_id);
    out.push_back(std::move(started));
  }
  BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kExited, trial_id, now);
  e.stop_requested = job.stop_requested;
  e.exit_code = rec.exit_code;
  e.term_signal = rec.term_signal;
  spdlog::info("trial {}: Slurm job {} is no longer known; its exit record says {}", trial_id,
               job.job_id,
               rec.term_signal != 0 ? absl::StrCat("signal ", rec.term_signal)
                                    : absl::StrCat("exit ", rec.exit_code));
  out.push_back(std::move(e));
}

Interruption SlurmBackend::CheckpointedJob(const Job& job, const JobStatus& st) {
  if (job.checkpoint_signal == 0) return Interruption::kNone;
  if (job.preempted_at != absl::InfinitePast() || st.preempt_time != absl::InfinitePast()) {
    return Interruption::kPreempted;
  }
  // Slurm's warning comes checkpoint_grace before the end, up to a minute early (it looks at
  // time limits periodically): a job that ended since then was told to checkpoint.
  absl::Time limit_at = job.ends_at;
  if (limit_at == absl::InfinitePast() && st.start_time != absl::InfinitePast() &&
      job.time_limit > absl::ZeroDuration()) {
    limit_at = st.start_time + job.time_limit;
  }
  if (limit_at == absl::InfinitePast() || st.end_time == absl::InfinitePast()) {
    return Interruption::kNone;
  }
  absl::Time warned = limit_at - job.checkpoint_grace - absl::Minutes(1);
  return st.end_time >= warned ? Interruption::kTimeLimit : Interruption::kNone;
}

void SlurmBackend::PollJobs(const std::map<uint32_t, const JobStatus*>& by_id,
                            std::vector<BackendEvent>& out) {
  absl::Time now = clock_.Now();
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    int64_t trial_id = it->first;
    Job& job = it->second;
    auto found = by_id.find(job.job_id);
    if (found == by_id.end()) {
      // Just-submitted jobs may take a moment to show; a job gone for good (slurmctld forgets
      // an ended job after MinJobAge) ended as hpo-shim wrote down, or is lost.
      if (++job.polls_missing < 20) {
        ++it;
        continue;
      }
      if (std::optional<ExitRecord> rec = backend::ReadExitRecord(job.dir, job.segment)) {
        JobEndedByRecord(trial_id, job, *rec, out);
        it = jobs_.erase(it);
        continue;
      }
      BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kLost, trial_id, now);
      e.stop_requested = job.stop_requested;
      e.message = absl::StrCat("Slurm job ", job.job_id, " vanished");
      e.interruption = Interruption::kVanished;
      out.push_back(e);
      it = jobs_.erase(it);
      continue;
    }
    const JobStatus& st = *found->second;
    job.polls_missing = 0;
    bool ended = st.state != JobState::kPending && st.state != JobState::kRunning;
    if (!job.started && (st.state == JobState::kRunning || ended)) {
      job.started = true;
      BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kStarted, trial_id, now);
      e.backend_id = absl::StrCat("slurm:job=", job.job_id, " nodes=", st.nodes);
      out.push_back(e);
    }
    if (st.state == JobState::kRunning && st.end_time != absl::InfinitePast()) {
      job.ends_at = st.end_time;
    }
    if (st.preempt_time != absl::InfinitePast() && job.preempted_at == absl::InfinitePast()) {
      job.preempted_at = st.preempt_time;
      // Slurm warns before a time limit (--signal), not before a preemption: hpod does.
      if (job.checkpoint_signal > 0 && !job.stop_requested && !ended) {
        spdlog::info("trial {}: Slurm job {} is being preempted; telling it to checkpoint",
                     trial_id, job.job_id);
        SignalJob(trial_id, job.job_id, job.checkpoint_signal, /*or_cancel=*/false);
      }
    }
    if (!ended) {
      if (job.kill_at && now >= *job.kill_at) {
        spdlog::info("trial {}: Slurm job {} did not end within its grace period; canceling",
                     trial_id, job.job_id);
        CancelJob(trial_id, job.job_id);
        job.kill_at.reset();
      }
      ++it;
      continue;
    }
    BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kExited, trial_id, now);
    e.stop_requested = job.stop_requested;
    int status = static_cast<int>(st.exit_code);
    if (WIFSIGNALED(status)) {
      e.exit_code = -1;
      e.term_signal = WTERMSIG(status);
    } else {
      e.exit_code = WEXITSTATUS(status);
    }
    // The infrastructure's doing: LOST (and retried), never counted against the sweep.
    auto lost = [&](Interruption why, const std::string& message) {
      e.kind = BackendEvent::Kind::kLost;
      e.interruption = why;
      e.message = message;
    };
    std::string job_name = absl::StrCat("Slurm job ", job.job_id);
    switch (st.state) {
      case JobState::kCompleted:
      case JobState::kFailed:
        if (Interruption why = CheckpointedJob(job, st);
            why != Interruption::kNone && !job.stop_requested) {
          lost(why,
               absl::StrCat(job_name, " checkpointed and exited ahead of ",
                            why == Interruption::kPreempted ? "its preemption" : "its time limit"));
        }
        break;
      case JobState::kOutOfMemory:
        e.message = absl::StrCat(job_name, " ran out of memory");
        if (e.exit_code == 0) e.exit_code = -1;
        break;
      case JobState::kDeadline:
        e.message = absl::StrCat(job_name, " missed its deadline");
        if (e.exit_code == 0) e.exit_code = -1;
        break;
      case JobState::kCancelled:
        if (!job.stop_requested) {
          lost(Interruption::kCanceledOutside,
               absl::StrCat(job_name, " was canceled outside hpod"));
        }
        break;
      case JobState::kTimeout:
        lost(Interruption::kTimeLimit, absl::StrCat(job_name, " hit its time limit"));
        break;
      case JobState::kPreempted:
        lost(Interruption::kPreempted, absl::StrCat(job_name, " was preempted"));
        break;
      case JobState::kNodeFail:
      case JobState::kBootFail:
        lost(Interruption::kNodeFailure,
             absl::StrCat(job_name, " ended by a node failure",
                          st.state == JobState::kBootFail ? " (the node did not boot)" : ""));
        break;
      default:
        lost(Interruption::kVanished,
             absl::StrCat(job_name, " ended in state ", static_cast<int>(st.state)));
        break;
    }
    out.push_back(std::move(e));
    it = jobs_.erase(it);
  }
}

}  // namespace hpo::slurm
