#pragma once
// What every `hpo` command group shares: the exit codes, connecting to the daemon, failing with
// a message, following a sweep's event stream. Each group (daemon_commands.cc, ...) is a class
// that adds its commands to the app, with an options struct per command.
//
// Exit codes: 0 success; 1 error (message on stderr); 2 usage error (unknown command or option,
// bad value). `hpo wait`: 0 COMPLETED or GOAL_REACHED, 3 FAILED, 4 CANCELED, 5 TIMED_OUT.
// `hpo report`: 0 continue, 10 hpod asks the trial to stop.

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/client.h"

namespace hpo::client::cli {

inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitStop = 10;

// Prints "hpo: <message>" to stderr and returns kExitError.
int Fail(const absl::Status& s);
// The daemon (started when needed), or exits with its error.
std::unique_ptr<client::Client> Connect();
template <typename T>
T OrExit(absl::StatusOr<T> v) {
  if (!v.ok()) std::exit(Fail(v.status()));
  return std::move(*v);
}
// The terminal's columns and rows (120 x 40 when stdout is not a terminal).
std::pair<int, int> TerminalSize();
std::vector<v1::Trial> AllTrials(client::Client& c, int64_t sweep_id,
                                 v1::TrialOrder order = v1::TRIAL_ORDER_NUMBER);
int WaitExitCode(v1::SweepState s);

// Follows the sweep's event stream until it ends, and returns it as it ended. `on_event` sees
// every event (its return value is ignored). Across a restart of the daemon it reconnects and
// resumes after the last event it saw. DEADLINE_EXCEEDED once `deadline` passed.
[[nodiscard]] absl::StatusOr<v1::Sweep> FollowUntilEnded(
    std::unique_ptr<client::Client>& c, int64_t sweep_id, absl::Time deadline,
    const std::function<void(const v1::Event&)>& on_event);

// Before parsing: the first word that is not an option must name a subcommand wherever the app
// (or the subcommand it names) has subcommands; otherwise prints an error and returns false.
bool KnownSubcommands(CLI::App& app, int argc, char** argv);

}  // namespace hpo::client::cli
