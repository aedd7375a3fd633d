#pragma once
// SlurmStepsTest: SlurmBackend in steps mode against a scripted slurmctld
// (tests/fakes/fake_slurm.h) and a stand-in for srun that runs the trial's command on this
// machine. Shared by slurm_backend_test.cc and slurm_checkpoint_test.cc.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/layout.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "slurm_backend/slurm_backend.h"
#include "tests/fakes/act_now.h"
#include "tests/fakes/fake_slurm.h"

namespace hpo::slurm::steps_test {

using backend::BackendEvent;
using backend::LaunchSpec;
using backend::Placement;
using backend::Resources;
using fakes::FakeSlurm;

class SlurmStepsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hpo-slurm-unit-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    // srun's stand-in, which records its options in argv.log.
    srun_ = dir_ + "/srun";
    ASSERT_TRUE(fakes::WriteSrunStandIn(
                    srun_, "SLURMD_NODENAME=n1 SLURM_PROCID=0 SLURM_STEP_ID=7 SLURM_STEP_GPUS=3,1",
                    /*log_argv=*/true)
                    .ok());
    auto fake = std::make_unique<FakeSlurm>(canceled_);
    slurm_ = fake.get();
    SlurmBackend::Options options;
    options.srun = srun_;
    options.instance = "test";
    options.query_interval = options.fast_query_interval = absl::ZeroDuration();
    backend_ = std::make_unique<SlurmBackend>(std::move(fake), clock_, options);
    placement_.allocation.gpus_per_node = 4;
    placement_.allocation.cpus_per_node = 8;
    placement_.allocation.max = 2;
    placement_.allocation.idle_timeout = absl::Seconds(30);
  }
  void TearDown() override {
    backend_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }
  LaunchSpec Spec(int64_t trial, std::vector<std::string> argv, int gpus) {
    LaunchSpec s;
    s.trial_id = trial;
    s.sweep_id = 1;
    s.argv = std::move(argv);
    s.workdir = dir_;
    s.trial_dir = dir_ + "/t" + std::to_string(trial);
    EXPECT_TRUE(MakeDirs(s.trial_dir).ok());
    s.resources.gpus = gpus;
    s.placement = Where();
    return s;
  }
  Resources Gpus(int n) {
    Resources r;
    r.gpus = n;
    return r;
  }
  // Polls until `n` end events arrived (or 10 s passed).
  std::vector<BackendEvent> WaitEnds(size_t n) {
    std::vector<BackendEvent> ends;
    for (int i = 0; i < 1000 && ends.size() < n; ++i) {
      for (auto& e : backend_->Poll()) {
        if (e.kind == BackendEvent::Kind::kExited || e.kind == BackendEvent::Kind::kLost)
          ends.push_back(e);
      }
      if (ends.size() < n) ::usleep(10'000);
    }
    return ends;
  }
  // What one poll reports of the allocations' cost.
  std::vector<backend::AllocationUsage> PollUsage() {
    std::vector<backend::AllocationUsage> out;
    for (auto& e : backend_->Poll()) {
      if (e.kind == BackendEvent::Kind::kAllocation) out.push_back(e.allocation);
    }
    return out;
  }
  // A running allocation for sweep 1 on `nodes`; returns its job id.
  uint32_t Allocate(const std::string& nodes) {
    EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where()));
    backend_->Poll();  // requests it
    uint32_t id = slurm_->next_id - 1;
    slurm_->Run(id, nodes);
    backend_->Poll();  // sees it run
    return id;
  }
  std::string dir_, srun_;
  std::vector<uint32_t> canceled_;
  FakeClock clock_;
  FakeSlurm* slurm_ = nullptr;
  std::unique_ptr<SlurmBackend> backend_;
  // The sweep's `slurm:` settings; Where() is the placement they make.
  slurm::SlurmPlacement placement_;
  Placement Where() const { return slurm::OnSlurm(placement_); }
};

}  // namespace hpo::slurm::steps_test
