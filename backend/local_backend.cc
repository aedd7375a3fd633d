#include "backend/local_backend.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/layout.h"
#include "spdlog/spdlog.h"

namespace hpo::backend {

int LocalBackend::DetectGpus() {
  FILE* p = ::popen("nvidia-smi -L 2>/dev/null", "r");
  if (p == nullptr) return 0;
  int n = 0;
  char line[512];
  while (std::fgets(line, sizeof(line), p) != nullptr) {
    if (std::strncmp(line, "GPU ", 4) == 0) ++n;
  }
  ::pclose(p);
  return n;
}

LocalBackend::LocalBackend(const Options& options, const Clock& clock)
    : options_(options),
      clock_(clock),
      pool_(options.gpus >= 0 ? options.gpus : DetectGpus(),
            options.cpus > 0
                ? options.cpus
                : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {}

LocalBackend::~LocalBackend() {
  KillAll();
  for (auto& [id, child] : children_) {
    int status = 0;
    if (!child.process.adopted) ::waitpid(child.process.pid, &status, 0);
  }
}

std::string LocalBackend::Describe() const {
  return absl::StrCat("local: ", pool_.total_gpus(), " GPU(s), ", pool_.total_cpus(),
                      " CPU slot(s)");
}

absl::Status LocalBackend::Launch(const LaunchSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("empty command");
  if (children_.count(spec.trial_id) || queued_.count(spec.trial_id)) {
    return absl::AlreadyExistsError(absl::StrCat("trial ", spec.trial_id, " already runs"));
  }
  std::optional<Grant> grant = pool_.Acquire(spec.resources);
  if (!grant) return absl::ResourceExhaustedError("no free resources for the trial");
  queued_[spec.trial_id] = {spec, *grant};
  return absl::OkStatus();
}

void LocalBackend::Start(const LaunchSpec& spec, const Grant& grant) {
  SpawnSpec spawn;
  spawn.argv = spec.argv;
  spawn.env = spec.env;
  spawn.env["CUDA_VISIBLE_DEVICES"] = grant.CudaVisibleDevices();
  spawn.env["HPO_GPUS"] = grant.CudaVisibleDevices();
  spawn.workdir = spec.workdir;
  const layout::TrialDir dir(spec.trial_dir);
  spawn.stdout_path = dir.stdout_log();
  spawn.stderr_path = dir.stderr_log();
  spawn.shim = options_.shim;
  spawn.env["HPO_TRIAL_ID"] = std::to_string(spec.trial_id);  // how a restart knows it again
  spawn.shim_dir = spec.trial_dir;
  absl::StatusOr<Spawned> spawned = Spawn(spawn);
  if (!spawned.ok()) {  // the logs cannot be opened, fork failed: not the trial's fault
    pool_.Release(grant);
    BackendEvent failed =
        BackendEvent::Of(BackendEvent::Kind::kLaunchFailed, spec.trial_id, clock_.Now());
    failed.message = std::string(spawned.status().message());
    failed.infra = true;
    events_.push_back(std::move(failed));
    return;
  }
  pid_t pid = spawned->pid;
  Child child;
  child.process.pid = pid;
  child.process.trial_id = spec.trial_id;
  child.process.dir = spec.trial_dir;
  child.process.segment = spec.segment;
  child.grant = grant;
  BackendEvent started =
      BackendEvent::Of(BackendEvent::Kind::kStarted, spec.trial_id, clock_.Now());
  started.backend_id = pid > 0 ? absl::StrCat("local:pid=", pid) : "local:not-started";
  started.gpus = grant.CudaVisibleDevices();
  events_.push_back(started);
  if (int exec_errno = spawned->exec_errno; exec_errno != 0) {
    // exec failed: the child already exited 127. Say why in the trial's stderr and event.
    std::string why = absl::StrCat("cannot run '", spec.argv[0], "' in ", spec.workdir, ": ",
                                   std::strerror(exec_errno));
    if (FILE* f = std::fopen(spawn.stderr_path.c_str(), "a")) {
      std::fprintf(f, "hpod: %s\n", why.c_str());
      std::fclose(f);
    }
    pool_.Release(child.grant);
    BackendEvent exited =
        BackendEvent::Of(BackendEvent::Kind::kExited, spec.trial_id, clock_.Now());
    exited.exit_code = 127;
    exited.message = why;
    events_.push_back(exited);
    return;
  }
  child.stop_signal = spec.stop_signal;
  children_[spec.trial_id] = child;
  watcher_.Watch(pid);
}

absl::Status LocalBackend::Stop(int64_t trial_id, absl::Duration grace) {
  if (auto q = queued_.find(trial_id); q != queued_.end()) {  // never started: it ends now
    pool_.Release(q->second.grant);
    queued_.erase(q);
    events_.push_back(BackendEvent::StoppedBeforeStart(trial_id, clock_.Now()));
    return absl::OkStatus();
  }
  auto it = children_.find(trial_id);
  if (it == children_.end()) {
    return absl::NotFoundError(absl::StrCat("trial ", trial_id, " is not running here"));
  }
  Child& child = it->second;
  if (!child.stop_requested) {
    child.stop_requested = true;
    child.grace = grace;
    to_signal_.push_back(trial_id);
  }
  return absl::OkStatus();
}

absl::Status LocalBackend::SendSignal(int64_t trial_id, int signal) {
  if (!children_.count(trial_id)) {
    return absl::NotFoundError(absl::StrCat("trial ", trial_id, " is not running here"));
  }
  to_send_.emplace_back(trial_id, signal);
  return absl::OkStatus();
}

void LocalBackend::Act() {
  std::map<int64_t, Queued> launches;
  launches.swap(queued_);
  for (auto& [trial_id, q] : launches) Start(q.spec, q.grant);
  std::vector<std::pair<int64_t, int>> sends;
  sends.swap(to_send_);
  for (auto [trial_id, signal] : sends) {
    auto it = children_.find(trial_id);
    if (it != children_.end()) ::kill(-it->second.process.pid, signal);
  }
  std::vector<int64_t> stops;
  stops.swap(to_signal_);
  for (int64_t trial_id : stops) {
    auto it = children_.find(trial_id);
    if (it == children_.end()) continue;
    Child& child = it->second;
    ::kill(-child.process.pid, child.stop_signal);
    child.kill_at = clock_.Now() + child.grace;
  }
}

absl::Status LocalBackend::Adopt(const LaunchSpec& spec, const std::string& backend_id,
                                 const std::string& gpus) {
  if (children_.count(spec.trial_id)) {
    return absl::AlreadyExistsError(absl::StrCat("trial ", spec.trial_id, " already runs"));
  }
  Child child;
  child.process.trial_id = spec.trial_id;
  child.process.dir = spec.trial_dir;
  child.process.segment = spec.segment;
  child.process.adopted = true;
  child.stop_signal = spec.stop_signal;
  child.process.pid = ReadShimPid(spec.trial_dir);
  int pid = 0;
  if (child.process.pid == 0 && std::sscanf(backend_id.c_str(), "local:pid=%d", &pid) == 1) {
    child.process.pid = pid;  // started without the shim
  }
  if (child.process.pid == 0) child.process.pid = FindTrialProcess(spec.trial_id, spec.trial_dir);
  ExitRecord outcome;
  TrialProcess::State state =
      child.process.pid > 0 ? child.process.Check(&outcome) : TrialProcess::State::kVanished;
  if (state == TrialProcess::State::kVanished) {
    return absl::NotFoundError(
        absl::StrCat("no process of trial ", spec.trial_id, " runs, and it left no exit status"));
  }
  // Its GPUs stay its own: take exactly those out of the pool.
  std::vector<int> held;
  for (absl::string_view g : absl::StrSplit(gpus, ',', absl::SkipEmpty())) {
    int index = 0;
    if (absl::SimpleAtoi(g, &index)) held.push_back(index);
  }
  child.grant = pool_.AcquireExact(held, spec.resources.cpus * spec.resources.tasks_per_node);
  BackendEvent started =
      BackendEvent::Of(BackendEvent::Kind::kStarted, spec.trial_id, clock_.Now());
  started.backend_id = absl::StrCat("local:pid=", child.process.pid);
  started.gpus = gpus;
  events_.push_back(started);
  if (state == TrialProcess::State::kEnded) {
    spdlog::info("trial {}: ended while hpod was away; its outcome is known", spec.trial_id);
    Ended(spec.trial_id, child, outcome);
    return absl::OkStatus();
  }
  spdlog::info("trial {}: re-adopted its running process group {}", spec.trial_id,
               child.process.pid);
  watcher_.Watch(child.process.pid);
  children_[spec.trial_id] = std::move(child);
  return absl::OkStatus();
}

void LocalBackend::Reclaim(int64_t trial_id, const std::string& backend_id) {
  int pid = 0;
  if (std::sscanf(backend_id.c_str(), "local:pid=%d", &pid) != 1 || pid <= 1) return;
  // Only a process group whose leader still carries this trial's id in its environment: the pid
  // may have been reused since.
  if (!IsTrialProcess(pid, trial_id)) return;
  spdlog::warn("trial {}: ending its leftover process group {}", trial_id, pid);
  ::kill(-pid, SIGKILL);
}

void LocalBackend::KillAll() {
  for (auto& [id, q] : queued_) pool_.Release(q.grant);
  queued_.clear();
  for (auto& [id, child] : children_) {
    child.stop_requested = true;
    ::kill(-child.process.pid, SIGKILL);
  }
}

void LocalBackend::Ended(int64_t trial_id, Child& child, const ExitRecord& outcome) {
  // Whatever the trial left behind in its group goes with it (a re-adopted group only while its
  // leader is still the trial's: afterwards the pid may be someone else's).
  if (!child.process.adopted || IsTrialProcess(child.process.pid, trial_id))
    ::kill(-child.process.pid, SIGKILL);
  pool_.Release(child.grant);
  BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kExited, trial_id, clock_.Now());
  e.stop_requested = child.stop_requested;
  e.exit_code = outcome.exit_code;
  e.term_signal = outcome.term_signal;
  if (outcome.exec_errno != 0) {
    e.message = absl::StrCat("cannot run the trial's command: ", std::strerror(outcome.exec_errno),
                             " (see stderr.log)");
  } else if (e.term_signal != 0) {
    e.message =
        absl::StrCat("killed by signal ", e.term_signal, " (", strsignal(e.term_signal), ")");
  }
  events_.push_back(std::move(e));
}

std::vector<BackendEvent> LocalBackend::Poll() {
  absl::Time now = clock_.Now();
  for (auto it = children_.begin(); it != children_.end();) {
    Child& child = it->second;
    ExitRecord outcome;
    TrialProcess::State state = child.process.Check(&outcome);
    if (state == TrialProcess::State::kEnded) {
      Ended(it->first, child, outcome);
      it = children_.erase(it);
      continue;
    }
    if (state == TrialProcess::State::kVanished) {
      BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kLost, it->first, now);
      e.stop_requested = child.stop_requested;
      e.message = "the trial's process disappeared without a record of how it ended";
      e.interruption = Interruption::kVanished;
      pool_.Release(child.grant);
      events_.push_back(std::move(e));
      it = children_.erase(it);
      continue;
    }
    if (child.kill_at && now >= *child.kill_at) {
      spdlog::info("trial {} did not exit within its grace period; SIGKILL", it->first);
      ::kill(-child.process.pid, SIGKILL);
      child.kill_at.reset();
    }
    ++it;
  }
  std::vector<BackendEvent> out;
  out.swap(events_);
  return out;
}

}  // namespace hpo::backend
