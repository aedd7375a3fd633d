// The only file that includes <slurm/slurm.h>.
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "slurm_backend/slurm_api.h"

// Exported by libslurm 22.05 but not declared in its header.
extern "C" void slurm_free_will_run_response_msg(will_run_response_msg_t* msg);

namespace hpo::slurm {
namespace {

absl::Status SlurmError(absl::string_view what) {
  int err = slurm_get_errno();
  std::string msg = absl::StrCat(what, ": ", slurm_strerror(err));
  // slurmctld's RPC rate limit (rl_enable, Slurm 23.02 and later): its message names it.
  if (absl::StrContains(absl::AsciiStrToLower(msg), "rate limit")) {
    return absl::ResourceExhaustedError(msg);
  }
  if (err == SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR ||
      err == SLURMCTLD_COMMUNICATIONS_SEND_ERROR || err == SLURMCTLD_COMMUNICATIONS_RECEIVE_ERROR ||
      err == SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT || err == SLURM_COMMUNICATIONS_CONNECTION_ERROR) {
    return absl::UnavailableError(msg);
  }
  // The job or step is gone (ended, or ending): what a signal or cancel found.
  if (err == ESLURM_ALREADY_DONE || err == ESLURM_INVALID_JOB_ID || err == ESLURM_JOB_FINISHED ||
      err == ESLURMD_JOB_NOTRUNNING) {
    return absl::NotFoundError(msg);
  }
  return absl::InvalidArgumentError(msg);
}

absl::Time SlurmTime(time_t t) { return t > 0 ? absl::FromTimeT(t) : absl::InfinitePast(); }

JobState FromSlurm(uint32_t state) {
  switch (state & JOB_STATE_BASE) {
    case JOB_PENDING:
      return JobState::kPending;
    case JOB_RUNNING:
    case JOB_SUSPENDED:
      return JobState::kRunning;
    case JOB_COMPLETE:
      return JobState::kCompleted;
    case JOB_CANCELLED:
      return JobState::kCancelled;
    case JOB_FAILED:
      return JobState::kFailed;
    case JOB_TIMEOUT:
      return JobState::kTimeout;
    case JOB_NODE_FAIL:
      return JobState::kNodeFail;
    case JOB_PREEMPTED:
      return JobState::kPreempted;
    case JOB_BOOT_FAIL:
      return JobState::kBootFail;
    case JOB_DEADLINE:
      return JobState::kDeadline;
    case JOB_OOM:
      return JobState::kOutOfMemory;
    default:
      return JobState::kOther;
  }
}

// A job_desc_msg_t whose strings point into `req` (which must outlive it).
class Desc {
 public:
  explicit Desc(const JobRequest& req) {
    slurm_init_job_desc_msg(&d_);
    d_.name = Str(req.name);
    d_.script = Str(req.script);
    d_.work_dir = Str(req.workdir);
    d_.std_out = Str(req.stdout_path);
    d_.std_err = Str(req.stderr_path);
    for (const auto& e : req.environment) env_.push_back(const_cast<char*>(e.c_str()));
    if (env_.empty()) env_.push_back(const_cast<char*>("HPO=1"));  // Slurm needs at least one
    d_.environment = env_.data();
    d_.env_size = static_cast<uint32_t>(env_.size());
    d_.min_nodes = d_.max_nodes = static_cast<uint32_t>(req.nodes);
    d_.ntasks_per_node = static_cast<uint16_t>(req.tasks_per_node);
    d_.num_tasks = static_cast<uint32_t>(req.nodes * req.tasks_per_node);
    d_.cpus_per_task = static_cast<uint16_t>(req.cpus_per_task);
    d_.min_cpus = d_.num_tasks * d_.cpus_per_task;
    if (req.gpus_per_node > 0) {
      tres_ = absl::StrCat("gres:gpu:", req.gpus_per_node);
      d_.tres_per_node = tres_.data();
    }
    if (!req.partition.empty()) d_.partition = Str(req.partition);
    if (!req.account.empty()) d_.account = Str(req.account);
    if (!req.qos.empty()) d_.qos = Str(req.qos);
    if (!req.constraint.empty()) d_.features = Str(req.constraint);
    if (!req.reservation.empty()) d_.reservation = Str(req.reservation);
    if (!req.exclude.empty()) d_.exc_nodes = Str(req.exclude);
    if (req.time_limit_minutes > 0) d_.time_limit = req.time_limit_minutes;
    if (req.memory_mb > 0) d_.pn_min_memory = static_cast<uint64_t>(req.memory_mb);
    if (req.exclusive) d_.shared = JOB_SHARED_NONE;
    if (!req.comment.empty()) d_.comment = Str(req.comment);
    if (!req.licenses.empty()) d_.licenses = Str(req.licenses);
    if (req.warn_signal > 0) {
      d_.warn_signal = static_cast<uint16_t>(req.warn_signal);
      d_.warn_time = req.warn_seconds;
      d_.warn_flags = KILL_JOB_BATCH;
    }
    if (req.append_output) d_.open_mode = OPEN_MODE_APPEND;
    // hpod decides what is retried: a job Slurm requeued after a node failure would run the
    // trial a second time behind hpod's back (and a holder allocation would come back empty).
    d_.requeue = 0;
    d_.user_id = ::getuid();
    d_.group_id = ::getgid();
  }
  job_desc_msg_t* get() { return &d_; }

 private:
  static char* Str(const std::string& s) {
    return s.empty() ? nullptr : const_cast<char*>(s.c_str());
  }
  job_desc_msg_t d_;
  std::vector<char*> env_;
  std::string tres_;
};

class LibSlurm final : public SlurmApi {
 public:
  explicit LibSlurm(const std::string& conf) { slurm_init(conf.empty() ? nullptr : conf.c_str()); }
  ~LibSlurm() override { slurm_fini(); }

  absl::StatusOr<uint32_t> Submit(const JobRequest& req) override {
    std::lock_guard<std::mutex> lock(mu_);
    Desc desc(req);
    submit_response_msg_t* resp = nullptr;
    if (slurm_submit_batch_job(desc.get(), &resp) != SLURM_SUCCESS) return SlurmError("sbatch");
    uint32_t id = resp->job_id;
    slurm_free_submit_response_response_msg(resp);
    return id;
  }

  absl::StatusOr<absl::Time> WillRun(const JobRequest& req) override {
    std::lock_guard<std::mutex> lock(mu_);
    Desc desc(req);
    will_run_response_msg_t* resp = nullptr;  // (slurm_job_will_run would print to stderr)
    if (slurm_job_will_run2(desc.get(), &resp) != SLURM_SUCCESS)
      return SlurmError("Slurm refuses the trial's job");
    absl::Time start =
        resp != nullptr && resp->start_time > 0 ? absl::FromTimeT(resp->start_time) : absl::Now();
    slurm_free_will_run_response_msg(resp);
    return start;
  }

  absl::StatusOr<std::vector<JobStatus>> QueryMine() override {
    std::lock_guard<std::mutex> lock(mu_);
    job_info_msg_t* msg = nullptr;
    // SHOW_LOCAL: this cluster's jobs only, in one RPC (without it libslurm first asks for the
    // federation, a second RPC per query).
    if (slurm_load_job_user(&msg, ::getuid(), SHOW_ALL | SHOW_LOCAL) != SLURM_SUCCESS)
      return SlurmError("squeue");
    std::vector<JobStatus> out;
    for (uint32_t i = 0; i < msg->record_count; ++i) {
      const slurm_job_info_t& j = msg->job_array[i];
      JobStatus s;
      s.job_id = j.job_id;
      s.state = FromSlurm(j.job_state);
      s.exit_code = j.exit_code;
      s.nodes = j.nodes != nullptr ? j.nodes : "";
      s.name = j.name != nullptr ? j.name : "";
      s.submit_time = SlurmTime(j.submit_time);
      s.start_time = SlurmTime(j.start_time);
      s.end_time = SlurmTime(j.end_time);
      // A running job without a time limit has no end yet.
      if (s.state == JobState::kRunning && j.time_limit == INFINITE) {
        s.end_time = absl::InfiniteFuture();
      }
      s.preempt_time = SlurmTime(j.preempt_time);
      out.push_back(std::move(s));
    }
    slurm_free_job_info_msg(msg);
    return out;
  }

  absl::StatusOr<std::vector<PartitionLimits>> QueryPartitions() override {
    std::lock_guard<std::mutex> lock(mu_);
    partition_info_msg_t* msg = nullptr;
    if (slurm_load_partitions(0, &msg, SHOW_ALL | SHOW_LOCAL) != SLURM_SUCCESS)
      return SlurmError("sinfo");
    auto minutes = [](uint32_t m) {
      return m == INFINITE ? absl::InfiniteDuration() : absl::Minutes(m);
    };
    std::vector<PartitionLimits> out;
    for (uint32_t i = 0; i < msg->record_count; ++i) {
      const partition_info_t& p = msg->partition_array[i];
      PartitionLimits l;
      l.name = p.name != nullptr ? p.name : "";
      l.is_default = (p.flags & PART_FLAG_DEFAULT) != 0;
      if (p.default_time != NO_VAL) l.default_time = minutes(p.default_time);
      l.max_time = p.max_time == NO_VAL ? absl::InfiniteDuration() : minutes(p.max_time);
      out.push_back(std::move(l));
    }
    slurm_free_partition_info_msg(msg);
    return out;
  }

  absl::StatusOr<std::vector<NodeHost>> QueryNodes() override {
    std::lock_guard<std::mutex> lock(mu_);
    node_info_msg_t* msg = nullptr;
    if (slurm_load_node(0, &msg, SHOW_ALL) != SLURM_SUCCESS)
      return SlurmError("scontrol show nodes");
    std::vector<NodeHost> out;
    for (uint32_t i = 0; i < msg->record_count; ++i) {
      const node_info_t& n = msg->node_array[i];
      if (n.name == nullptr) continue;
      out.push_back({n.name, n.node_hostname != nullptr ? n.node_hostname : n.name,
                     n.node_addr != nullptr ? n.node_addr : n.name});
    }
    slurm_free_node_info_msg(msg);
    return out;
  }

  absl::Status Signal(uint32_t job_id, int signal) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (slurm_kill_job(job_id, static_cast<uint16_t>(signal), KILL_FULL_JOB) != SLURM_SUCCESS) {
      return SlurmError(absl::StrCat("signal job ", job_id));
    }
    return absl::OkStatus();
  }

  absl::Status Cancel(uint32_t job_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (slurm_kill_job(job_id, SIGKILL, 0) != SLURM_SUCCESS)
      return SlurmError(absl::StrCat("scancel ", job_id));
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<StepStatus>> QuerySteps(uint32_t job_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    job_step_info_response_msg_t* msg = nullptr;
    if (slurm_get_job_steps(0, job_id, NO_VAL, &msg, SHOW_ALL | SHOW_LOCAL) != SLURM_SUCCESS)
      return SlurmError(absl::StrCat("squeue -s -j ", job_id));
    std::vector<StepStatus> out;
    for (uint32_t i = 0; i < msg->job_step_count; ++i) {
      const job_step_info_t& st = msg->job_steps[i];
      if (st.step_id.step_id >= SLURM_MAX_NORMAL_STEP_ID) continue;  // batch, extern, pending (TDB)
      StepStatus s;
      s.job_id = st.step_id.job_id;
      s.step_id = st.step_id.step_id;
      s.name = st.name != nullptr ? st.name : "";
      s.nodes = st.nodes != nullptr ? st.nodes : "";
      out.push_back(std::move(s));
    }
    slurm_free_job_step_info_response_msg(msg);
    return out;
  }

  absl::Status SignalStep(uint32_t job_id, uint32_t step_id, int signal) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (slurm_signal_job_step(job_id, step_id, static_cast<uint16_t>(signal)) != SLURM_SUCCESS) {
      return SlurmError(absl::StrCat("signal step ", job_id, ".", step_id));
    }
    return absl::OkStatus();
  }

  absl::Status CancelStep(uint32_t job_id, uint32_t step_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (slurm_kill_job_step(job_id, step_id, SIGKILL) != SLURM_SUCCESS) {
      return SlurmError(absl::StrCat("scancel ", job_id, ".", step_id));
    }
    return absl::OkStatus();
  }

  // Local work on a list of its own: not behind mu_, so that a slow call to slurmctld on another
  // thread never holds up the controller's thread here.
  std::vector<std::string> ExpandHostlist(const std::string& list) override {
    std::vector<std::string> out;
    hostlist_t hl = slurm_hostlist_create(list.c_str());
    if (hl == nullptr) return out;
    while (char* host = slurm_hostlist_shift(hl)) {
      out.emplace_back(host);
      std::free(host);
    }
    slurm_hostlist_destroy(hl);
    return out;
  }

 private:
  std::mutex mu_;  // one call at a time
};

}  // namespace

std::unique_ptr<SlurmApi> MakeLibSlurm(const std::string& conf) {
  return std::make_unique<LibSlurm>(conf);
}

}  // namespace hpo::slurm
