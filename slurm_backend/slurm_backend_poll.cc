// SlurmBackend's Poll: what slurmctld's answers, the agents and the steps' own records say of the
// trials (started, ended, interrupted), and the checkpoint signals before an allocation ends.
// The rest is in slurm_backend.cc.
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/layout.h"
#include "common/task_output.h"
#include "slurm_backend/slurm_backend.h"
#include "spdlog/spdlog.h"

namespace hpo::slurm {

using backend::BackendEvent;
using backend::ExitRecord;
using backend::Interruption;
using backend::TrialProcess;

namespace {

// How long a step's tasks have to write down its id (RecordTasks) before slurmctld is asked for
// it: a node that does not share the trial directory never does.
constexpr absl::Duration kStepRecordWait = absl::Seconds(5);

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
// id, when known) count. A step of several tasks that srun itself canceled because one of them
// exited badly (--kill-on-bad-exit: srun names that task, common/task_output.h) ended by the
// trial's own failure, not by a cancel from outside.
Interruption SlurmSaid(const std::string& tail, uint32_t job_id, std::optional<uint32_t> step_id) {
  std::string step =
      absl::StrCat("*** STEP ", job_id, ".", step_id ? absl::StrCat(*step_id, " ") : std::string());
  std::string job = absl::StrCat("*** JOB ", job_id, " ");
  const bool task_failed = !SplitTaskOutput(tail).culprit.empty();
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
    } else if (said == Interruption::kNone && !(about_step && task_failed)) {
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
  e.ended_first = step.signals.ended_first;
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
  e.ended_first = job.signals.ended_first;
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
    e.ended_first = job.signals.ended_first;
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
