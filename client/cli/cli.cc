#include "client/cli/cli.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "hpo/v1/states.h"

namespace hpo::client::cli {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "hpo: %s\n", std::string(s.message()).c_str());
  return kExitError;
}

std::unique_ptr<client::Client> Connect() {
  auto c = client::Client::FromEnvironment(/*autostart=*/true);
  if (!c.ok()) std::exit(Fail(c.status()));
  return std::move(*c);
}

std::pair<int, int> TerminalSize() {
  struct winsize ws {};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    return {ws.ws_col, ws.ws_row};
  }
  return {120, 40};
}

std::vector<v1::Trial> AllTrials(client::Client& c, int64_t sweep_id, v1::TrialOrder order) {
  v1::ListTrialsRequest req;
  req.set_sweep_id(sweep_id);
  req.set_order(order);
  return OrExit(c.ListTrials(req));
}

int WaitExitCode(v1::SweepState s) {
  switch (s) {
    case v1::SWEEP_STATE_COMPLETED:
    case v1::SWEEP_STATE_GOAL_REACHED:
      return 0;
    case v1::SWEEP_STATE_FAILED:
      return 3;
    case v1::SWEEP_STATE_CANCELED:
      return 4;
    case v1::SWEEP_STATE_TIMED_OUT:
      return 5;
    default:
      return kExitError;
  }
}

absl::StatusOr<v1::Sweep> FollowUntilEnded(std::unique_ptr<client::Client>& c, int64_t sweep_id,
                                           absl::Time deadline,
                                           const std::function<void(const v1::Event&)>& on_event) {
  if (!on_event) {  // nothing to show: a sweep that already ended needs no replay
    absl::StatusOr<v1::Sweep> sweep = c->GetSweep(sweep_id);
    if (!sweep.ok() && !absl::IsUnavailable(sweep.status())) return sweep;
    if (sweep.ok() && v1::IsFinal(sweep->state())) return sweep;
  }
  int64_t seq = 0;
  while (true) {
    absl::Duration left =
        deadline == absl::InfiniteFuture() ? absl::InfiniteDuration() : deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("sweep ", sweep_id, " has not ended yet"));
    }
    absl::Status s = c->Watch(
        sweep_id, seq,
        [&](const v1::Event& e) {
          seq = e.seq();
          if (on_event) on_event(e);
          return true;
        },
        left);
    if (s.ok()) {  // the stream ends when the sweep does
      absl::StatusOr<v1::Sweep> sweep = c->GetSweep(sweep_id);
      if (sweep.ok() && !v1::IsFinal(sweep->state())) continue;
      // A daemon that stops right after the sweep ended may not answer; ask the next one.
      if (sweep.ok() || !absl::IsUnavailable(sweep.status())) return sweep;
      s = sweep.status();
    }
    if (absl::IsDeadlineExceeded(s)) {
      return absl::DeadlineExceededError(absl::StrCat("sweep ", sweep_id, " has not ended yet"));
    }
    // The daemon went away (or dropped a watcher that fell behind): resume from the last event
    // seen; anything else is final.
    if (!absl::IsUnavailable(s) && !absl::IsCancelled(s) && !absl::IsResourceExhausted(s)) return s;
    std::fprintf(stderr, "hpo: lost the daemon (%s); reconnecting...\n",
                 std::string(s.message()).c_str());
    absl::SleepFor(absl::Seconds(1));
    if (auto again = client::Client::FromEnvironment(/*autostart=*/false); again.ok()) {
      c = std::move(*again);
    }
  }
}

bool KnownSubcommands(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  std::string path = "hpo";
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (arg[0] == '-') {
      if (std::strcmp(arg, "--") == 0) return true;
      continue;
    }
    std::vector<CLI::App*> subs = at->get_subcommands([](CLI::App*) { return true; });
    if (subs.empty()) return true;  // a command's own arguments from here on
    CLI::App* next = nullptr;
    for (CLI::App* sub : subs) {
      if (sub->get_name() == arg) next = sub;
    }
    if (next == nullptr) {
      std::fprintf(stderr, "%s: unknown command '%s' (see %s --help)\n", path.c_str(), arg,
                   path.c_str());
      return false;
    }
    at = next;
    path += " " + next->get_name();
  }
  return true;
}

}  // namespace hpo::client::cli
