// SlurmBackend's steps mode against a scripted slurmctld (tests/fakes/fake_slurm.h) and a stand-in
// for srun that runs the trial's command on this machine (slurm_steps_fixture.h): packing, the
// pool growing and shrinking, quarantined nodes, and how a step's end is classified. The real thing
// runs in tests/slurm/test_steps_mode.sh.
#include <csignal>

#include "tests/unit/slurm_backend/slurm_steps_fixture.h"

namespace hpo::slurm {
namespace {

using backend::BackendEvent;
using backend::LaunchSpec;
using backend::Placement;
using backend::Resources;
using fakes::FakeSlurm;
using steps_test::SlurmStepsTest;

using ::testing::Contains;
using ::testing::HasSubstr;

TEST_F(SlurmStepsTest, RequestsOneAllocationAtATimeShapedByTheSweep) {
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where()));
  backend_->Poll();
  ASSERT_EQ(slurm_->jobs.size(), 1u);
  const JobRequest& req = slurm_->jobs.begin()->second.req;
  EXPECT_EQ(req.name, "hpo-alloc-test-1");
  EXPECT_EQ(req.gpus_per_node, 4);
  EXPECT_EQ(req.tasks_per_node, 8);  // one-CPU tasks, so steps split CPUs freely
  EXPECT_EQ(req.cpus_per_task, 1);
  EXPECT_THAT(req.script, HasSubstr("sleep infinity"));
  // Still pending: asking again does not request a second one.
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where()));
  backend_->Poll();
  EXPECT_EQ(slurm_->jobs.size(), 1u);
  slurm_->Run(100, "n1");
  backend_->Poll();
  EXPECT_TRUE(backend_->CanLaunch(1, Gpus(4), Where()));
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(5), Where()));
  EXPECT_FALSE(backend_->CanLaunch(2, Gpus(1), Where())) << "another sweep's allocation";
}

TEST_F(SlurmStepsTest, PacksStepsIntoFreeGpusAndGrowsToMax) {
  uint32_t job = Allocate("n1");
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(1, {"sleep", "5"}, 2)).ok());
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(2, {"sleep", "5"}, 1)).ok());
  EXPECT_TRUE(backend_->CanLaunch(1, Gpus(1), Where()));
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(2), Where()));  // 1 GPU left
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(3, {"sleep", "5"}, 1)).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(fakes::LaunchNow(*backend_, Spec(4, {"true"}, 1))));
  // The full allocation makes the pool grow, once, to max = 2.
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where()));
  backend_->Poll();
  EXPECT_EQ(slurm_->jobs.size(), 2u);
  slurm_->Run(101, "n2");
  backend_->Poll();
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(4, {"sleep", "5"}, 4)).ok());
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where()));
  backend_->Poll();
  EXPECT_EQ(slurm_->jobs.size(), 2u) << "max is 2";
  auto started = [&] {  // srun stand-ins that logged their options (one "--jobid=" each)
    std::string log = ReadFile(dir_ + "/argv.log").value_or("");
    size_t n = 0;
    for (size_t at = log.find("--jobid="); at != std::string::npos;
         at = log.find("--jobid=", at + 1))
      ++n;
    return n;
  };
  for (int i = 0; i < 500 && started() < 4; ++i) ::usleep(10'000);
  for (int64_t t = 1; t <= 4; ++t) EXPECT_TRUE(fakes::StopNow(*backend_, t, absl::Seconds(1)).ok());
  EXPECT_EQ(WaitEnds(4).size(), 4u);
  std::string argv = ReadFile(dir_ + "/argv.log").value_or("");
  EXPECT_THAT(argv, HasSubstr(absl::StrCat("--jobid=", job, " --exact")));
  EXPECT_THAT(argv, HasSubstr("--job-name=hpo-1-1 "));
  EXPECT_THAT(argv, HasSubstr("--nodelist=n1 --gres=gpu:2"));
  EXPECT_THAT(argv, HasSubstr("--jobid=101 --exact --quiet --job-name=hpo-1-4 --nodes=1 --ntasks=1 "
                              "--ntasks-per-node=1 --cpus-per-task=1 --nodelist=n2 --gres=gpu:4"));
}

// Quarantined nodes: steps skip them, later allocations exclude them, an allocation on nothing
// else is replaced (and released once idle), and a node let back in takes steps again.
TEST_F(SlurmStepsTest, QuarantinedNodesTakeNoStepsAndLaterAllocationsExcludeThem) {
  EXPECT_EQ(backend_->NodesOf("slurm:job=5 step=2 nodes=n1,n2 agent"),
            (std::vector<std::string>{"n1", "n2"}));
  EXPECT_TRUE(backend_->NodesOf("local:pid=12").empty());
  placement_.allocation.max = 1;
  uint32_t first = Allocate("n1,n2");
  backend_->ExcludeNodes(1, {"n1"});
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(1, {"sleep", "5"}, 4)).ok());
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where())) << "n2 is full, n1 is quarantined";
  // Both quarantined: the allocation counts no more, so its replacement is asked for (max 1)
  // without either node, and the old one goes once its last step ended.
  backend_->ExcludeNodes(1, {"n1", "n2"});
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where()));
  backend_->Poll();
  ASSERT_EQ(slurm_->jobs.size(), 2u);
  EXPECT_EQ(slurm_->jobs.rbegin()->second.req.exclude, "n1,n2");
  EXPECT_TRUE(fakes::StopNow(*backend_, 1, absl::Seconds(1)).ok());
  EXPECT_EQ(WaitEnds(1).size(), 1u);
  backend_->Poll();
  EXPECT_THAT(canceled_, Contains(first));
  // Let back in: a later allocation asks for no exclusion.
  backend_->ExcludeNodes(1, {});
  EXPECT_EQ(backend_->Excluding(JobRequest(), 1).exclude, "");
  backend_->ExcludeNodes(1, {"n3"});
  EXPECT_EQ(backend_->Excluding(JobRequest(), 1).exclude, "n3");
}

// Slurm tells only the step which GPUs it got: its task records them, and the backend reports
// them once it read them back.
TEST_F(SlurmStepsTest, LearnsTheGpusSlurmGaveAStep) {
  Allocate("n1");
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(1, {"sleep", "5"}, 2)).ok());
  std::string gpus;
  for (int i = 0; i < 500 && gpus.empty(); ++i) {
    clock_.Advance(absl::Seconds(1));
    for (const BackendEvent& e : backend_->Poll()) {
      if (e.kind == BackendEvent::Kind::kUpdated && !e.gpus.empty()) gpus = e.gpus;
    }
    if (gpus.empty()) ::usleep(10'000);
  }
  EXPECT_EQ(gpus, "n1:1,3");
  EXPECT_TRUE(fakes::StopNow(*backend_, 1, absl::Seconds(1)).ok());
  EXPECT_EQ(WaitEnds(1).size(), 1u);
}

// slurmctld forgets a step once it ended; the step's own record keeps its id and nodes, also for
// a step that ends before hpod ever asked slurmctld about it.
TEST_F(SlurmStepsTest, RecordsTheIdAndNodesOfAStepShorterThanAPoll) {
  Allocate("n1");
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(1, {"true"}, 0)).ok());
  std::string last_id;
  bool ended = false;
  for (int i = 0; i < 1000 && !ended; ++i) {
    for (const BackendEvent& e : backend_->Poll()) {
      if (e.kind == BackendEvent::Kind::kUpdated) last_id = e.backend_id;
      if (e.kind == BackendEvent::Kind::kExited) ended = true;
    }
    if (!ended) ::usleep(10'000);
  }
  ASSERT_TRUE(ended);
  EXPECT_THAT(last_id, HasSubstr("step=7 nodes=n1")) << "reported before the end";
}

TEST_F(SlurmStepsTest, CpuOnlyStepsNameNoGres) {
  Allocate("n1");
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(1, {"true"}, 0)).ok());
  auto ends = WaitEnds(1);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].kind, BackendEvent::Kind::kExited);
  EXPECT_EQ(ends[0].exit_code, 0);
  EXPECT_THAT(ReadFile(dir_ + "/argv.log").value_or(""), HasSubstr("--gres=none"));
}

TEST_F(SlurmStepsTest, TellsFailuresFromStepsTakenAway) {
  Allocate("n1");
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(1, {"sh", "-c", "exit 3"}, 1)).ok());
  ASSERT_TRUE(fakes::LaunchNow(*backend_,
                               Spec(2,
                                    {"sh", "-c",
                                     "echo 'slurmstepd: error: *** STEP 100.7 ON n1 CANCELLED AT "
                                     "2026-11-30T10:00:00 ***' >&2; exit 137"},
                                    1))
                  .ok());
  auto ends = WaitEnds(2);
  ASSERT_EQ(ends.size(), 2u);
  for (const auto& e : ends) {
    if (e.trial_id == 1) {
      EXPECT_EQ(e.kind, BackendEvent::Kind::kExited);
      EXPECT_EQ(e.exit_code, 3);
    } else {
      EXPECT_EQ(e.kind, BackendEvent::Kind::kLost);
      EXPECT_THAT(e.message, HasSubstr("canceled outside hpod"));
    }
  }
}

TEST_F(SlurmStepsTest, AnAllocationThatEndsUnderAStepLosesIt) {
  uint32_t job = Allocate("n1");
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(1, {"sh", "-c", "sleep 0.5; exit 1"}, 1)).ok());
  slurm_->jobs[job].status.state = JobState::kTimeout;
  backend_->Poll();
  auto ends = WaitEnds(1);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].kind, BackendEvent::Kind::kLost);
  EXPECT_THAT(ends[0].message, HasSubstr("time limit"));
}

TEST_F(SlurmStepsTest, ReleasesIdleAllocationsAndAllWhenTheSweepEnds) {
  uint32_t job = Allocate("n1");
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(1, {"true"}, 1)).ok());
  ASSERT_EQ(WaitEnds(1).size(), 1u);
  clock_.Advance(absl::Seconds(29));
  backend_->Poll();
  EXPECT_TRUE(slurm_->canceled.empty()) << "still within idle_timeout";
  // A waiting trial keeps it.
  EXPECT_TRUE(backend_->CanLaunch(1, Gpus(1), Where()));
  clock_.Advance(absl::Seconds(2));
  backend_->Poll();
  EXPECT_THAT(slurm_->canceled, Contains(job));

  uint32_t second = Allocate("n1");
  backend_->SweepEnded(1);
  EXPECT_THAT(slurm_->canceled, Contains(second)) << "the sweep's end releases at once";
}

// What an allocation costs is reported from the start slurmctld gives it to the moment hpod
// releases it, or to the end slurmctld gives it; one that never ran costs nothing.
TEST_F(SlurmStepsTest, ReportsWhatEachAllocationCostsFromItsStartToItsEnd) {
  absl::Time t0 = clock_.Now();
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where()));
  EXPECT_TRUE(PollUsage().empty()) << "requested, not running";
  clock_.Advance(absl::Seconds(5));
  slurm_->Run(100, "n1,n2", t0 + absl::Seconds(3), t0 + absl::Hours(1));
  std::vector<backend::AllocationUsage> u = PollUsage();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].id, "slurm:100");
  EXPECT_EQ(u[0].sweep_id, 1);
  EXPECT_EQ(u[0].gpus, 8) << "two nodes of 4 GPUs";
  EXPECT_EQ(u[0].nodes, 2);
  EXPECT_EQ(u[0].started_at, t0 + absl::Seconds(3)) << "slurmctld's start";
  EXPECT_EQ(u[0].ends_at, t0 + absl::Hours(1));
  EXPECT_FALSE(u[0].ended_at);
  // An administrator moves its end: reported again.
  slurm_->jobs[100].status.end_time = t0 + absl::Hours(2);
  u = PollUsage();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].ends_at, t0 + absl::Hours(2));
  // Idle past its timeout: released now, and its cost ends now.
  clock_.Advance(absl::Seconds(31));
  u = PollUsage();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_THAT(canceled_, Contains(100u));
  EXPECT_EQ(u[0].ended_at, t0 + absl::Seconds(36));
  EXPECT_TRUE(PollUsage().empty()) << "once";

  // One that slurmctld ends (its time limit) ends when slurmctld says.
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where()));
  backend_->Poll();
  uint32_t second = slurm_->next_id - 1;
  slurm_->Run(second, "n1", clock_.Now(), clock_.Now() + absl::Minutes(1));
  ASSERT_EQ(PollUsage().size(), 1u);
  clock_.Advance(absl::Minutes(2));
  slurm_->jobs[second].status.state = JobState::kTimeout;
  slurm_->jobs[second].status.end_time = clock_.Now() - absl::Seconds(50);
  u = PollUsage();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].gpus, 4);
  EXPECT_EQ(u[0].ended_at, clock_.Now() - absl::Seconds(50));

  // One canceled while pending never ran: nothing to count.
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where()));
  backend_->Poll();
  backend_->SweepEnded(1);
  EXPECT_TRUE(PollUsage().empty());
}

// After a restart the allocations the store says were held come back: one still running keeps
// its record; one slurmctld still knows ended when it says; one it forgot ended when its time
// limit said it would (or now, when there was none).
TEST_F(SlurmStepsTest, ARestartEndsTheRecordsOfAllocationsThatEndedMeanwhile) {
  absl::Time now = clock_.Now();
  slurm_->jobs[60] = {JobRequest{}, {60, JobState::kRunning, 0, "n1", "hpo-alloc-test-1"}};
  slurm_->jobs[60].status.start_time = now - absl::Hours(2);
  slurm_->jobs[61] = {JobRequest{}, {61, JobState::kTimeout, 0, "n1", "hpo-alloc-test-1"}};
  slurm_->jobs[61].status.end_time = now - absl::Minutes(3);
  auto record = [&](const std::string& id, absl::Time ends_at) {
    backend::AllocationUsage a;
    a.id = id;
    a.sweep_id = 1;
    a.gpus = 4;
    a.nodes = 1;
    a.started_at = now - absl::Hours(2);
    a.ends_at = ends_at;
    return a;
  };
  backend_->AdoptAllocation(record("slurm:60", now + absl::Hours(1)));
  backend_->AdoptAllocation(record("slurm:61", now - absl::Minutes(2)));
  backend_->AdoptAllocation(record("slurm:62", now - absl::Minutes(10)));
  backend_->AdoptAllocation(record("slurm:63", absl::InfiniteFuture()));
  EXPECT_TRUE(absl::IsNotFound(backend_->Adopt(Spec(1, {"true"}, 1), "", "")));  // sweep 1 runs
  std::map<std::string, backend::AllocationUsage> by_id;
  for (int i = 0; i < 2; ++i) {
    for (auto& u : PollUsage()) by_id[u.id] = u;
  }
  ASSERT_EQ(by_id.size(), 4u);
  EXPECT_FALSE(by_id["slurm:60"].ended_at) << "taken back, still held";
  EXPECT_EQ(by_id["slurm:60"].started_at, now - absl::Hours(2));
  EXPECT_EQ(by_id["slurm:61"].ended_at, now - absl::Minutes(3)) << "slurmctld's end";
  EXPECT_EQ(by_id["slurm:62"].ended_at, now - absl::Minutes(10)) << "its time limit";
  EXPECT_EQ(by_id["slurm:63"].ended_at, now);
  EXPECT_TRUE(canceled_.empty());
  EXPECT_TRUE(backend_->CanLaunch(1, Gpus(4), Where())) << "60 is the sweep's again";
}

TEST_F(SlurmStepsTest, NeverCancelsTheUsersOwnAllocation) {
  slurm_->jobs[42] = {JobRequest{}, {42, JobState::kRunning, 0, "n1", "interactive"}};
  placement_.allocation.job = 42;
  EXPECT_TRUE(backend_->CheckFits(Gpus(2), Where()).ok());
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where()));
  backend_->Poll();  // adopts it
  backend_->Poll();  // sees it run
  EXPECT_EQ(slurm_->jobs.size(), 1u) << "nothing requested";
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(1, {"true"}, 1)).ok());
  ASSERT_EQ(WaitEnds(1).size(), 1u);
  backend_->SweepEnded(1);
  backend_.reset();  // the daemon going away does not take it either
  EXPECT_TRUE(canceled_.empty());
}

// hpod in a job of its own (--as-job) runs no steps in the user's allocation: their sruns, on
// hpod's node, would end with hpod's job.
TEST_F(SlurmStepsTest, HpodInAJobRefusesStepsInTheUsersOwnAllocation) {
  std::vector<uint32_t> canceled;
  SlurmBackend::Options options;
  options.srun = srun_;
  options.in_job = true;
  SlurmBackend in_job(std::make_unique<FakeSlurm>(canceled), clock_, options);
  EXPECT_TRUE(in_job.CheckFits(Gpus(2), Where()).ok()) << "an allocation hpod holds";
  placement_.allocation.job = 42;
  absl::Status s = in_job.CheckFits(Gpus(2), Where());
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("--as-job"));
  EXPECT_TRUE(backend_->CheckFits(Gpus(2), Where()).ok()) << "hpod outside Slurm";
}

// An allocation requested just before hpod died: the restarted daemon takes it back for its sweep
// (it still runs) instead of canceling it, and cancels one whose sweep it no longer runs.
TEST_F(SlurmStepsTest, ARestartTakesBackTheAllocationsOfItsSweeps) {
  slurm_->jobs[50] = {JobRequest{}, {50, JobState::kPending, 0, "", "hpo-alloc-test-1"}};
  slurm_->jobs[51] = {JobRequest{}, {51, JobState::kRunning, 0, "n2", "hpo-alloc-test-9"}};
  slurm_->jobs[52] = {JobRequest{}, {52, JobState::kRunning, 0, "n3", "hpo-alloc-other-1"}};
  // Sweep 1's trial was only waiting for room: nothing of it to adopt, but its sweep runs.
  EXPECT_TRUE(absl::IsNotFound(backend_->Adopt(Spec(1, {"true"}, 1), "", "")));
  backend_->Poll();
  EXPECT_EQ(canceled_, std::vector<uint32_t>{51}) << "sweep 9 is not run by this daemon";
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where())) << "still pending";
  backend_->Poll();
  EXPECT_EQ(slurm_->jobs.size(), 3u) << "no second allocation while the old one is on its way";
  slurm_->Run(50, "n1");
  backend_->Poll();
  EXPECT_TRUE(backend_->CanLaunch(1, Gpus(4), Where()));
  EXPECT_EQ(slurm_->jobs.size(), 3u);
}

// Right after a restart, before slurmctld answered, a sweep at allocation.max holds the
// allocation the store recorded: no new one is requested until the first query settles it.
TEST_F(SlurmStepsTest, AnAllocationHeldBeforeARestartCountsTowardMaxUntilSettled) {
  absl::Time now = clock_.Now();
  placement_.allocation.max = 1;
  slurm_->jobs[70] = {JobRequest{}, {70, JobState::kRunning, 0, "n1", "hpo-alloc-test-1"}};
  slurm_->jobs[70].status.start_time = now - absl::Hours(1);
  backend::AllocationUsage held;
  held.id = "slurm:70";
  held.sweep_id = 1;
  held.gpus = 4;
  held.nodes = 1;
  held.started_at = now - absl::Hours(1);
  held.ends_at = now + absl::Hours(1);
  backend_->AdoptAllocation(held);
  EXPECT_TRUE(absl::IsNotFound(backend_->Adopt(Spec(1, {"true"}, 1), "", "")));  // sweep 1 runs
  slurm_->query_error = absl::UnavailableError("slurmctld is not answering");
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where()));
  for (int i = 0; i < 3; ++i) backend_->Poll();
  EXPECT_EQ(slurm_->jobs.size(), 1u) << "allocation 70 may still run: nothing more requested";
  slurm_->query_error = absl::OkStatus();
  for (int i = 0; i < 3 && !backend_->CanLaunch(1, Gpus(4), Where()); ++i) {
    clock_.Advance(absl::Seconds(2));
    backend_->Poll();
  }
  EXPECT_TRUE(backend_->CanLaunch(1, Gpus(4), Where())) << "70 is the sweep's again";
  EXPECT_EQ(slurm_->jobs.size(), 1u);
  EXPECT_TRUE(canceled_.empty());
}

// A trial's job that Slurm ended is LOST with what ended it (none of which counts against the
// sweep): the time limit, a preemption, a node failure, an outside scancel.
TEST_F(SlurmStepsTest, JobsTheInfrastructureEndsAreLostWithTheirCause) {
  placement_.mode = "jobs";
  const std::pair<JobState, backend::Interruption> cases[] = {
      {JobState::kTimeout, backend::Interruption::kTimeLimit},
      {JobState::kPreempted, backend::Interruption::kPreempted},
      {JobState::kNodeFail, backend::Interruption::kNodeFailure},
      {JobState::kBootFail, backend::Interruption::kNodeFailure},
      {JobState::kCancelled, backend::Interruption::kCanceledOutside},
  };
  int64_t trial = 1;
  for (const auto& [state, want] : cases) {
    ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(trial, {"true"}, 1)).ok());
    uint32_t job = slurm_->next_id - 1;
    slurm_->Run(job, "n1");
    backend_->Poll();  // started
    slurm_->jobs[job].status.state = state;
    std::vector<BackendEvent> events = backend_->Poll();
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].kind, BackendEvent::Kind::kLost) << static_cast<int>(state);
    EXPECT_EQ(events[0].interruption, want) << events[0].message;
    ++trial;
  }
  // Out of memory is the trial's own doing.
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(trial, {"true"}, 1)).ok());
  uint32_t job = slurm_->next_id - 1;
  slurm_->Run(job, "n1");
  backend_->Poll();
  slurm_->jobs[job].status.state = JobState::kOutOfMemory;
  std::vector<BackendEvent> events = backend_->Poll();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, BackendEvent::Kind::kExited);
  EXPECT_THAT(events[0].message, HasSubstr("out of memory"));
}

// A job that ended before hpod's signal and stop reached it (slurmctld knew; hpod had not polled
// yet) says so with its end, so that hpod judges it by how it ended, not by why it stopped it.
TEST_F(SlurmStepsTest, AJobThatEndedBeforeItsSignalSaysSo) {
  placement_.mode = "jobs";
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(1, {"true"}, 1)).ok());
  uint32_t job = slurm_->next_id - 1;
  slurm_->Run(job, "n1");
  backend_->Poll();  // started
  slurm_->jobs[job].status.state = JobState::kCompleted;
  ASSERT_TRUE(backend_->SendSignal(1, SIGUSR1).ok());
  ASSERT_TRUE(fakes::StopNow(*backend_, 1, absl::Seconds(2)).ok());
  std::vector<BackendEvent> events = backend_->Poll();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, BackendEvent::Kind::kExited);
  EXPECT_EQ(events[0].exit_code, 0);
  EXPECT_TRUE(events[0].stop_requested);
  EXPECT_TRUE(events[0].ended_first);
  // One that was running when the first signal came does not, though the stop found it gone:
  // it may have ended because of that signal.
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(2, {"true"}, 1)).ok());
  job = slurm_->next_id - 1;
  slurm_->Run(job, "n1");
  backend_->Poll();
  ASSERT_TRUE(backend_->SendSignal(2, SIGUSR1).ok());
  backend_->Act();
  slurm_->jobs[job].status.state = JobState::kCompleted;
  ASSERT_TRUE(fakes::StopNow(*backend_, 2, absl::Seconds(2)).ok());
  events = backend_->Poll();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_FALSE(events[0].ended_first);
}

// A job slurmctld forgot (MinJobAge passed while nobody looked) ended as hpo-shim wrote down in
// the trial directory; without that record it is LOST. Its batch script runs the trial under
// the shim.
TEST_F(SlurmStepsTest, AJobSlurmctldForgotEndsAsItsExitRecordSays) {
  placement_.mode = "jobs";
  EXPECT_THAT(SlurmBackend::Request(Spec(9, {"true"}, 1), "/opt/hpo/bin/hpo-shim").script,
              HasSubstr("exec /opt/hpo/bin/hpo-shim " + dir_ + "/t9 -- true"));
  for (int64_t trial : {1, 2}) {
    LaunchSpec spec = Spec(trial, {"true"}, 1);
    ASSERT_TRUE(fakes::LaunchNow(*backend_, spec).ok());
    uint32_t job = slurm_->next_id - 1;
    slurm_->Run(job, "n1");
    backend_->Poll();  // started
    if (trial == 1) {
      ASSERT_TRUE(WriteFileAtomic(layout::TrialDir(spec.trial_dir).shim_exit(), "exit 3\n").ok());
    }
    slurm_->jobs.erase(job);
    std::vector<BackendEvent> ends;
    for (int i = 0; i < 25 && ends.empty(); ++i) {
      for (auto& e : backend_->Poll()) ends.push_back(e);
    }
    ASSERT_EQ(ends.size(), 1u);
    if (trial == 1) {
      EXPECT_EQ(ends[0].kind, BackendEvent::Kind::kExited);
      EXPECT_EQ(ends[0].exit_code, 3);
    } else {
      EXPECT_EQ(ends[0].kind, BackendEvent::Kind::kLost);
      EXPECT_THAT(ends[0].message, HasSubstr("vanished"));
    }
  }
}

// A step that Slurm cut short at its allocation's time limit is LOST, even when the trial
// exited 0 on the signal: it did not finish.
TEST_F(SlurmStepsTest, AStepCutShortByTheTimeLimitIsLostEvenIfItExitedZero) {
  Allocate("n1");
  ASSERT_TRUE(fakes::LaunchNow(*backend_,
                               Spec(1,
                                    {"sh", "-c",
                                     "echo 'slurmstepd: error: *** STEP 100.7 ON n1 CANCELLED AT "
                                     "2026-11-30T10:00:00 DUE TO TIME LIMIT ***' >&2; exit 0"},
                                    1))
                  .ok());
  auto ends = WaitEnds(1);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].kind, BackendEvent::Kind::kLost);
  EXPECT_EQ(ends[0].interruption, backend::Interruption::kTimeLimit);
  EXPECT_THAT(ends[0].message, HasSubstr("time limit"));
}

TEST_F(SlurmStepsTest, ChecksTheAllocationAtSubmit) {
  // What hpod knows itself, on the controller's thread: the trial's fit in the allocation.
  EXPECT_TRUE(backend_->CheckFits(Gpus(4), Where()).ok());
  absl::Status s = backend_->CheckFits(Gpus(5), Where());
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not fit in the sweep's allocation"));
  // What only slurmctld can say, asked off that thread (inline here: no worker in unit tests).
  auto vet = [&](int64_t sweep_id) {
    absl::Status got = absl::InternalError("no answer");
    backend_->Vet(sweep_id, Gpus(1), Where(), true, [&](const absl::Status& v) { got = v; });
    return got;
  };
  placement_.partition = "nosuch";
  EXPECT_THAT(std::string(vet(0).message()), HasSubstr("Invalid partition"));  // will_run
  // A sweep about to start: the request of its first allocation is the check, and a refused
  // one leaves nothing behind.
  EXPECT_THAT(std::string(vet(5).message()), HasSubstr("Invalid partition"));
  EXPECT_TRUE(slurm_->jobs.empty());
  EXPECT_EQ(slurm_->will_runs, 1);
  placement_.partition.clear();
  EXPECT_TRUE(vet(6).ok());
  ASSERT_EQ(slurm_->jobs.size(), 1u);
  EXPECT_EQ(slurm_->jobs.begin()->second.req.name, "hpo-alloc-test-6");
  EXPECT_EQ(slurm_->will_runs, 1) << "a sweep that starts asks slurmctld once: its allocation";
  placement_.allocation.job = 7;
  s = vet(0);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("job 7 is not a pending or running job of yours"));
}

// hpod on loopback (or its Unix socket only) serves compute nodes that are this host alone: a
// sweep on a cluster with other hosts is refused at submit, saying how to listen where they can
// reach it; on this host's own nodes (the throwaway cluster) it goes on.
TEST_F(SlurmStepsTest, ASweepWhoseNodesCannotReachHpodIsRefusedWithTheFix) {
  auto vet = [&](const std::string& endpoint, std::vector<NodeHost> nodes) {
    auto fake = std::make_unique<FakeSlurm>(canceled_);
    fake->nodes = std::move(nodes);
    SlurmBackend::Options options;
    options.srun = srun_;
    options.instance = "test";
    options.endpoint = [endpoint] { return endpoint; };
    SlurmBackend backend(std::move(fake), clock_, options);
    absl::Status got = absl::InternalError("no answer");
    backend.Vet(0, Gpus(1), Where(), false, [&](const absl::Status& v) { got = v; });
    return got;
  };
  std::vector<NodeHost> remote = {{"n1", HostName(), "127.0.0.1"}, {"gpu7", "gpu7", "10.0.0.7"}};
  for (const char* endpoint : {"127.0.0.1:4000", "localhost:4000", "unix:/tmp/x/hpod.sock"}) {
    absl::Status s = vet(endpoint, remote);
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << endpoint << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("gpu7 (gpu7)"));
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("hpo daemon start --reconfigure --listen 0.0.0.0:0"));
  }
  EXPECT_TRUE(vet(absl::StrCat(HostName(), ":4000"), remote).ok());
  EXPECT_TRUE(vet("127.0.0.1:4000", {{"n1", HostName(), "127.0.0.1"}}).ok());
}

// The light touch on slurmctld: with agents telling hpod the rest, one query of the user's jobs
// per interval, a doubling back-off while slurmctld refuses (rate limit), and none at all
// between intervals however often hpod polls.
TEST_F(SlurmStepsTest, AsksSlurmctldOncePerIntervalAndBacksOffWhileItRefuses) {
  auto fake = std::make_unique<FakeSlurm>(canceled_);
  FakeSlurm* slurm = fake.get();
  SlurmBackend::Options options;
  options.srun = srun_;
  options.instance = "test";
  options.query_interval = absl::Seconds(10);
  SlurmBackend backend(std::move(fake), clock_, options);
  placement_.allocation.idle_timeout = absl::Hours(1);  // held throughout
  EXPECT_FALSE(backend.CanLaunch(1, Gpus(1), Where()));
  backend.Poll();  // the first query, and the allocation request
  ASSERT_EQ(slurm->jobs.size(), 1u);
  uint32_t id = slurm->jobs.begin()->first;
  slurm->Run(id, "n1");
  int at_start = slurm->queries;
  // While it starts (no agent here): once a second for a few seconds...
  for (int i = 0; i < 100; ++i) {
    clock_.Advance(absl::Milliseconds(100));
    backend.Poll();
  }
  EXPECT_LE(slurm->queries - at_start, 11);
  // ... then once per interval, however often hpod polls.
  int steady = slurm->queries;
  for (int i = 0; i < 600; ++i) {
    clock_.Advance(absl::Milliseconds(100));
    backend.Poll();
  }
  EXPECT_EQ(slurm->queries - steady, 6);
  // Refused (rate limit): the next query waits longer each time, up to 5 minutes.
  slurm->query_error =
      absl::ResourceExhaustedError("Rate limit exceeded, please retry momentarily");
  int refused = slurm->queries;
  for (int i = 0; i < 6000; ++i) {  // 10 minutes
    clock_.Advance(absl::Milliseconds(100));
    backend.Poll();
  }
  int tries = slurm->queries - refused;
  EXPECT_GE(tries, 4);  // 11 s, 22 s, 44 s, 88 s, 176 s, 300 s...
  EXPECT_LE(tries, 7);
  slurm->query_error = absl::OkStatus();
  for (int i = 0; i < 3000 && slurm->queries == refused + tries; ++i) {
    clock_.Advance(absl::Milliseconds(100));
    backend.Poll();
  }
  int back = slurm->queries;
  for (int i = 0; i < 600; ++i) {  // answered again: once per interval
    clock_.Advance(absl::Milliseconds(100));
    backend.Poll();
  }
  EXPECT_EQ(slurm->queries - back, 6);
}

}  // namespace
}  // namespace hpo::slurm
