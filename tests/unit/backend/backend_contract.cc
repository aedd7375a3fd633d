// The backend contract suite (see backend_contract.h).
#include "tests/unit/backend/backend_contract.h"

#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"

namespace hpo::backend::contract {
namespace {

using Kind = BackendEvent::Kind;

constexpr int kPatience = 600;  // passes before a wait gives up

bool IsEnd(Kind k) { return k == Kind::kExited || k == Kind::kLost || k == Kind::kLaunchFailed; }

// Drives one harness, and keeps every event its backend reported, checking each against the
// order a trial's life allows: started (again only after a restart took it back), updated only
// while it runs, ended once, nothing after the end, nothing of a trial the backend does not hold.
class Driver {
 public:
  explicit Driver(BackendHarness& h) : h_(h) {}

  Backend& b() { return h_.backend(); }

  // Launches when the backend says the trial fits (as the controller does), and carries it out.
  absl::Status Launch(const LaunchSpec& spec) {
    for (int i = 0; i < kPatience; ++i) {
      if (b().CanLaunch(spec.sweep_id, spec.resources, spec.placement)) {
        absl::Status s = b().Launch(spec);
        if (s.ok()) Holds(spec.trial_id);
        b().Act();
        return s;
      }
      Poll();
      h_.Pass();
    }
    return absl::DeadlineExceededError(absl::StrCat("trial ", spec.trial_id, " never fit"));
  }
  void Holds(int64_t trial_id) { held_.insert(trial_id); }

  void Poll() {
    for (BackendEvent& e : b().Poll()) Note(std::move(e));
  }
  // Polls, letting time pass, until `done` holds (or patience runs out).
  bool PollUntil(const std::function<bool()>& done) {
    for (int i = 0; i < kPatience; ++i) {
      Poll();
      if (done()) return true;
      h_.Pass();
    }
    return false;
  }
  const BackendEvent* Started(int64_t id) {
    auto it = started_.find(id);
    return it == started_.end() ? nullptr : &it->second;
  }
  const BackendEvent* Ended(int64_t id) {
    auto it = ended_.find(id);
    return it == ended_.end() ? nullptr : &it->second;
  }
  const BackendEvent& WaitStarted(int64_t id) {
    EXPECT_TRUE(PollUntil([&] { return Started(id) != nullptr || Ended(id) != nullptr; }))
        << "trial " << id << " never started";
    static const BackendEvent none;
    return Started(id) ? *Started(id) : none;
  }
  const BackendEvent& WaitEnded(int64_t id) {
    EXPECT_TRUE(PollUntil([&] { return Ended(id) != nullptr; }))
        << "trial " << id << " never ended";
    static const BackendEvent none = BackendEvent::Of(Kind::kStarted, 0, absl::InfinitePast());
    return Ended(id) ? *Ended(id) : none;
  }
  int Starts(int64_t id) const {
    auto it = starts_.find(id);
    return it == starts_.end() ? 0 : it->second;
  }
  // The daemon restarts: what its backend held is forgotten until adopted again.
  void Restart() {
    h_.Restart();
    held_.clear();
    running_.clear();
  }

 private:
  void Note(BackendEvent e) {
    if (e.kind == Kind::kAllocation) {
      EXPECT_EQ(e.trial_id, 0) << "an allocation's event names no trial";
      return;
    }
    int64_t id = e.trial_id;
    EXPECT_TRUE(held_.count(id)) << "an event (kind " << static_cast<int>(e.kind) << ") of trial "
                                 << id << ", which the backend does not hold (or after its end)";
    switch (e.kind) {
      case Kind::kStarted:
        EXPECT_FALSE(running_.count(id)) << "trial " << id << " reported started twice";
        EXPECT_FALSE(e.backend_id.empty()) << "trial " << id << " started with no backend id";
        running_.insert(id);
        ++starts_[id];
        started_[id] = e;
        break;
      case Kind::kUpdated:
      case Kind::kCheckpoint:
        EXPECT_TRUE(running_.count(id)) << "trial " << id << " updated before it started";
        break;
      default:
        EXPECT_TRUE(IsEnd(e.kind));
        // Only a trial stopped before it ran, or whose launch failed, ends without a start.
        if (!running_.count(id)) {
          EXPECT_TRUE(e.kind == Kind::kLaunchFailed || e.stop_requested)
              << "trial " << id << " ended without having started";
        }
        running_.erase(id);
        held_.erase(id);
        ended_[id] = e;
        break;
    }
  }

  BackendHarness& h_;
  std::set<int64_t> held_, running_;
  std::map<int64_t, BackendEvent> started_, ended_;
  std::map<int64_t, int> starts_;
};

TEST_P(BackendContract, ALaunchedTrialStartsOnceThenEndsOnceWithItsExitCode) {
  auto h = GetParam().make();
  Driver d(*h);
  ASSERT_TRUE(d.Launch(h->Spec(1, Does::kExits3)).ok());
  EXPECT_EQ(d.b().Running(), 1);
  d.WaitStarted(1);
  if (!h->traits().ends_by_itself) {
    for (int i = 0; i < 20; ++i) d.Poll(), h->Pass();
    EXPECT_EQ(d.Ended(1), nullptr) << "it ends only when told to";
    EXPECT_EQ(d.b().Running(), 1);
    return;
  }
  const BackendEvent& end = d.WaitEnded(1);
  EXPECT_EQ(end.kind, Kind::kExited);
  EXPECT_EQ(end.exit_code, 3);
  EXPECT_FALSE(end.stop_requested);
  EXPECT_EQ(d.Starts(1), 1);
  EXPECT_EQ(d.b().Running(), 0);
  EXPECT_FALSE(h->StillRuns(1));
}

TEST_P(BackendContract, AStopEndsATrialAndSaysItWasAskedFor) {
  auto h = GetParam().make();
  Driver d(*h);
  ASSERT_TRUE(d.Launch(h->Spec(1, Does::kRunsUntilStopped)).ok());
  d.WaitStarted(1);
  ASSERT_TRUE(d.b().Stop(1, absl::Seconds(2)).ok());
  d.b().Act();
  const BackendEvent& end = d.WaitEnded(1);
  EXPECT_EQ(end.kind, Kind::kExited);
  EXPECT_TRUE(end.stop_requested);
  EXPECT_EQ(d.b().Running(), 0);
  EXPECT_FALSE(h->StillRuns(1));
  EXPECT_TRUE(absl::IsNotFound(d.b().Stop(1, absl::Seconds(1)))) << "it ended: nobody holds it";
}

TEST_P(BackendContract, ATrialStoppedBeforeItsLaunchIsCarriedOutEndsAsStopped) {
  auto h = GetParam().make();
  Driver d(*h);
  LaunchSpec spec = h->Spec(1, Does::kRunsUntilStopped);
  ASSERT_TRUE(d.PollUntil([&] { return d.b().CanLaunch(1, spec.resources, spec.placement); }));
  // Decided, then stopped before the decision was carried out (Act).
  ASSERT_TRUE(d.b().Launch(spec).ok());
  d.Holds(1);
  ASSERT_TRUE(d.b().Stop(1, absl::Seconds(2)).ok());
  d.b().Act();
  const BackendEvent& end = d.WaitEnded(1);
  EXPECT_EQ(end.kind, Kind::kExited);
  EXPECT_TRUE(end.stop_requested);
  EXPECT_LE(d.Starts(1), 1);
  EXPECT_EQ(d.b().Running(), 0);
  for (int i = 0; i < 5; ++i) d.Poll(), h->Pass();
  EXPECT_FALSE(h->StillRuns(1));
}

TEST_P(BackendContract, TrialsItDoesNotKnowAreNotFound) {
  auto h = GetParam().make();
  Driver d(*h);
  EXPECT_TRUE(absl::IsNotFound(d.b().Stop(42, absl::Seconds(1))));
  // After a restart, a trial the store says was launched but that never ran here.
  LaunchSpec never = h->Spec(43, Does::kRunsUntilStopped);
  d.Restart();
  absl::Status adopted = d.b().Adopt(never, "", "");
  if (h->traits().adopts_anything) {
    EXPECT_TRUE(adopted.ok()) << adopted;
    return;
  }
  EXPECT_TRUE(absl::IsNotFound(adopted)) << adopted;
  EXPECT_EQ(d.b().Running(), 0);
  for (int i = 0; i < 3; ++i) d.Poll(), h->Pass();
}

TEST_P(BackendContract, ARestartedDaemonTakesARunningTrialBack) {
  auto h = GetParam().make();
  Driver d(*h);
  LaunchSpec spec = h->Spec(1, Does::kRunsUntilStopped);
  ASSERT_TRUE(d.Launch(spec).ok());
  BackendEvent first = d.WaitStarted(1);
  d.Restart();
  ASSERT_TRUE(d.b().Adopt(spec, first.backend_id, first.gpus).ok());
  d.Holds(1);
  ASSERT_TRUE(d.PollUntil([&] { return d.Starts(1) == 2; })) << "reported started again";
  EXPECT_EQ(d.b().Running(), 1);
  EXPECT_TRUE(h->StillRuns(1));
  ASSERT_TRUE(d.b().Stop(1, absl::Seconds(2)).ok());
  d.b().Act();
  const BackendEvent& end = d.WaitEnded(1);
  EXPECT_EQ(end.kind, Kind::kExited) << end.message;
  EXPECT_TRUE(end.stop_requested);
  EXPECT_EQ(d.b().Running(), 0);
  EXPECT_FALSE(h->StillRuns(1));
}

TEST_P(BackendContract, ARestartedDaemonLearnsHowATrialEndedWhileItWasAway) {
  auto h = GetParam().make();
  Driver d(*h);
  LaunchSpec spec = h->Spec(1, Does::kExits3);
  ASSERT_TRUE(d.Launch(spec).ok());
  BackendEvent first = d.WaitStarted(1);
  d.Restart();
  for (int i = 0; i < kPatience && h->StillRuns(1); ++i) h->Pass();
  ASSERT_TRUE(d.b().Adopt(spec, first.backend_id, first.gpus).ok());
  d.Holds(1);
  if (!h->traits().ends_by_itself) {
    for (int i = 0; i < 20; ++i) d.Poll(), h->Pass();
    EXPECT_EQ(d.Ended(1), nullptr) << "it runs elsewhere until it is told to end";
    EXPECT_EQ(d.Starts(1), 2);
    return;
  }
  const BackendEvent& end = d.WaitEnded(1);
  EXPECT_EQ(end.kind, Kind::kExited);
  EXPECT_EQ(end.exit_code, 3) << "its own outcome, not a guess";
  EXPECT_EQ(d.b().Running(), 0);
}

// Taken after a restart took it back: a backend that runs its trials as its own children knows
// only then that a trial vanished rather than died of a signal.
TEST_P(BackendContract, ATrialTheInfrastructureTakesIsLostWithTheCause) {
  auto h = GetParam().make();
  Driver d(*h);
  LaunchSpec spec = h->Spec(1, Does::kIsTaken);
  ASSERT_TRUE(d.Launch(spec).ok());
  BackendEvent first = d.WaitStarted(1);
  d.Restart();
  ASSERT_TRUE(d.b().Adopt(spec, first.backend_id, first.gpus).ok());
  d.Holds(1);
  if (!h->traits().can_be_taken) {
    for (int i = 0; i < 20; ++i) d.Poll(), h->Pass();
    EXPECT_EQ(d.Ended(1), nullptr) << "nothing here takes a trial";
    return;
  }
  const BackendEvent& end = d.WaitEnded(1);
  EXPECT_EQ(end.kind, Kind::kLost) << end.message;
  EXPECT_NE(end.interruption, Interruption::kNone);
  EXPECT_FALSE(end.message.empty());
  EXPECT_FALSE(end.stop_requested);
  EXPECT_EQ(d.b().Running(), 0);
  EXPECT_FALSE(h->StillRuns(1));
}

TEST_P(BackendContract, WhatIsReclaimedStopsRunning) {
  auto h = GetParam().make();
  Driver d(*h);
  ASSERT_TRUE(d.Launch(h->Spec(1, Does::kRunsUntilStopped)).ok());
  BackendEvent first = d.WaitStarted(1);
  d.Restart();
  d.b().Reclaim(1, first.backend_id);
  d.b().Act();
  for (int i = 0; i < kPatience && h->StillRuns(1); ++i) d.Poll(), h->Pass();
  EXPECT_FALSE(h->StillRuns(1));
  for (int i = 0; i < 5; ++i) d.Poll(), h->Pass();  // and nothing of it is reported
  EXPECT_EQ(d.b().Running(), 0);
}

TEST_P(BackendContract, ItsCapacityAnswersMatchWhatLaunchDoes) {
  auto h = GetParam().make();
  BackendHarness::Traits traits = h->traits();
  Driver d(*h);
  // What the backend knows itself (CheckFits), else what the cluster says (Vet, answered in a
  // later Poll or at once).
  auto fits = [&](const Resources& r, const Placement& p) {
    absl::Status known = d.b().CheckFits(r, p);
    if (!known.ok()) return known;
    std::optional<absl::Status> vetted;
    d.b().Vet(0, r, p, false, [&](const absl::Status& s) { vetted = s; });
    for (int i = 0; i < kPatience && !vetted; ++i) d.Poll(), h->Pass();
    return vetted.value_or(absl::DeadlineExceededError("Vet did not answer"));
  };
  if (traits.never_fits) {
    absl::Status never = fits(traits.never_fits->first, traits.never_fits->second);
    EXPECT_TRUE(absl::IsInvalidArgument(never)) << never;
    EXPECT_FALSE(never.message().empty());
  }
  LaunchSpec probe = h->Spec(99, Does::kRunsUntilStopped);
  EXPECT_TRUE(fits(probe.resources, probe.placement).ok());
  if (traits.room == 0) {
    for (int64_t id = 1; id <= 3; ++id) ASSERT_TRUE(d.Launch(h->Spec(id, Does::kExits3)).ok());
    EXPECT_EQ(d.b().Running(), 3);
    return;
  }
  for (int64_t id = 1; id <= traits.room; ++id) {
    ASSERT_TRUE(d.Launch(h->Spec(id, Does::kRunsUntilStopped)).ok());
  }
  EXPECT_EQ(d.b().Running(), traits.room);
  LaunchSpec extra = h->Spec(traits.room + 1, Does::kRunsUntilStopped);
  for (int i = 0; i < 5; ++i) d.Poll(), h->Pass();
  EXPECT_FALSE(d.b().CanLaunch(1, extra.resources, extra.placement));
  EXPECT_TRUE(absl::IsResourceExhausted(d.b().Launch(extra))) << "no room: refused, not queued";
  ASSERT_TRUE(d.b().Stop(1, absl::Seconds(2)).ok());
  d.b().Act();
  d.WaitEnded(1);
  EXPECT_TRUE(d.PollUntil([&] { return d.b().CanLaunch(1, extra.resources, extra.placement); }))
      << "the room a trial gave back can be taken again";
  for (int64_t id = 2; id <= traits.room; ++id) {
    ASSERT_TRUE(d.b().Stop(id, absl::Seconds(2)).ok());
  }
  d.b().Act();
  for (int64_t id = 2; id <= traits.room; ++id) d.WaitEnded(id);
  EXPECT_EQ(d.b().Running(), 0);
}

}  // namespace
}  // namespace hpo::backend::contract
