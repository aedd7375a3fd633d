#include "slurm_backend/slurm_backend.h"

#include <sys/wait.h>

#include <csignal>
#include <cstdio>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "common/shell_quote.h"
#include "spdlog/spdlog.h"

extern char** environ;

namespace hpo::backend {

SlurmBackend::SlurmBackend(std::unique_ptr<SlurmApi> api, const Clock& clock)
    : api_(std::move(api)), clock_(clock) {}

JobRequest SlurmBackend::Request(const LaunchSpec& spec) {
  JobRequest r;
  r.name = absl::StrCat("hpo-", spec.sweep_id, "-", spec.trial_id);
  // One task: the batch script is the trial. Several tasks (or nodes): the batch script starts
  // them all as one step; every task runs the command, rank 0 ($SLURM_PROCID) is the one to report.
  int tasks = spec.resources.nodes * spec.resources.tasks_per_node;
  r.script = tasks > 1 ? "#!/bin/sh\nexec srun --kill-on-bad-exit=1" : "#!/bin/sh\nexec";
  for (const auto& a : spec.argv) r.script += " " + ShellQuote(a);
  r.script += "\n";
  r.workdir = spec.workdir;
  r.stdout_path = spec.trial_dir + "/stdout.log";
  r.stderr_path = spec.trial_dir + "/stderr.log";
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string key = kv.substr(0, eq);
    // Slurm sets these for the job itself.
    if (key.rfind("SLURM_", 0) == 0 || key == "CUDA_VISIBLE_DEVICES") continue;
    env[key] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : spec.env) env[k] = v;
  for (const auto& [k, v] : env) r.environment.push_back(k + "=" + v);
  r.nodes = spec.resources.nodes;
  r.tasks_per_node = spec.resources.tasks_per_node;
  r.cpus_per_task = spec.resources.cpus;
  r.gpus_per_node = spec.resources.gpus;
  const Placement& p = spec.placement;
  r.partition = p.partition;
  r.account = p.account;
  r.qos = p.qos;
  r.constraint = p.constraint;
  r.reservation = p.reservation;
  r.time_limit_minutes = static_cast<uint32_t>(p.time_limit_minutes);
  return r;
}

absl::Status SlurmBackend::CheckFits(const Resources& r, const Placement& p) {
  if (p.mode == "steps") {
    return absl::InvalidArgumentError(
        "slurm.mode 'steps' (trials as steps in allocations hpod holds) is not built yet; "
        "set slurm.mode: jobs (one batch job per trial)");
  }
  LaunchSpec probe;
  probe.argv = {"true"};
  probe.workdir = "/tmp";
  probe.trial_dir = "/tmp";
  probe.resources = r;
  probe.placement = p;
  JobRequest req = Request(probe);
  req.environment = {"HPO_PROBE=1"};
  return api_->WillRun(req);
}

absl::Status SlurmBackend::Launch(const LaunchSpec& spec) {
  absl::StatusOr<uint32_t> id = api_->Submit(Request(spec));
  if (!id.ok()) return id.status();
  Job job;
  job.job_id = *id;
  jobs_[spec.trial_id] = job;
  spdlog::debug("trial {}: Slurm job {}", spec.trial_id, *id);
  return absl::OkStatus();
}

absl::Status SlurmBackend::Stop(int64_t trial_id, absl::Duration grace) {
  auto it = jobs_.find(trial_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("trial ", trial_id, " has no Slurm job"));
  Job& job = it->second;
  if (job.stop_requested) return absl::OkStatus();
  job.stop_requested = true;
  job.kill_at = clock_.Now() + grace;
  absl::Status s = api_->Signal(job.job_id, SIGTERM);
  if (!s.ok()) return api_->Cancel(job.job_id);  // pending jobs cannot be signaled
  return s;
}

void SlurmBackend::Reclaim(int64_t trial_id, const std::string& backend_id) {
  unsigned job = 0;
  if (std::sscanf(backend_id.c_str(), "slurm:job=%u", &job) != 1) return;
  spdlog::warn("trial {}: canceling its leftover Slurm job {}", trial_id, job);
  (void)api_->Cancel(job);
}

std::vector<BackendEvent> SlurmBackend::Poll() {
  std::vector<BackendEvent> out;
  if (jobs_.empty()) return out;
  absl::StatusOr<std::vector<JobStatus>> mine = api_->QueryMine();
  if (!mine.ok()) {
    spdlog::warn("Slurm query failed (retrying next tick): {}", mine.status().ToString());
    return out;
  }
  std::unordered_map<uint32_t, const JobStatus*> by_id;
  for (const JobStatus& s : *mine) by_id[s.job_id] = &s;
  absl::Time now = clock_.Now();
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    int64_t trial_id = it->first;
    Job& job = it->second;
    auto found = by_id.find(job.job_id);
    if (found == by_id.end()) {
      // Just-submitted jobs may take a moment to show; a job gone for good is lost.
      if (++job.polls_missing < 20) {
        ++it;
        continue;
      }
      BackendEvent e;
      e.kind = BackendEvent::Kind::kLost;
      e.trial_id = trial_id;
      e.time = now;
      e.stop_requested = job.stop_requested;
      e.message = absl::StrCat("Slurm job ", job.job_id, " vanished");
      out.push_back(e);
      it = jobs_.erase(it);
      continue;
    }
    const JobStatus& st = *found->second;
    job.polls_missing = 0;
    bool ended = st.state != JobState::kPending && st.state != JobState::kRunning;
    if (!job.started && (st.state == JobState::kRunning || ended)) {
      job.started = true;
      BackendEvent e;
      e.kind = BackendEvent::Kind::kStarted;
      e.trial_id = trial_id;
      e.time = now;
      e.backend_id = absl::StrCat("slurm:job=", job.job_id, " nodes=", st.nodes);
      out.push_back(e);
    }
    if (!ended) {
      if (job.kill_at && now >= *job.kill_at) {
        spdlog::info("trial {}: Slurm job {} did not end within its grace period; canceling", trial_id, job.job_id);
        (void)api_->Cancel(job.job_id);
        job.kill_at.reset();
      }
      ++it;
      continue;
    }
    BackendEvent e;
    e.trial_id = trial_id;
    e.time = now;
    e.stop_requested = job.stop_requested;
    e.kind = BackendEvent::Kind::kExited;
    int status = static_cast<int>(st.exit_code);
    if (WIFSIGNALED(status)) {
      e.exit_code = -1;
      e.term_signal = WTERMSIG(status);
    } else {
      e.exit_code = WEXITSTATUS(status);
    }
    switch (st.state) {
      case JobState::kCompleted:
      case JobState::kFailed:
        break;
      case JobState::kTimeout:
        e.message = absl::StrCat("Slurm job ", job.job_id, " hit its time limit");
        if (e.exit_code == 0) e.exit_code = -1;
        break;
      case JobState::kOutOfMemory:
        e.message = absl::StrCat("Slurm job ", job.job_id, " ran out of memory");
        if (e.exit_code == 0) e.exit_code = -1;
        break;
      case JobState::kDeadline:
        e.message = absl::StrCat("Slurm job ", job.job_id, " missed its deadline");
        if (e.exit_code == 0) e.exit_code = -1;
        break;
      case JobState::kCancelled:
        if (!job.stop_requested) {
          e.kind = BackendEvent::Kind::kLost;
          e.message = absl::StrCat("Slurm job ", job.job_id, " was canceled outside hpod");
        }
        break;
      default:  // node failure, boot failure, preemption
        e.kind = BackendEvent::Kind::kLost;
        e.message = absl::StrCat("Slurm job ", job.job_id, " ended by the infrastructure (state ",
                                 static_cast<int>(st.state), ")");
        break;
    }
    out.push_back(std::move(e));
    it = jobs_.erase(it);
  }
  return out;
}

}  // namespace hpo::backend
