// SlurmBackend after a restart of hpod: taking back the jobs and steps its trials still run
// (Adopt) and the allocations it held (AdoptAllocation), and ending what is left of those it
// cannot (Reclaim). See slurm_backend.h.
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/layout.h"
#include "common/status_macros.h"
#include "slurm_backend/slurm_backend.h"
#include "spdlog/spdlog.h"

namespace hpo::slurm {

using backend::BackendEvent;
using backend::ExitRecord;
using backend::LaunchSpec;
using backend::TrialProcess;

absl::StatusOr<std::vector<JobStatus>> SlurmBackend::MineForAdoption() {
  absl::Time now = clock_.Now();
  if (!adopt_mine_ || now - adopt_mine_at_ >= absl::Seconds(1)) {
    absl::StatusOr<std::vector<JobStatus>> mine = api_->QueryMine();
    if (!mine.ok()) return mine.status();
    adopt_mine_ = std::move(*mine);
    adopt_mine_at_ = now;
  }
  return *adopt_mine_;
}

absl::Status SlurmBackend::Adopt(const LaunchSpec& spec, const std::string& backend_id,
                                 const std::string& gpus) {
  if (jobs_.count(spec.trial_id) || steps_.count(spec.trial_id)) {
    return absl::AlreadyExistsError(absl::StrCat("trial ", spec.trial_id, " already runs"));
  }
  if (SlurmOf(spec.placement).mode != "jobs") live_sweeps_[spec.sweep_id] = spec.placement;
  return SlurmOf(spec.placement).mode == "jobs" ? AdoptJob(spec, backend_id)
                                                : AdoptStep(spec, backend_id, gpus);
}

absl::Status SlurmBackend::AdoptJob(const LaunchSpec& spec, const std::string& backend_id) {
  unsigned stored = 0;
  if (std::sscanf(backend_id.c_str(), "slurm:job=%u", &stored) != 1) stored = 0;
  ASSIGN_OR_RETURN(std::vector<JobStatus> mine, MineForAdoption());
  std::string name = JobName(spec);
  const JobStatus* found = nullptr;
  for (const JobStatus& j : mine) {
    if ((stored != 0 && j.job_id == stored) || (stored == 0 && j.name == name)) found = &j;
  }
  if (found == nullptr) {
    // Ended while hpod was away, and forgotten by slurmctld since (MinJobAge): hpo-shim wrote
    // down how.
    std::optional<ExitRecord> rec = backend::ReadExitRecord(spec.trial_dir, spec.segment);
    if (stored != 0 && rec) {
      Job job = NewJob(stored, spec);
      JobEndedByRecord(spec.trial_id, job, *rec, events_);
      return absl::OkStatus();
    }
    return absl::NotFoundError(
        absl::StrCat("Slurm no longer knows trial ", spec.trial_id, "'s job",
                     stored != 0 ? absl::StrCat(" ", stored) : std::string()));
  }
  jobs_[spec.trial_id] =
      NewJob(found->job_id, spec);  // the next Poll reports it started (once it is) and how it ends
  spdlog::info("trial {}: re-adopted Slurm job {}", spec.trial_id, found->job_id);
  return absl::OkStatus();
}

absl::Status SlurmBackend::AdoptStep(const LaunchSpec& spec, const std::string& backend_id,
                                     const std::string& gpus) {
  Step step;
  step.trial_id = spec.trial_id;
  step.sweep_id = spec.sweep_id;
  step.process.trial_id = spec.trial_id;
  step.process.dir = spec.trial_dir;
  step.process.segment = spec.segment;
  step.process.adopted = true;
  step.stop_signal = spec.stop_signal;
  step.stderr_path = layout::TrialDir(spec.trial_dir).stderr_log();
  step.launched = clock_.Now();
  step.tasks = spec.resources.nodes * spec.resources.tasks_per_node;
  step.tasks_checked = step.launched;
  SetCheckpointing(spec, step);
  if (spec.checkpoint_signal > 0) pool_.NoteCheckpointGrace(spec.sweep_id, spec.checkpoint_grace);
  // What the store knew: "slurm:job=J step=S nodes=N", then " agent" when the allocation's agent
  // started it (S may be "pending").
  for (absl::string_view field : absl::StrSplit(backend_id, ' ', absl::SkipEmpty())) {
    uint32_t value = 0;
    if (absl::ConsumePrefix(&field, "slurm:job=") && absl::SimpleAtoi(field, &value)) {
      step.job_id = value;
    } else if (absl::ConsumePrefix(&field, "step=") && absl::SimpleAtoi(field, &value)) {
      step.step_id = value;
    } else if (absl::ConsumePrefix(&field, "nodes=")) {
      step.nodelist = std::string(field);
    } else if (field == "agent") {
      step.agent = true;
    }
  }
  if (step.agent) return AdoptAgentStep(spec, std::move(step), gpus);
  step.process.pid = backend::ReadShimPid(spec.trial_dir);
  if (step.process.pid == 0) {  // hpod died before hpo-shim wrote its pid
    step.process.pid = backend::FindTrialProcess(spec.trial_id, spec.trial_dir);
  }
  // The srun the shim runs says where the step is: --jobid and --nodelist.
  if (step.process.pid > 0 && backend::IsTrialProcess(step.process.pid, spec.trial_id)) {
    for (const std::string& arg : backend::ProcessArgv(step.process.pid)) {
      if (absl::StartsWith(arg, "--jobid=")) (void)absl::SimpleAtoi(arg.substr(8), &step.job_id);
      if (absl::StartsWith(arg, "--nodelist=")) step.nodelist = arg.substr(11);
    }
  }
  ExitRecord outcome;
  TrialProcess::State state =
      step.process.pid > 0 ? step.process.Check(&outcome) : TrialProcess::State::kVanished;
  if (state == TrialProcess::State::kVanished) {
    return absl::NotFoundError(absl::StrCat("trial ", spec.trial_id,
                                            "'s srun no longer runs, and it left no exit status"));
  }
  BackendEvent started =
      BackendEvent::Of(BackendEvent::Kind::kStarted, spec.trial_id, step.launched);
  started.backend_id = StepBackendId(step);
  events_.push_back(std::move(started));
  // What its tasks recorded fills in what is still missing (all of it, if it ended meanwhile).
  RecordTasks(step, /*force=*/state == TrialProcess::State::kEnded, events_);
  if (state == TrialProcess::State::kEnded) {
    spdlog::info("trial {}: its step ended while hpod was away; its outcome is known",
                 spec.trial_id);
    events_.push_back(StepEnded(step, &outcome));
    return absl::OkStatus();
  }
  // Take its allocation back instead of canceling it as a leftover; its room is held once the
  // allocation's nodes are known.
  pool_.Adopt(spec.trial_id, step.job_id, spec.sweep_id, spec.placement,
              api_->ExpandHostlist(step.nodelist), spec.resources, gpus);
  watcher_.Watch(step.process.pid);
  spdlog::info("trial {}: re-adopted step {} (srun pid {})", spec.trial_id, StepBackendId(step),
               step.process.pid);
  steps_[spec.trial_id] = std::move(step);
  return absl::OkStatus();
}

absl::Status SlurmBackend::AdoptAgentStep(const LaunchSpec& spec, Step step,
                                          const std::string& gpus) {
  std::optional<ExitRecord> outcome = backend::ReadExitRecord(spec.trial_dir, spec.segment);
  bool agent_known = options_.agent.hub != nullptr && options_.agent.hub->Admitted(step.job_id);
  if (!agent_known && !outcome) {
    return absl::NotFoundError(absl::StrCat("allocation ", step.job_id,
                                            " is not held any more, and trial ", spec.trial_id,
                                            "'s step left no exit record"));
  }
  BackendEvent started =
      BackendEvent::Of(BackendEvent::Kind::kStarted, spec.trial_id, step.launched);
  started.backend_id = StepBackendId(step);
  events_.push_back(std::move(started));
  RecordTasks(step, /*force=*/outcome.has_value(), events_);
  if (outcome) {
    spdlog::info("trial {}: its step ended while hpod was away; its outcome is known",
                 spec.trial_id);
    events_.push_back(StepEnded(step, &*outcome));
    return absl::OkStatus();
  }
  // Its agent says how it goes once it calls; its allocation is taken back meanwhile. Should
  // the agent never have had it, the same launch goes again (CheckAgentStep).
  step.launch_order =
      AgentLaunchOrder(spec, StepSpawn(spec, step.job_id, api_->ExpandHostlist(step.nodelist),
                                       SlurmOf(spec.placement).allocation.MemPerCpuMb()));
  pool_.Adopt(spec.trial_id, step.job_id, spec.sweep_id, spec.placement,
              api_->ExpandHostlist(step.nodelist), spec.resources, gpus);
  spdlog::info("trial {}: re-adopted step {} (run by allocation {}'s agent)", spec.trial_id,
               StepBackendId(step), step.job_id);
  steps_[spec.trial_id] = std::move(step);
  return absl::OkStatus();
}

void SlurmBackend::Reclaim(int64_t trial_id, const std::string& backend_id) {
  unsigned job = 0, step = 0;
  if (std::sscanf(backend_id.c_str(), "slurm:job=%u step=%u", &job, &step) == 2) {
    spdlog::warn("trial {}: canceling its leftover Slurm step {}.{}", trial_id, job, step);
    CancelStep(trial_id, job, step);
    return;
  }
  if (backend_id.find(" step=") != std::string::npos) return;  // its allocation goes instead
  if (std::sscanf(backend_id.c_str(), "slurm:job=%u", &job) != 1) return;
  spdlog::warn("trial {}: canceling its leftover Slurm job {}", trial_id, job);
  CancelJob(trial_id, job);
}

void SlurmBackend::AdoptAllocation(const backend::AllocationUsage& allocation) {
  // "slurm:1234", or "slurm:1234@T" for the user's own job taken at T.
  uint32_t job_id = 0;
  absl::string_view id = allocation.id;
  if (!absl::ConsumePrefix(&id, "slurm:") ||
      !absl::SimpleAtoi(id.substr(0, id.find('@')), &job_id)) {
    spdlog::warn("sweep {}: allocation record {} names no Slurm job", allocation.sweep_id,
                 allocation.id);
    return;
  }
  pool_.Expect(job_id, allocation);
}

}  // namespace hpo::slurm
