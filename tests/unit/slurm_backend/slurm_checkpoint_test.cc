// SlurmBackend's steps mode with resumable trials, against a scripted slurmctld: checkpoint
// signals ahead of an allocation's end or a step's own time limit, placement by the time left,
// the replacement asked early by the measured queue wait, preemption, and jobs mode's warned end.
// The real thing runs in tests/slurm/test_long_trials.sh.
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

// A resumable trial's step (checkpoint signal SIGUSR1, 30 s grace) in an allocation that ends
// 60 s after it started.
class SlurmCheckpointTest : public SlurmStepsTest {
 protected:
  LaunchSpec Resumable(int64_t trial, std::vector<std::string> argv) {
    LaunchSpec s = Spec(trial, std::move(argv), 1);
    s.checkpoint_signal = SIGUSR1;
    s.checkpoint_grace = absl::Seconds(30);
    return s;
  }
  // A running allocation for sweep 1 that waited `wait` in the queue and ends `left` from now.
  uint32_t AllocateUntil(absl::Duration left, absl::Duration wait = absl::Seconds(5)) {
    EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where()));
    backend_->Poll();  // requests it
    uint32_t id = slurm_->next_id - 1;
    slurm_->jobs[id].status.submit_time = clock_.Now() - wait;
    slurm_->Run(id, "n1", clock_.Now(), clock_.Now() + left);
    backend_->Poll();  // sees it run
    return id;
  }
  // Polls (a second apart in virtual time, 10 ms in real time) until the step's tasks recorded
  // its id.
  void WaitStepId() {
    for (int i = 0; i < 500; ++i) {
      clock_.Advance(absl::Seconds(1));
      for (const auto& e : backend_->Poll()) {
        if (e.kind == BackendEvent::Kind::kUpdated && absl::StrContains(e.backend_id, "step=7"))
          return;
      }
      ::usleep(10'000);
    }
    ADD_FAILURE() << "the step's id was never recorded";
  }
};

TEST_F(SlurmCheckpointTest, TellsResumableStepsToCheckpointAheadOfTheAllocationsEnd) {
  uint32_t job = AllocateUntil(absl::Minutes(10));
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Resumable(1, {"sleep", "1"})).ok());
  WaitStepId();
  clock_.Advance(absl::Minutes(9));  // 60 s left: not yet within the grace
  backend_->Poll();
  EXPECT_TRUE(slurm_->signals.empty());
  clock_.Advance(absl::Seconds(31));
  // The request is reported first, for the controller to record; the signal waits for Act.
  auto told = backend_->Poll();
  ASSERT_EQ(std::count_if(told.begin(), told.end(),
                          [](const BackendEvent& e) {
                            return e.kind == BackendEvent::Kind::kCheckpoint && e.trial_id == 1 &&
                                   e.interruption == backend::Interruption::kTimeLimit;
                          }),
            1);
  EXPECT_TRUE(slurm_->signals.empty()) << "no signal before the request is recorded";
  backend_->Act();
  ASSERT_EQ(slurm_->signals.size(), 1u);
  EXPECT_EQ(slurm_->signals[0].job, job);
  EXPECT_EQ(slurm_->signals[0].step, 7);  // the id its task recorded
  EXPECT_EQ(slurm_->signals[0].signal, SIGUSR1);
  backend_->Poll();
  EXPECT_EQ(slurm_->signals.size(), 1u) << "told once";
  // It exits 0 after its checkpoint: an interruption, not the trial's end.
  auto ends = WaitEnds(1);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].kind, BackendEvent::Kind::kLost);
  EXPECT_EQ(ends[0].interruption, backend::Interruption::kTimeLimit);
  EXPECT_THAT(ends[0].message, HasSubstr("checkpointed"));
}

TEST_F(SlurmCheckpointTest, AStepsOwnTimeLimitAlsoCallsForACheckpoint) {
  AllocateUntil(absl::Hours(2));
  LaunchSpec spec = Resumable(1, {"sleep", "1"});
  spec.resources.time_limit = absl::Minutes(5);
  ASSERT_TRUE(fakes::LaunchNow(*backend_, spec).ok());
  WaitStepId();
  clock_.Advance(absl::Minutes(4) + absl::Seconds(31));
  backend_->Poll();
  backend_->Act();
  ASSERT_EQ(slurm_->signals.size(), 1u);
  auto ends = WaitEnds(1);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].interruption, backend::Interruption::kTimeLimit);
  std::string argv = *ReadFile(dir_ + "/argv.log");
  EXPECT_THAT(argv, HasSubstr("--time=5 "));
  EXPECT_THAT(argv, HasSubstr("--job-name=hpo-1-1 "));
}

TEST_F(SlurmCheckpointTest, PlacesTrialsOnlyWhereTheyHaveTheTimeTheyNeed) {
  AllocateUntil(absl::Minutes(10));
  Resources r = Gpus(1);
  r.needs = absl::Minutes(20);
  EXPECT_FALSE(backend_->CanLaunch(1, r, Where()));
  r.needs = absl::Minutes(5);
  EXPECT_TRUE(backend_->CanLaunch(1, r, Where()));
  // Late in the allocation the five minutes are not there any more: a new allocation is asked
  // for.
  clock_.Advance(absl::Minutes(6));
  EXPECT_FALSE(backend_->CanLaunch(1, r, Where()));
  backend_->Poll();
  EXPECT_EQ(slurm_->jobs.size(), 2u);
}

TEST_F(SlurmCheckpointTest, AsksForTheReplacementEarlyByTheMeasuredQueueWait) {
  placement_.allocation.max = 1;
  // Waited 4 minutes in the queue; the grace is 30 s: the replacement is asked for once less
  // than 4 min + 30 s + 30 s is left.
  uint32_t first = AllocateUntil(absl::Minutes(30), absl::Minutes(4));
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Resumable(1, {"sleep", "30"})).ok());
  backend_->Poll();
  EXPECT_EQ(backend_->ExpectedWait(1), absl::Minutes(4));
  clock_.Advance(absl::Minutes(24));
  backend_->Poll();
  EXPECT_EQ(slurm_->jobs.size(), 1u) << "6 min left: not yet";
  clock_.Advance(absl::Seconds(61));
  backend_->Poll();
  ASSERT_EQ(slurm_->jobs.size(), 2u) << "a replacement beyond max 1";
  uint32_t second = slurm_->next_id - 1;
  EXPECT_NE(second, first);
  backend_->Poll();
  EXPECT_EQ(slurm_->jobs.size(), 2u) << "only one";
  // It runs, idle, past its idle_timeout: it stays for the trial that will move into it.
  slurm_->Run(second, "n2", clock_.Now(), clock_.Now() + absl::Minutes(30));
  backend_->Poll();
  clock_.Advance(absl::Seconds(31));
  backend_->Poll();
  EXPECT_THAT(canceled_, ::testing::Not(Contains(second)));
}

TEST_F(SlurmCheckpointTest, APreemptedAllocationTakesNoStepsAndItsStepsCheckpointAtOnce) {
  uint32_t job = AllocateUntil(absl::Hours(1));
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Resumable(1, {"sleep", "1"})).ok());
  WaitStepId();
  slurm_->jobs[job].status.preempt_time = clock_.Now();
  backend_->Poll();
  backend_->Act();  // the signal goes once the request is recorded
  ASSERT_EQ(slurm_->signals.size(), 1u);
  EXPECT_EQ(slurm_->signals[0].signal, SIGUSR1);
  EXPECT_FALSE(backend_->CanLaunch(1, Gpus(1), Where()));
  auto ends = WaitEnds(1);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].kind, BackendEvent::Kind::kLost);
  EXPECT_EQ(ends[0].interruption, backend::Interruption::kPreempted);
}

// The log holds every segment: what Slurm said of an earlier step does not end this one.
TEST_F(SlurmCheckpointTest, OnlyThisStepsLinesInTheLogCount) {
  Allocate("n1");
  LaunchSpec spec = Resumable(1, {"sh", "-c",
                                  "echo 'slurmstepd: error: *** STEP 99.3 ON n1 CANCELLED AT "
                                  "2026-11-30T10:00:00 DUE TO TIME LIMIT ***' >&2; exit 0"});
  spec.segment = 2;
  ASSERT_TRUE(fakes::LaunchNow(*backend_, spec).ok());
  auto ends = WaitEnds(1);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].kind, BackendEvent::Kind::kExited);
  EXPECT_EQ(ends[0].exit_code, 0);
  EXPECT_THAT(*ReadFile(dir_ + "/argv.log"), HasSubstr("--job-name=hpo-1-1.2 "));
}

// Jobs mode: Slurm's own warning (--signal=B:USR1@30, output appended), and a job that exited
// after it is an interruption; one that ended well before it is the trial's end.
TEST_F(SlurmCheckpointTest, JobsAreWarnedBySlurmAndTheirCheckpointedEndIsAnInterruption) {
  placement_.mode = "jobs";
  placement_.time_limit_minutes = 10;
  JobRequest req = SlurmBackend::Request(Resumable(1, {"true"}));
  EXPECT_EQ(req.warn_signal, SIGUSR1);
  EXPECT_EQ(req.warn_seconds, 30);
  EXPECT_TRUE(req.append_output);
  LaunchSpec later = Resumable(1, {"true"});
  later.segment = 3;
  EXPECT_EQ(SlurmBackend::Request(later).name, "hpo-1-1.3");

  struct Case {
    absl::Duration ran;
    bool preempted;
    backend::Interruption want;
  } cases[] = {
      {absl::Minutes(9), false, backend::Interruption::kTimeLimit},  // after the warning
      {absl::Minutes(3), false, backend::Interruption::kNone},       // finished on its own
      {absl::Minutes(3), true, backend::Interruption::kPreempted},
  };
  int64_t trial = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(trial);
    ASSERT_TRUE(fakes::LaunchNow(*backend_, Resumable(trial, {"true"})).ok());
    uint32_t job = slurm_->next_id - 1;
    absl::Time start = clock_.Now();
    slurm_->Run(job, "n1", start, start + absl::Minutes(10));
    backend_->Poll();  // started
    if (c.preempted) {
      slurm_->jobs[job].status.preempt_time = clock_.Now();
      backend_->Poll();
      ASSERT_FALSE(slurm_->signals.empty());
      EXPECT_EQ(slurm_->signals.back().job, job);
      EXPECT_EQ(slurm_->signals.back().signal, SIGUSR1);
    }
    clock_.Advance(c.ran);
    slurm_->jobs[job].status.state = JobState::kCompleted;
    slurm_->jobs[job].status.end_time = clock_.Now();
    std::vector<BackendEvent> events = backend_->Poll();
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].interruption, c.want) << events[0].message;
    EXPECT_EQ(events[0].kind, c.want == backend::Interruption::kNone ? BackendEvent::Kind::kExited
                                                                     : BackendEvent::Kind::kLost);
    ++trial;
  }
}

}  // namespace
}  // namespace hpo::slurm
