// The backend contract (tests/unit/backend/backend_contract.h) over the Slurm backend in both
// modes, against the scripted slurmctld (tests/fakes/fake_slurm.h). The harness plays the
// cluster: it starts what is pending, ends jobs as their trials would, delivers the signals and
// cancels hpod sends, and fails a node under a trial that is to be taken. In steps mode the
// trials are real processes under the real hpo-shim, run by a stand-in for srun.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "backend/process.h"
#include "common/files.h"
#include "slurm_backend/slurm_backend.h"
#include "tests/fakes/fake_slurm.h"
#include "tests/unit/backend/backend_contract.h"
#include "tests/unit/backend/process_trials.h"

namespace hpo::backend::contract {
namespace {

using fakes::FakeSlurm;
using slurm::JobState;
using slurm::SlurmBackend;
using slurm::SlurmPlacement;

// What both modes share: the fake cluster carried over a restart, and the trials' fates.
class SlurmHarness : public BackendHarness {
 public:
  explicit SlurmHarness(std::string mode) {
    placement_.mode = std::move(mode);
    placement_.allocation.gpus_per_node = 0;
    placement_.allocation.cpus_per_node = 2;
    placement_.allocation.max = 1;
    placement_.allocation.idle_timeout = absl::Hours(1);
  }
  ~SlurmHarness() override { backend_.reset(); }
  Backend& backend() override { return *backend_; }
  LaunchSpec Spec(int64_t trial_id, Does does) override {
    does_[trial_id] = does;
    LaunchSpec s = trials_.Spec(trial_id, ProcessTrials::Command(does));
    s.placement = slurm::OnSlurm(placement_);
    return s;
  }
  void Restart() override {
    backend_->Detach();
    Start();
  }

 protected:
  // A new backend over the cluster as it is (the first, or the one a restarted daemon makes).
  void Start() {
    auto fake = std::make_unique<FakeSlurm>(canceled_);
    if (slurm_ != nullptr) fake->TakeOver(*slurm_);
    FakeSlurm* next = fake.get();
    backend_.reset();  // owns the old fake
    slurm_ = next;
    SlurmBackend::Options options;
    options.srun = trials_.dir() + "/srun";
    options.shim = HPO_SHIM;
    options.instance = "contract";
    options.query_interval = options.fast_query_interval = absl::ZeroDuration();
    backend_ = std::make_unique<SlurmBackend>(std::move(fake), clock_, options);
  }
  static bool Live(JobState s) { return s == JobState::kPending || s == JobState::kRunning; }

  ProcessTrials trials_;      // first: it outlives the backend
  SlurmPlacement placement_;  // the sweep's `slurm:` settings
  FakeClock clock_;
  std::vector<uint32_t> canceled_;
  FakeSlurm* slurm_ = nullptr;
  std::unique_ptr<SlurmBackend> backend_;
  std::map<int64_t, Does> does_;
};

// One batch job per trial: the harness ends each as its trial would.
class SlurmJobsHarness : public SlurmHarness {
 public:
  SlurmJobsHarness() : SlurmHarness("jobs") { Start(); }
  void Pass() override {
    clock_.Advance(absl::Seconds(1));
    absl::Time now = clock_.Now();
    std::map<uint32_t, int> signaled;
    for (const FakeSlurm::Sent& s : slurm_->signals) signaled[s.job] = s.signal;
    for (auto& [id, job] : slurm_->jobs) {
      slurm::JobStatus& st = job.status;
      int64_t trial = 0;
      absl::string_view name = st.name;
      if (!absl::ConsumePrefix(&name, "hpo-1-") || !absl::SimpleAtoi(name, &trial)) continue;
      if (st.state == JobState::kPending) {
        slurm_->Run(id, "n1", now, now + absl::Hours(10));
        continue;
      }
      if (st.state != JobState::kRunning) continue;
      if (auto sig = signaled.find(id); sig != signaled.end()) {
        st.state = JobState::kFailed;  // its batch shell died of the stop signal
        st.exit_code = static_cast<uint32_t>(sig->second);
        continue;
      }
      if (now - st.start_time < absl::Seconds(2)) continue;
      if (does_[trial] == Does::kExits3) {
        st.state = JobState::kFailed;
        st.exit_code = 3 << 8;
      } else if (does_[trial] == Does::kIsTaken) {
        st.state = JobState::kNodeFail;
      }
    }
  }
  bool StillRuns(int64_t trial_id) override {
    for (const auto& [id, job] : slurm_->jobs) {
      if (job.status.name == absl::StrCat("hpo-1-", trial_id)) return Live(job.status.state);
    }
    return false;
  }
  Traits traits() const override {
    Traits t;  // a job per trial: no bound but the cluster's
    SlurmPlacement nowhere = placement_;
    nowhere.partition = "nosuch";
    t.never_fits = {{Resources(), slurm::OnSlurm(nowhere)}};
    return t;
  }
};

// Steps in an allocation hpod holds: the harness runs the allocation, delivers what hpod sends
// to the steps, and fails the node under a trial that is to be taken.
class SlurmStepsHarness : public SlurmHarness {
 public:
  SlurmStepsHarness() : SlurmHarness("steps") {
    // srun's stand-in: the command runs as step <trial id> on n1.
    EXPECT_TRUE(
        fakes::WriteSrunStandIn(trials_.dir() + "/srun",
                                "SLURMD_NODENAME=n1 SLURM_PROCID=0 SLURM_STEP_ID=$HPO_TRIAL_ID")
            .ok());
    Start();
  }
  void Restart() override {
    SlurmHarness::Restart();
    // The new daemon takes back the allocations its store knew of.
    for (const auto& [id, job] : slurm_->jobs) {
      if (absl::StartsWith(job.status.name, "hpo-alloc-") && Live(job.status.state)) {
        AllocationUsage usage;
        usage.id = absl::StrCat("slurm:", id);
        usage.sweep_id = 1;
        usage.started_at = job.status.start_time;
        backend_->AdoptAllocation(usage);
      }
    }
  }
  void Pass() override {
    clock_.Advance(absl::Milliseconds(50));
    ::usleep(10'000);
    absl::Time now = clock_.Now();
    for (auto& [id, job] : slurm_->jobs) {
      if (absl::StartsWith(job.status.name, "hpo-alloc-") &&
          job.status.state == JobState::kPending) {
        slurm_->Run(id, "n1", now, now + absl::Hours(10));
      }
    }
    // What hpod sent to steps (whose ids are their trials').
    for (; signals_seen_ < slurm_->signals.size(); ++signals_seen_) {
      const FakeSlurm::Sent& s = slurm_->signals[signals_seen_];
      if (s.step >= 0) trials_.Kill(s.step, s.signal);
    }
    for (; cancels_seen_ < slurm_->canceled_steps.size(); ++cancels_seen_) {
      trials_.Kill(slurm_->canceled_steps[cancels_seen_].second, SIGKILL);
    }
    // A trial to be taken fails its node a second after it started; every step there dies.
    bool node_failed = false;
    for (const auto& [trial, does] : does_) {
      if (does != Does::kIsTaken || !StillRuns(trial)) continue;
      auto [it, first] = seen_running_.emplace(trial, absl::Now());
      node_failed |= !first && absl::Now() - it->second >= absl::Seconds(1);
    }
    for (auto& [id, job] : slurm_->jobs) {
      if (!absl::StartsWith(job.status.name, "hpo-alloc-")) continue;
      if (node_failed && Live(job.status.state)) job.status.state = JobState::kNodeFail;
      // An allocation that ended (failed, or canceled by hpod) takes its steps with it.
      if (!Live(job.status.state)) {
        for (const auto& [trial, does] : does_) trials_.Kill(trial, SIGKILL);
      }
    }
  }
  bool StillRuns(int64_t trial_id) override { return trials_.Runs(trial_id); }
  Traits traits() const override {
    Traits t;
    t.room = 2;  // two one-CPU steps in the one allocation of two CPUs
    Resources wide;
    wide.cpus = 3;
    t.never_fits = {{wide, slurm::OnSlurm(placement_)}};
    return t;
  }

 private:
  size_t signals_seen_ = 0, cancels_seen_ = 0;
  std::map<int64_t, absl::Time> seen_running_;
};

template <typename H>
HarnessMaker Maker(std::string name) {
  return {std::move(name), [] { return std::make_unique<H>(); }};
}

INSTANTIATE_TEST_SUITE_P(Slurm, BackendContract,
                         ::testing::Values(Maker<SlurmStepsHarness>("steps"),
                                           Maker<SlurmJobsHarness>("jobs")),
                         MakerName);

}  // namespace
}  // namespace hpo::backend::contract
