#pragma once
// Backend: runs trials somewhere (local processes, Slurm steps or jobs, a simulation). Two groups
// of methods: the capacity questions (Capacity) and the verbs of a trial's life (Backend).
//
// Every method is called from the controller's thread only; implementations need no locking
// of their own for these calls.
//
// Decide, then act: Launch and Stop take the decision (Launch reserves the trial's room) and
// return at once; the backend carries them out — spawns, signals, submits — at the next Act(),
// which the controller calls once the decision is durable in its store. So a daemon killed at
// any instant has recorded every launch and stop it made. What happens afterwards arrives as
// BackendEvents from Poll(), which the controller calls on every tick. A backend with nothing to
// do outside this process (the simulated one) may act at once.
//
// Errors: Launch returns RESOURCE_EXHAUSTED when the trial does not fit now, INVALID_ARGUMENT
// for a spec the backend can never run, UNAVAILABLE when the backend is temporarily away; a
// launch that fails when it is carried out comes back as a kLaunchFailed event.

#include <csignal>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend/resources.h"

namespace hpo::backend {

struct LaunchSpec {
  int64_t trial_id = 0;
  int64_t sweep_id = 0;
  std::vector<std::string> argv;           // argv[0] is looked up in the trial's PATH
  std::map<std::string, std::string> env;  // set on top of the daemon's environment
  std::string workdir;                     // absolute
  std::string trial_dir;                   // absolute; exists; logs go here
  Resources resources;
  Placement placement;
  int stop_signal = SIGTERM;  // what Stop sends first
  // A resumable trial (the sweep's `checkpoint:` section): before the end of its allocation or
  // job the backend sends it this signal, `checkpoint_grace` ahead, and reports its exit as an
  // interruption (kLost) so that it continues as its next segment. 0: not resumable.
  int checkpoint_signal = 0;
  absl::Duration checkpoint_grace = absl::ZeroDuration();
  int segment = 1;  // which run of the trial this is: 1, then one more after each interruption
};

// What took a trial that the infrastructure ended (kLost).
enum class Interruption {
  kNone,
  kTimeLimit,        // a Slurm time limit (the job's, or its allocation's)
  kPreempted,        // a higher-priority job took the nodes
  kNodeFailure,      // a node failed or did not boot
  kCanceledOutside,  // someone else canceled it
  kVanished,         // it disappeared without a trace
};

// "a time limit", "preemption", ...: for messages.
inline const char* InterruptionWords(Interruption i) {
  switch (i) {
    case Interruption::kTimeLimit:
      return "a time limit";
    case Interruption::kPreempted:
      return "preemption";
    case Interruption::kNodeFailure:
      return "a node failure";
    case Interruption::kCanceledOutside:
      return "a cancel outside hpod";
    case Interruption::kVanished:
      return "a disappearance";
    case Interruption::kNone:
      break;
  }
  return "the infrastructure";
}

struct BackendEvent {
  enum class Kind {
    kStarted,  // the trial's process runs; backend_id and gpus are set
    kExited,   // the process ended; exit_code / term_signal say how
    kLost,     // the backend can no longer tell what happened (infrastructure failure)
    kUpdated,  // more is known about a running trial: backend_id (and gpus when set) replace the
               // old
    kLaunchFailed,  // carrying out the launch failed: `message` says why, `infra` whose fault
    kAllocation,    // an allocation started, changed or ended (`allocation`; trial_id is 0)
    // A resumable trial is about to be told to checkpoint (`interruption`, `message`): the
    // controller records that, and the backend sends the signal at the next Act(), after the
    // record is durable. However the segment then exits, it continues as its next segment.
    kCheckpoint,
  };
  Kind kind = Kind::kStarted;
  int64_t trial_id = 0;
  absl::Time time;
  int exit_code = 0;            // kExited: the exit status, or -1 when killed by a signal
  int term_signal = 0;          // kExited: the signal that ended it, 0 if none
  bool stop_requested = false;  // kExited: Stop() had been called for it
  // kExited: it had ended before hpod's signal or stop reached it (what ran it said it was gone):
  // its end is its own, whatever hpod had decided meanwhile.
  bool ended_first = false;
  std::string backend_id;  // kStarted: e.g. "local:pid=1234"
  std::string gpus;        // kStarted: the CUDA_VISIBLE_DEVICES it got
  std::string message;     // human-readable detail (exec failure, loss reason)
  bool infra = false;      // kLaunchFailed: the infrastructure's fault, not the trial's
  Interruption interruption = Interruption::kNone;  // kLost, kCheckpoint: what took it
  AllocationUsage allocation;                       // kAllocation

  static BackendEvent Of(Kind kind, int64_t trial_id, absl::Time time) {
    BackendEvent e;
    e.kind = kind;
    e.trial_id = trial_id;
    e.time = time;
    return e;
  }
  // A trial stopped while its launch waited for Act: it ends without having run.
  static BackendEvent StoppedBeforeStart(int64_t trial_id, absl::Time time) {
    BackendEvent e = Of(Kind::kExited, trial_id, time);
    e.exit_code = -1;
    e.stop_requested = true;
    e.message = "stopped before it started";
    return e;
  }
};

// The questions about room: whether a trial could ever run here and whether it can start now.
// Answered from the backend's own accounting, without side effects beyond noting demand.
class Capacity {
 public:
  virtual ~Capacity() = default;
  // OK when a trial with `r` could ever run here, as far as the backend knows without asking
  // anyone (no call to a server: it runs on the controller's thread); INVALID_ARGUMENT saying
  // why not otherwise.
  [[nodiscard]] virtual absl::Status CheckFits(const Resources& r, const Placement& p) = 0;
  // What only the cluster can say about a sweep that passed CheckFits (an account, a partition,
  // whether such a request could ever run), asked off the controller's thread. `sweep_id` 0: a
  // validation only. Otherwise the sweep is about to start (`starts_now`: at once, not behind
  // other sweeps): a backend may take its first resources for it now, and let that request be
  // the check (Slurm's steps mode submits the sweep's first allocation: slurmctld refuses it
  // or takes it). `done` runs once, on the controller's thread (inside a later Poll) or inline.
  using Vetted = std::function<void(const absl::Status&)>;
  virtual void Vet(int64_t /*sweep_id*/, const Resources& /*r*/, const Placement& /*p*/,
                   bool /*starts_now*/, Vetted done) {
    done(absl::OkStatus());
  }
  // When a sweep with trials like `r` would get its first room (`hpo plan`): the backend's own
  // guess (Slurm: slurmctld's will_run for the sweep's first allocation, or one trial's job), with
  // what it asked about; `done` runs once, on the controller's thread or inline. UNIMPLEMENTED
  // where there is no queue to wait in.
  struct QueueWait {
    absl::Time start;
    std::string what;  // "the sweep's first allocation (2 nodes with 4 GPU(s) ...)"
  };
  using Started = std::function<void(const absl::StatusOr<QueueWait>&)>;
  virtual void ExpectedStart(const Resources& /*r*/, const Placement& /*p*/, Started done) {
    done(absl::UnimplementedError("no queue"));
  }
  // True when a trial of `sweep_id` with `r` can start now. A backend that grows its capacity on
  // demand (Slurm steps mode) takes a false answer as a trial waiting.
  virtual bool CanLaunch(int64_t sweep_id, const Resources& r, const Placement& p) = 0;
  // Number of trials the backend is running.
  virtual int Running() const = 0;
  // GPUs it could hand to a trial now and none holds (the local pool's); 0 where capacity
  // comes in allocations (their idle GPUs are counted from the sweeps' usage).
  virtual int FreeGpus() const { return 0; }
  // Capacity for summaries ("4 GPUs, 8 CPUs").
  virtual std::string Describe() const = 0;
};

// The verbs of a trial's life on the backend, after the capacity questions.
class Backend : public Capacity {
 public:
  virtual std::string Name() const = 0;
  // The name of the backend that runs trials with placement `p`: this one (a Router answers
  // for the backend it would hand them to, or INVALID_ARGUMENT saying why there is none).
  [[nodiscard]] virtual absl::StatusOr<std::string> Resolve(const Placement& /*p*/) const {
    return Name();
  }
  // Takes the trial's room and starts it at the next Act(). After OK, Poll() eventually reports
  // kStarted and later kExited or kLost (or kLaunchFailed).
  [[nodiscard]] virtual absl::Status Launch(const LaunchSpec& spec) = 0;
  // Asks a trial to end, at the next Act(): its LaunchSpec's stop_signal, after `grace`
  // SIGKILL; one not started yet never starts and exits at once. NOT_FOUND when the backend does
  // not know the trial (already ended).
  [[nodiscard]] virtual absl::Status Stop(int64_t trial_id, absl::Duration grace) = 0;
  // Sends `signal` to a running trial at the next Act(), without stopping it (the hang
  // watchdog's first word, so that a trainer may dump its stacks). NOT_FOUND when the backend
  // does not run the trial; UNIMPLEMENTED where it cannot signal.
  [[nodiscard]] virtual absl::Status SendSignal(int64_t /*trial_id*/, int /*signal*/) {
    return absl::UnimplementedError("this backend does not signal its trials");
  }
  // Carries out the launches and stops taken since the last call.
  virtual void Act() {}
  // Events since the last call, oldest first. Also drives the backend's own timers.
  virtual std::vector<BackendEvent> Poll() = 0;
  // After a restart: a trial the store says was launched, or may have been, when the daemon last
  // stopped (`spec` as it was launched; `backend_id` and `gpus` as stored, possibly empty). When
  // the backend finds it, it takes it back: OK, and Poll() reports kStarted (with the backend id)
  // and later kExited or kLost, at once when the trial already ended while the daemon was away
  // and its outcome is known. NOT_FOUND when nothing of the trial runs and nothing says how it
  // ended.
  [[nodiscard]] virtual absl::Status Adopt(const LaunchSpec& spec, const std::string& backend_id,
                                           const std::string& gpus) = 0;
  // After a restart: an allocation the store says this backend held for a sweep and had not
  // seen end. The backend takes it back with its steps, or reports (kAllocation) when it ended:
  // slurmctld's end time, or when it was known to end when no record of it is left.
  virtual void AdoptAllocation(const AllocationUsage& /*allocation*/) {}
  // A trial the store says was running that was not (or could not be) adopted: end whatever is
  // left of it so that it does not run unaccounted.
  virtual void Reclaim(int64_t trial_id, const std::string& backend_id) = 0;
  // The daemon exits and leaves its trials running for the next start to re-adopt: forget them,
  // so that nothing of them is ended on the way out.
  virtual void Detach() {}
  // The sweep will launch nothing more: whatever the backend holds for it alone can go.
  virtual void SweepEnded(int64_t /*sweep_id*/) {}
  // A sweep that ended launches again (`hpo extend`): it may hold room again.
  virtual void SweepReopened(int64_t /*sweep_id*/) {}
  // The nodes a trial with backend id `backend_id` ran on, by name; empty where the backend
  // has no nodes to tell apart (a local process, a simulation).
  virtual std::vector<std::string> NodesOf(const std::string& /*backend_id*/) const { return {}; }
  // Since when hpod has been in touch, without a break up to `now`, with what runs the trial of
  // backend id `backend_id` (an allocation's agent): silence from before then says nothing of
  // the trial (the hang watchdog does not count it). nullopt while out of touch;
  // absl::InfinitePast() where nothing stands between (a local process).
  virtual std::optional<absl::Time> InTouchSince(const std::string& /*backend_id*/,
                                                 absl::Time /*now*/) const {
    return absl::InfinitePast();
  }
  // The sweep's quarantined nodes, all of them each time (SweepSpec failures): none of its later
  // trials runs there, nor does any allocation or job requested for it.
  virtual void ExcludeNodes(int64_t /*sweep_id*/, const std::set<std::string>& /*nodes*/) {}
  // `wake` (thread-safe, cheap) is called from any thread when something happened that the next
  // Poll would report, so the controller can poll at once instead of at its next tick.
  virtual void SetWakeup(std::function<void()> /*wake*/) {}
};

}  // namespace hpo::backend
