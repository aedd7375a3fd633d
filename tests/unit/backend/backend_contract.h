#pragma once
// The contract every Backend keeps (backend/backend.h), as one suite of tests run over every
// backend hpod has: each backend comes with a harness that knows how to make it, how to make a
// trial on it do something (exit, run until stopped, be taken by the infrastructure), how to let
// time pass there, and how the daemon restarts over it. A new backend is covered by adding its
// harness to an INSTANTIATE_TEST_SUITE_P list.
//
// The suite checks what the controller relies on: a launched trial is reported started once,
// then ended once, with its exit code; a stop ends it and says it was asked for, also before it
// started; unknown trials are NOT_FOUND; a restarted daemon takes a running trial back, and learns
// how one that ended meanwhile ended; the infrastructure's doing is a loss with its cause; what is
// reclaimed stops running; the capacity answers match what Launch does. Every event any test sees
// is also checked against the order a trial's life allows.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "backend/backend.h"
#include "gtest/gtest.h"

namespace hpo::backend::contract {

// What a trial of the suite does once it runs.
enum class Does {
  kExits3,            // runs a moment, then exits with code 3 by itself
  kRunsUntilStopped,  // runs until it is stopped, and ends on its stop signal
  kIsTaken,  // runs a second or more, then the infrastructure takes it (a node failure, a kill
             // that leaves no record)
};

class BackendHarness {
 public:
  virtual ~BackendHarness() = default;
  // The backend under test (after Restart, the one the new daemon uses).
  virtual Backend& backend() = 0;
  // A trial of sweep 1 with one CPU and no GPU that, on this backend, does `does`.
  virtual LaunchSpec Spec(int64_t trial_id, Does does) = 0;
  // Lets a little time pass: virtual time moves, the scripted cluster moves on, or real time
  // passes.
  virtual void Pass() = 0;
  // The daemon restarts: the backend detaches from its trials, and the backend a new daemon
  // would make over the same world (processes, cluster) takes its place.
  virtual void Restart() = 0;
  // True while anything of the trial still runs where it ran (a process, a job).
  virtual bool StillRuns(int64_t trial_id) = 0;

  // What sets the backend apart.
  struct Traits {
    bool ends_by_itself = true;    // a trial can end without being stopped (external: never)
    bool can_be_taken = true;      // the infrastructure can take a trial (Does::kIsTaken)
    bool adopts_anything = false;  // Adopt takes any trial back (external: it runs elsewhere)
    int room = 0;                  // trials of Spec's size that fit at once; 0: no bound
    // A trial that can never run here (CheckFits or Vet refuses it), when there is one.
    std::optional<std::pair<Resources, Placement>> never_fits;
  };
  virtual Traits traits() const = 0;
};

struct HarnessMaker {
  std::string name;  // the test's parameter name
  std::function<std::unique_ptr<BackendHarness>()> make;
};

inline std::string MakerName(const ::testing::TestParamInfo<HarnessMaker>& info) {
  return info.param.name;
}

class BackendContract : public ::testing::TestWithParam<HarnessMaker> {};

}  // namespace hpo::backend::contract
