// scale_bench: the controller at scale, in virtual time. One sweep of --trials random trials
// (default 100,000), --concurrent of them running at once (default 1,000) on the simulated
// backend, each reporting one epoch per virtual second up to --epochs, with ASHA stopping the
// losers; a real SqliteStore (durable by default) in a temp dir, and the real trial directories
// (tests/fakes/test_daemon.h puts them together).
//
// It drives the controller the way hpod's loop does (reports posted as work, one batch per
// virtual second) and prints wall time, the controller's batch time (the lag a request would
// see: p50 / p99 / max), trials and suggestions per second, CPU per trial, peak RSS, and the
// memory each running trial costs: the resident set when --concurrent trials first run at once,
// less the resident set before the sweep was submitted, over --concurrent.
// Everything runs in this one process, so CPU and RSS are the daemon's plus this driver's
// small share: an upper bound on hpod's.

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "server/core/controller.h"
#include "tests/fakes/test_daemon.h"

namespace {

using hpo::server::Controller;
namespace v1 = hpo::v1;

struct Running {
  std::string token;
  double quality = 0;  // the trial's final loss: what its curve tends to
  absl::Time start;
  int64_t step = 0;
};

double CpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double PeakRssMiB() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

// The resident set now (not the peak), from /proc/self/statm.
double RssMiB() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) /
         (1024.0 * 1024.0);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"scale_bench: a large sweep with ASHA through the controller, in virtual time"};
  int64_t trials = 100'000;
  int concurrent = 1'000, epochs = 27;
  bool no_durable = false, inline_suggestions = false;
  std::string stopper = "asha";
  std::string algorithm;  // none: the sweep names none, so hpod's default (auto) chooses
  app.add_option("--trials", trials, "trials in the sweep")->capture_default_str();
  app.add_option("--concurrent", concurrent, "trials running at once")->capture_default_str();
  app.add_option("--epochs", epochs, "epochs of a trial that is never stopped")
      ->capture_default_str();
  app.add_flag("--no-durable", no_durable, "SQLite without fsync per commit");
  app.add_option("--stopper", stopper, "early stopping: asha (eta 3) or median (grace 1, 3 trials)")
      ->check(CLI::IsMember({"asha", "median"}))
      ->capture_default_str();
  app.add_flag("--inline-suggestions", inline_suggestions,
               "the sampler's proposals on the controller's thread, within its slice (as in "
               "virtual-time tests), not on the suggester's thread (as in hpod)");
  app.add_option("--algorithm", algorithm,
                 "the sweep's algorithm (random, tpe, ...); none given: hpod's default");
  CLI11_PARSE(app, argc, argv);

  hpo::fakes::TestDaemon::Options daemon_options;
  daemon_options.gpus = 0;
  daemon_options.slots = concurrent;
  daemon_options.durable = !no_durable;
  daemon_options.start = absl::FromUnixSeconds(1'800'000'000);
  daemon_options.tick = absl::Seconds(1);
  daemon_options.dir_prefix = "hpo-scale";
  daemon_options.suggest_thread = !inline_suggestions;
  hpo::fakes::TestDaemon daemon(daemon_options);
  hpo::FakeClock& clock = daemon.clock();
  const std::string& root = daemon.root();
  // Each launched trial: its token and how good it will be (from its x), read off the LaunchSpec.
  std::map<int64_t, Running> running;
  daemon.set_script([&](const hpo::backend::LaunchSpec& s) {
    Running r;
    r.token = s.env.at("HPO_TRIAL_TOKEN");
    r.quality = std::stod(s.argv.at(1).substr(4));  // "--x=<value>"
    r.start = clock.Now();
    running[s.trial_id] = std::move(r);
    hpo::backend::SimulatedFate fate;
    fate.run_time = absl::Seconds(epochs) + absl::Milliseconds(500);
    return fate;
  });
  daemon.simulated().keep_launched(false);
  Controller& controller = daemon.controller();

  v1::SubmitSweepRequest req;
  req.set_spec_yaml(absl::StrCat(
      "name: scale\n", "command: [train, '--x={x}']\n",
      algorithm.empty() ? std::string() : absl::StrCat("algorithm: ", algorithm, "\n"),
      "parameters: {x: {type: float, low: 0, high: 1}}\n",
      "objective: {metric: loss, direction: minimize}\n", "budget: {max_trials: ", trials,
      ", max_concurrent: ", concurrent, "}\n",
      stopper == "asha"
          ? absl::StrCat("early_stopping: {name: asha, min_resource: 1, max_resource: ", epochs,
                         ", reduction_factor: 3}\n")
          : std::string("early_stopping: {name: median, grace_steps: 1, min_trials: 3}\n")));
  req.set_source("scale.yaml");
  req.set_base_dir(root);

  double rss0 = RssMiB();
  double rss_full = -1;  // when `concurrent` trials first ran at once
  double cpu0 = CpuSeconds();
  auto wall0 = std::chrono::steady_clock::now();
  auto sweep = controller.Submit(hpo::server::Controller::AllowedForTest(), req);
  if (!sweep.ok()) {
    std::fprintf(stderr, "scale_bench: %s\n", sweep.status().ToString().c_str());
    return 1;
  }
  std::vector<double> batch_ms;
  int64_t reports = 0, stops = 0;
  int64_t virtual_seconds = 0;
  while (!controller.AllSweepsEnded()) {
    // Every running trial reports the epochs it finished since the last virtual second.
    for (auto it = running.begin(); it != running.end();) {
      Running& r = it->second;
      int64_t done = absl::ToInt64Seconds(clock.Now() - r.start);
      if (done > epochs) {
        it = running.erase(it);
        continue;
      }
      if (done > r.step) {
        r.step = done;
        v1::ReportRequest report;
        report.set_trial_id(it->first);
        report.set_step(done);
        (*report.mutable_metrics())["loss"] = r.quality + 1.0 / static_cast<double>(done);
        int64_t id = it->first;
        controller.Post(
            [&controller, &running, &stops, report, token = r.token, id]() -> Controller::Done {
              auto reply = controller.Report(report, token);
              if (reply.ok() && reply->action() == v1::ReportResponse::ACTION_STOP) {
                running.erase(id);  // the trial honours the stop at once
                ++stops;
              }
              return nullptr;
            });
        ++reports;
      }
      ++it;
    }
    // One virtual second's work: a batch, and those that make the trials its batch had no
    // time to suggest (each timed on its own: the lag a request would see).
    auto batch = [&] {
      auto b0 = std::chrono::steady_clock::now();
      bool more = controller.RunOneBatch();
      batch_ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - b0).count());
      return more;
    };
    while (batch()) {
    }
    // Proposals made on the suggester's thread: once they are all back, a batch makes their
    // trials (and may ask for more), all within this virtual second.
    while (controller.Suggesting()) {
      while (controller.SuggesterBusy())
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      batch();
    }
    if (rss_full < 0 && static_cast<int>(running.size()) >= concurrent) rss_full = RssMiB();
    clock.Advance(absl::Seconds(1));
    ++virtual_seconds;
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  double cpu = CpuSeconds() - cpu0;
  auto final_sweep = controller.GetSweep(hpo::server::Controller::AllowedForTest(), sweep->id());
  int64_t done = 0;
  std::string counts;
  for (const auto& [state, n] : final_sweep->trial_counts()) {
    done += n;
    absl::StrAppend(&counts, counts.empty() ? "" : ", ", n, " ", state);
  }
  std::printf(
      "\nController at scale: %lld trials, %d at once, %s (1..%d epochs), simulated backend in "
      "virtual time, %s SQLite, proposals made %s\n\n",
      static_cast<long long>(trials), concurrent,
      stopper == "asha" ? "ASHA (eta 3)" : "median stopping", epochs,
      no_durable ? "non-durable" : "durable",
      inline_suggestions ? "on the controller's thread" : "on the suggester's thread");
  std::printf(
      "| trials ended | reports | virtual time | wall time | batch p50 | batch p99 | batch max | "
      "trials/s | suggestions/s | CPU per trial | peak RSS | memory per running trial |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  double per_running_kib = rss_full < 0 ? -1 : (rss_full - rss0) * 1024.0 / concurrent;
  std::printf(
      "| %lld | %lld | %lld s | %.1f s | %.1f ms | %.1f ms | %.1f ms | %.0f | %.0f | %.3f ms | "
      "%.0f MiB | %.1f KiB |\n",
      static_cast<long long>(done), static_cast<long long>(reports),
      static_cast<long long>(virtual_seconds), wall, Percentile(batch_ms, 0.5),
      Percentile(batch_ms, 0.99), *std::max_element(batch_ms.begin(), batch_ms.end()),
      static_cast<double>(done) / wall, static_cast<double>(trials) / wall,
      cpu / static_cast<double>(done) * 1000, PeakRssMiB(), per_running_kib);
  std::printf("\ntrials: %s; %lld stopped early; sweep %s\n", counts.c_str(),
              static_cast<long long>(stops),
              hpo::v1::SweepState_Name(final_sweep->state()).c_str());
  std::printf("targets: CPU per trial < 1 ms: %s; peak RSS < 300 MB: %s\n",
              cpu / static_cast<double>(done) < 1e-3 ? "met" : "NOT met",
              PeakRssMiB() < 300 ? "met" : "NOT met");
  return final_sweep->state() == v1::SWEEP_STATE_COMPLETED ? 0 : 1;
}
