#include "client/cli/watch_commands.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "client/cli/cli.h"
#include "client/table.h"
#include "hpo/v1/states.h"

namespace hpo::client::cli {

int WatchSweep(int64_t sweep_id, double interval_s, const std::string& sort) {
  std::unique_ptr<client::Client> c = Connect();
  v1::Sweep sweep = OrExit(c->GetSweep(sweep_id));
  std::map<int64_t, v1::Trial> trials;
  bool tty = ::isatty(STDOUT_FILENO);
  absl::Time last_render = absl::InfinitePast();
  std::string last_line;
  auto snapshot = [&] {
    std::vector<v1::Trial> list;
    for (auto& [id, t] : trials) list.push_back(t);
    bool by_objective = sort == "objective";
    bool maximize = sweep.direction() == v1::DIRECTION_MAXIMIZE;
    std::stable_sort(list.begin(), list.end(), [&](const v1::Trial& a, const v1::Trial& b) {
      if (by_objective) {
        if (a.has_objective() != b.has_objective()) return a.has_objective();
        if (!a.has_objective()) return a.id() < b.id();
        return maximize ? a.objective() > b.objective() : a.objective() < b.objective();
      }
      return a.id() > b.id();  // recent first
    });
    return list;
  };
  auto render = [&](bool force) {
    absl::Time now = absl::Now();
    if (!force && now - last_render < absl::Seconds(interval_s)) return;
    last_render = now;
    std::vector<v1::Trial> list = snapshot();
    if (tty) {
      auto [cols, rows] = TerminalSize();
      client::TableOptions opt;
      opt.max_width = cols;
      opt.max_rows = std::max(rows - 6, 3);
      std::string screen = "\033[H\033[2J" + client::SweepHeader(sweep, list) + "\n" +
                           client::TrialTable(sweep, list, opt);
      std::fwrite(screen.data(), 1, screen.size(), stdout);
    } else {
      std::string header = client::SweepHeader(sweep, list);
      std::string line =
          absl::StrCat("[", absl::FormatTime("%H:%M:%S", now, absl::LocalTimeZone()), "] ",
                       absl::StrReplaceAll(header.substr(0, header.size() - 1), {{"\n", " | "}}));
      if (line != last_line || force) std::printf("%s\n", line.c_str());
      last_line = line;
    }
    std::fflush(stdout);
  };
  absl::StatusOr<v1::Sweep> ended =
      FollowUntilEnded(c, sweep_id, absl::InfiniteFuture(), [&](const v1::Event& e) {
        if (e.has_sweep()) sweep = e.sweep();
        if (e.has_trial()) trials[e.trial().id()] = e.trial();
        render(false);
      });
  if (!ended.ok()) return Fail(ended.status());
  sweep = *ended;
  std::vector<v1::Trial> list = snapshot();
  if (tty) {
    render(true);
  } else {
    client::TableOptions opt;
    std::printf("%s\n%s", client::SweepHeader(sweep, list).c_str(),
                client::TrialTable(sweep, list, opt).c_str());
  }
  return 0;
}

WatchCommands::WatchCommands(CLI::App& app, int& rc) : rc_(rc) {
  CLI::App* watch = app.add_subcommand("watch", "live table of a sweep until it ends");
  watch->add_option("sweep", watch_.sweep, "sweep id")->required();
  watch->add_option("--interval", watch_.interval, "seconds between refreshes")
      ->capture_default_str();
  watch->add_option("--sort", watch_.sort, "objective | recent")
      ->capture_default_str()
      ->check(CLI::IsMember({"objective", "recent"}));
  watch->callback([this] { rc_ = WatchSweep(watch_.sweep, watch_.interval, watch_.sort); });

  CLI::App* wait = app.add_subcommand("wait",
                                      "block until the sweep ends; exit 0 COMPLETED/GOAL_REACHED, "
                                      "3 FAILED, 4 CANCELED, 5 TIMED_OUT");
  wait->add_option("sweep", wait_.sweep, "sweep id")->required();
  wait->add_option("--timeout", wait_.timeout, "give up after this many seconds (exit 1)");
  wait->callback([this] { Wait(); });
}

void WatchCommands::Wait() {
  auto c = Connect();
  absl::Time deadline =
      wait_.timeout > 0 ? absl::Now() + absl::Seconds(wait_.timeout) : absl::InfiniteFuture();
  absl::StatusOr<v1::Sweep> sweep = FollowUntilEnded(c, wait_.sweep, deadline, nullptr);
  if (absl::IsDeadlineExceeded(sweep.status())) {
    std::fprintf(stderr, "hpo wait: sweep %lld still runs after %gs\n",
                 static_cast<long long>(wait_.sweep), wait_.timeout);
    rc_ = kExitError;
    return;
  }
  if (!sweep.ok()) {
    rc_ = Fail(sweep.status());
    return;
  }
  std::printf("sweep %lld %s: %s\n", static_cast<long long>(wait_.sweep),
              v1::StateName(sweep->state()).c_str(), sweep->message().c_str());
  rc_ = WaitExitCode(sweep->state());
}

}  // namespace hpo::client::cli
