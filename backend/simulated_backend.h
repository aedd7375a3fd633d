#pragma once
// SimulatedBackend: trials that run in virtual time, for controller tests and benchmarks.
//
// A script decides each launched trial's fate (run time, exit code, whether it is lost); the
// backend reports kStarted after `start_delay` and kExited / kLost when the FakeClock passes the
// trial's end. Stop ends the trial after min(grace, stop_after) with the stop signal.
//
// With set_allocations, it also holds allocations as Slurm steps mode does, for their cost: a
// sweep gets one (of the model's GPUs and nodes) at its first launch while it holds none, and
// lets it go once none of its trials ran for the model's idle timeout, or once the sweep ended
// and its last trial did (the later of the two); each start and end is reported (kAllocation).
// Trials still share the backend's one pool of GPUs and slots.
//
// Thread safety: controller thread only (see Backend).

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/resource_pool.h"
#include "common/clock.h"

namespace hpo::backend {

struct SimulatedFate {
  absl::Duration start_delay = absl::ZeroDuration();
  absl::Duration run_time = absl::Seconds(10);
  int exit_code = 0;
  bool lost = false;                                       // ends kLost instead of kExited
  Interruption interruption = Interruption::kNodeFailure;  // what took it, when lost
  absl::Duration stop_after = absl::ZeroDuration();        // how long it takes to honour a stop
  // This long after it started, it is told to checkpoint for `interruption` (kCheckpoint, and
  // the signal at the next Act); it still ends as the rest of the fate says.
  std::optional<absl::Duration> checkpoint_after;
  std::string node;  // the node it runs on (its backend id and NodesOf name it); "": none
  // Its end reaches hpod this long after it happened (a jobs-mode poll, a slow slurmctld); a
  // stop in between finds it gone (BackendEvent::ended_first).
  absl::Duration end_heard_after = absl::ZeroDuration();
};

class SimulatedBackend final : public Backend {
 public:
  using Script = std::function<SimulatedFate(const LaunchSpec&)>;
  struct AllocationModel {
    int gpus = 0;  // over all its nodes
    int nodes = 1;
    absl::Duration idle_timeout = absl::Seconds(30);
  };
  SimulatedBackend(const Clock& clock, int gpus, int slots, Script script);

  std::string Name() const override { return name_; }
  // Stands in for another backend (a Router routes by name): "local", "slurm".
  void set_name(std::string name) { name_ = std::move(name); }
  [[nodiscard]] absl::Status CheckFits(const Resources& r, const Placement&) override {
    return pool_.CheckFits(r);
  }
  bool CanLaunch(int64_t, const Resources& r, const Placement&) override { return pool_.Fits(r); }
  [[nodiscard]] absl::Status Launch(const LaunchSpec& spec) override;
  [[nodiscard]] absl::Status Stop(int64_t trial_id, absl::Duration grace) override;
  std::vector<BackendEvent> Poll() override;
  // The simulated trials outlive a controller (as processes outlive hpod): a new controller on
  // this backend takes back those still running.
  [[nodiscard]] absl::Status Adopt(const LaunchSpec& spec, const std::string& backend_id,
                                   const std::string& gpus) override;
  // Ends a trial that was not adopted, as if its process were killed: nothing more of it is
  // reported.
  void Reclaim(int64_t trial_id, const std::string&) override;
  // An allocation it still holds goes on; one it does not hold ended now.
  void AdoptAllocation(const AllocationUsage& allocation) override;
  void SweepEnded(int64_t sweep_id) override;
  void SweepReopened(int64_t sweep_id) override { ended_sweeps_.erase(sweep_id); }
  void set_allocations(AllocationModel model) { model_ = model; }
  // The node of a trial whose fate named one (" nodes=NODE" in its backend id).
  std::vector<std::string> NodesOf(const std::string& backend_id) const override;
  // A partition between hpod and what runs the trials (an allocation's agent): while out of
  // touch (nullopt) InTouchSince says so for every trial; back in touch, since when.
  void set_in_touch_since(std::optional<absl::Time> since) { in_touch_since_ = since; }
  std::optional<absl::Time> InTouchSince(const std::string&, absl::Time) const override {
    return in_touch_since_;
  }
  int Running() const override { return static_cast<int>(trials_.size()); }
  // True while the trial is held and its end has not come (for tests).
  bool Runs(int64_t trial_id) const;
  int FreeGpus() const override { return pool_.free_gpus(); }
  std::string Describe() const override;

  // Every LaunchSpec seen, in order (for assertions); not kept after keep_launched(false), so
  // that a benchmark of many trials measures the controller's memory, not this record's.
  const std::vector<LaunchSpec>& launched() const { return launched_; }
  // The trials told to checkpoint, in the order the signals went (at Act).
  const std::vector<int64_t>& checkpoint_signals() const { return checkpoint_signals_; }
  void Act() override;
  void keep_launched(bool keep) { keep_launched_ = keep; }

 private:
  std::string name_ = "simulated";
  struct Sim {
    int64_t sweep_id = 0;
    SimulatedFate fate;
    Grant grant;
    absl::Time start;
    absl::Time end;
    bool started = false;
    bool stop_requested = false;
    bool told_to_checkpoint = false;
    bool ended_first = false;  // a stop found it ended
  };
  const Clock& clock_;
  ResourcePool pool_;
  Script script_;
  std::map<int64_t, Sim> trials_;
  std::vector<LaunchSpec> launched_;
  bool keep_launched_ = true;
  std::vector<int64_t> to_checkpoint_, checkpoint_signals_;
  // A trial's end (or reclaim): its room back, its sweep's allocation idle from `end` when it
  // was the last.
  std::map<int64_t, Sim>::iterator Forget(std::map<int64_t, Sim>::iterator it, absl::Time end);
  // Allocations (set_allocations): by sweep, the one it holds and since when it has been idle.
  void Allocate(int64_t sweep_id, absl::Time at);
  void ReleaseIdle(absl::Time now, std::vector<BackendEvent>& out);
  std::optional<AllocationModel> model_;
  struct Held {
    AllocationUsage usage;
    absl::Time idle_since = absl::InfiniteFuture();
  };
  std::map<int64_t, Held> allocations_;
  std::map<int64_t, int> running_by_sweep_;
  std::map<int64_t, absl::Time> ended_sweeps_;  // when SweepEnded said so
  std::vector<BackendEvent> allocation_events_;
  int next_allocation_ = 1;
  std::optional<absl::Time> in_touch_since_ = absl::InfinitePast();
};

}  // namespace hpo::backend
