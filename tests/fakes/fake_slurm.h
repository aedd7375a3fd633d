#pragma once
// FakeSlurm: a scripted slurmctld behind the SlurmApi seam. Submitted jobs stay PENDING until
// the test runs them (Run) or ends them (set their state); queries answer from that table;
// cancels are recorded in a list the test owns (it outlives the fake, which the backend owns).
// Partition "nosuch" is refused as Slurm refuses an unknown partition. WriteSrunStandIn writes
// the srun that steps-mode tests launch through.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/address.h"
#include "common/files.h"
#include "slurm_backend/slurm_api.h"

namespace hpo::fakes {

// srun's stand-in, written to `path`: it drops its --options and runs the command on this
// machine with `env` exported (the step's Slurm variables, "NAME=value ..."); with `log_argv` it
// first appends its arguments to argv.log beside it.
[[nodiscard]] inline absl::Status WriteSrunStandIn(const std::string& path, const std::string& env,
                                                   bool log_argv = false) {
  return WriteFileAtomic(
      path,
      absl::StrCat("#!/bin/sh\n", log_argv ? "echo \"$@\" >> \"$(dirname \"$0\")/argv.log\"\n" : "",
                   "while [ $# -gt 0 ]; do case $1 in --*) shift ;; *) break ;; esac; done\n",
                   "export ", env, "\nexec \"$@\"\n"),
      0755);
}

class FakeSlurm final : public slurm::SlurmApi {
 public:
  explicit FakeSlurm(std::vector<uint32_t>& canceled_out) : canceled(canceled_out) {}
  struct Job {
    slurm::JobRequest req;
    slurm::JobStatus status;
  };
  std::map<uint32_t, Job> jobs;
  std::vector<uint32_t>& canceled;
  uint32_t next_id = 100;
  int queries = 0;
  // Signals sent, in order: {job, step (or -1 for the whole job), signal}.
  struct Sent {
    uint32_t job = 0;
    int64_t step = -1;
    int signal = 0;
  };
  std::vector<Sent> signals;

  [[nodiscard]] absl::StatusOr<uint32_t> Submit(const slurm::JobRequest& req) override {
    if (req.partition == "nosuch") {
      return absl::InvalidArgumentError("Invalid partition name specified");
    }
    uint32_t id = next_id++;
    jobs[id] = {req, {id, slurm::JobState::kPending, 0, "", req.name}};
    return id;
  }
  int will_runs = 0;
  absl::Time will_start = absl::UnixEpoch();  // what WillRun answers
  [[nodiscard]] absl::StatusOr<absl::Time> WillRun(const slurm::JobRequest& req) override {
    ++will_runs;
    if (req.partition == "nosuch") {
      return absl::InvalidArgumentError("Invalid partition name specified");
    }
    return will_start;
  }
  absl::Status query_error;  // what QueryMine answers while it is not OK
  [[nodiscard]] absl::StatusOr<std::vector<slurm::JobStatus>> QueryMine() override {
    ++queries;
    if (!query_error.ok()) return query_error;
    std::vector<slurm::JobStatus> out;
    for (auto& [id, j] : jobs) out.push_back(j.status);
    return out;
  }
  std::vector<slurm::PartitionLimits> partitions;  // what QueryPartitions answers
  int partition_queries = 0;
  [[nodiscard]] absl::StatusOr<std::vector<slurm::PartitionLimits>> QueryPartitions() override {
    ++partition_queries;
    return partitions;
  }
  // What QueryNodes answers: by default one node, on this host.
  std::vector<slurm::NodeHost> nodes = {{"n1", HostName(), "127.0.0.1"}};
  [[nodiscard]] absl::StatusOr<std::vector<slurm::NodeHost>> QueryNodes() override { return nodes; }
  [[nodiscard]] absl::Status Signal(uint32_t job_id, int signal) override {
    signals.push_back({job_id, -1, signal});
    // As slurmctld: a job that ended (its end not yet polled) cannot be signaled.
    auto it = jobs.find(job_id);
    if (it != jobs.end() && it->second.status.state != slurm::JobState::kPending &&
        it->second.status.state != slurm::JobState::kRunning) {
      return absl::NotFoundError("Job/step already completing or completed");
    }
    return absl::OkStatus();
  }
  [[nodiscard]] absl::Status Cancel(uint32_t job_id) override {
    canceled.push_back(job_id);
    jobs[job_id].status.state = slurm::JobState::kCancelled;
    return absl::OkStatus();
  }
  [[nodiscard]] absl::StatusOr<std::vector<slurm::StepStatus>> QuerySteps(uint32_t) override {
    return std::vector<slurm::StepStatus>{};
  }
  [[nodiscard]] absl::Status SignalStep(uint32_t job_id, uint32_t step_id, int signal) override {
    signals.push_back({job_id, step_id, signal});
    return absl::OkStatus();
  }
  // Steps canceled, in order: {job, step}.
  std::vector<std::pair<uint32_t, uint32_t>> canceled_steps;
  [[nodiscard]] absl::Status CancelStep(uint32_t job_id, uint32_t step_id) override {
    canceled_steps.emplace_back(job_id, step_id);
    return absl::OkStatus();
  }
  std::vector<std::string> ExpandHostlist(const std::string& list) override {
    return absl::StrSplit(list, ',', absl::SkipEmpty());
  }
  // A daemon restarted over the same cluster: this fake answers from what `before` knew.
  void TakeOver(const FakeSlurm& before) {
    jobs = before.jobs;
    next_id = before.next_id;
    signals = before.signals;
    canceled_steps = before.canceled_steps;
  }
  // The job starts running on `nodes` ("n1,n2"), at `now` (when given) until `ends` (when
  // given: its time limit).
  void Run(uint32_t id, const std::string& nodes, absl::Time now = absl::InfinitePast(),
           absl::Time ends = absl::InfinitePast()) {
    slurm::JobStatus& s = jobs[id].status;
    s.state = slurm::JobState::kRunning;
    s.nodes = nodes;
    if (now != absl::InfinitePast()) {
      if (s.submit_time == absl::InfinitePast()) s.submit_time = now;
      s.start_time = now;
    }
    s.end_time = ends;
  }
};

}  // namespace hpo::fakes
