// interruption_bench: what interruptions cost a sweep, in virtual time.
//
// Part 1, resume against retry from scratch, in the same run: the same sweep (random search, the
// same seed, so the same configurations) through the whole controller on the simulated backend
// (tests/fakes/test_daemon.h), once with resumable trials (`checkpoint:`) and once without
// (`max_retries`), under allocation time limits (every allocation ends at the same wall-clock
// multiple of the limit), preemptions and node failures drawn at given rates per running trial.
// A trial trains `epochs` epochs of `epoch_minutes`, reporting each; a resumable one checkpoints
// when told (at its allocation's end minus the grace: it finishes the epoch in progress; at a
// preemption: within GraceTime, keeping the finished epochs) and every `checkpoint_every` epochs
// (what a node failure, which warns nobody, leaves). Each (re)start costs `restart_minutes`.
// Printed: interruptions, epochs recomputed per interruption (mean, max), the sweep's wall time,
// its GPU-hours (hpod's own accounting: GPUs times running time over segments and retries), and
// the GPU-hours held (restarts included) until the sweep's best trial completed.
//
// Part 2, allocation efficiency (with Slurm): the steps-mode AllocationPool itself, against a
// scripted slurmctld in virtual time whose allocations wait `queue_minutes` in the queue and end
// at their time limit, on a workload of mixed GPU counts (1, 2, 4 of an 8-GPU node) and lengths.
// Trials are resumable: told before the end, they checkpoint and continue in the replacement the
// pool asked for ahead. Printed: the fraction of allocation GPU-time that ran trials, and how
// long an interrupted trial waited for its next segment to start.
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "hpo/v1/states.h"
#include "server/core/controller.h"
#include "tests/fakes/test_daemon.h"
#ifdef HPO_WITH_SLURM
#include "slurm_backend/allocation_pool.h"
#include "tests/fakes/fake_slurm.h"
#endif

namespace {

using hpo::backend::Interruption;
using hpo::backend::LaunchSpec;
using hpo::backend::SimulatedFate;
namespace v1 = hpo::v1;

struct Config {
  int trials = 48, concurrent = 8, epochs = 60;
  double epoch_minutes = 1, restart_minutes = 2, grace_minutes = 2, time_limit_hours = 4;
  int checkpoint_every = 5;
  unsigned seed = 1;
};

struct Rates {
  const char* name;
  double preempt_per_hour, node_fail_per_hour;  // per running trial
};

struct Outcome {
  int interruptions = 0;
  double recomputed_sum = 0, recomputed_max = 0;
  double wall_hours = 0, gpu_hours = 0, gpu_hours_to_best = 0, best = 0;
};

double Loss(double x, int epoch) { return (x - 0.3) * (x - 0.3) + 0.5 / epoch; }

// One segment (or attempt) of a trial as the script planned it.
struct Plan {
  std::string token;
  double x = 0;
  absl::Time s0;     // its epochs start here (after the restart cost)
  int first = 0;     // epochs done before it
  int computed = 0;  // epochs it computes
  int reported = 0;
};

Outcome RunSweep(const Config& c, const Rates& rates, bool resumable) {
  hpo::fakes::TestDaemon::Options o;
  o.gpus = c.concurrent;
  o.slots = c.concurrent;
  o.tick = absl::Seconds(10);
  o.dir_prefix = "hpo-interrupt";
  hpo::fakes::TestDaemon daemon(o);
  hpo::FakeClock& clock = daemon.clock();
  const absl::Time origin = clock.Now();
  const absl::Duration epoch = absl::Seconds(c.epoch_minutes * 60);
  const absl::Duration limit = absl::Seconds(c.time_limit_hours * 3600);
  std::mt19937_64 rng(c.seed);
  std::map<int64_t, int> checkpointed;  // by trial: epochs its checkpoint holds
  std::map<int64_t, Plan> plans;
  Outcome out;
  auto exp_after = [&](double per_hour) {
    if (per_hour <= 0) return absl::InfiniteDuration();
    return absl::Seconds(std::exponential_distribution<double>(per_hour / 3600)(rng));
  };
  daemon.set_script([&](const LaunchSpec& s) {
    Plan p;
    p.token = s.env.at("HPO_TRIAL_TOKEN");
    p.x = std::stod(s.argv.at(1).substr(4));  // "--x=<value>"
    p.s0 = clock.Now() + absl::Seconds(c.restart_minutes * 60);
    p.first = resumable ? checkpointed[s.trial_id] : 0;
    SimulatedFate fate;
    fate.start_delay = p.s0 - clock.Now();
    absl::Time done_at = p.s0 + (c.epochs - p.first) * epoch;
    // The allocation's end: the next multiple of the limit.
    absl::Time limit_at = origin + limit * std::ceil((p.s0 - origin) / limit + 1e-9);
    absl::Time preempt_at = p.s0 + exp_after(rates.preempt_per_hour);
    absl::Time fail_at = p.s0 + exp_after(rates.node_fail_per_hour);
    absl::Time end = std::min({done_at, limit_at, preempt_at, fail_at});
    int finished = static_cast<int>(std::floor((end - p.s0) / epoch + 1e-9));
    int kept = p.first, lost = 0;
    if (end == done_at) {
      p.computed = c.epochs - p.first;
    } else {
      fate.lost = true;
      ++out.interruptions;
      if (end == limit_at) {
        fate.interruption = Interruption::kTimeLimit;
        if (resumable) {  // told `grace` ahead: ends after the epoch in progress, keeps it all
          finished = static_cast<int>(
              std::ceil((limit_at - absl::Seconds(c.grace_minutes * 60) - p.s0) / epoch));
          finished = std::max(0, std::min(finished, c.epochs - p.first));
          end = p.s0 + finished * epoch;
          kept = p.first + finished;
        }
      } else if (end == preempt_at) {
        fate.interruption = Interruption::kPreempted;
        end += absl::Seconds(10);                  // GraceTime
        if (resumable) kept = p.first + finished;  // saved within GraceTime
      } else {
        fate.interruption = Interruption::kNodeFailure;  // no warning: the last periodic one
        if (resumable) {
          kept = std::max(p.first, (p.first + finished) / c.checkpoint_every * c.checkpoint_every);
        }
      }
      p.computed = finished;
      lost = p.first + finished - (resumable ? kept : 0);
      out.recomputed_sum += lost;
      out.recomputed_max = std::max<double>(out.recomputed_max, lost);
      if (resumable) checkpointed[s.trial_id] = kept;
    }
    fate.run_time = std::max(absl::ZeroDuration(), end - p.s0);
    plans[s.trial_id] = p;
    return fate;
  });
  daemon.simulated().keep_launched(false);
  std::string yaml = absl::StrCat(
      "name: interrupt\ncommand: [train, '--x={x}']\n",
      "parameters: {x: {type: float, low: 0, high: 1}}\n",
      "objective: {metric: loss, direction: minimize}\n", "budget: {max_trials: ", c.trials,
      ", max_concurrent: ", c.concurrent, "}\nresources: {gpus: 1}\nseed: ", c.seed, "\n",
      resumable ? "checkpoint: {signal: SIGUSR1, grace: 2m, max_segments: 100000}\n"
                : "max_retries: 100\n");
  absl::StatusOr<int64_t> id = daemon.Submit(yaml, "interrupt.yaml");
  if (!id.ok()) {
    std::fprintf(stderr, "interruption_bench: %s\n", id.status().ToString().c_str());
    std::exit(1);
  }
  hpo::server::Controller& controller = daemon.controller();
  const absl::Duration dt = absl::Seconds(10);
  double gpu_seconds = 0;
  std::vector<std::pair<double, double>> completions;  // (GPU-seconds so far, final loss)
  while (!controller.AllSweepsEnded()) {
    controller.RunOnce();
    absl::Time now = clock.Now();
    for (auto& [trial, p] : plans) {
      while (p.reported < p.computed && p.s0 + (p.reported + 1) * epoch <= now) {
        ++p.reported;
        int step = p.first + p.reported;
        v1::ReportRequest r;
        r.set_trial_id(trial);
        r.set_step(step);
        (*r.mutable_metrics())["loss"] = Loss(p.x, step);
        (void)controller.Report(r, p.token);
        if (step == c.epochs) completions.emplace_back(gpu_seconds, Loss(p.x, step));
      }
    }
    gpu_seconds += daemon.simulated().Running() * absl::ToDoubleSeconds(dt);
    clock.Advance(dt);
  }
  controller.RunOnce();
  out.best = 1e300;
  for (const auto& [gs, loss] : completions) out.best = std::min(out.best, loss);
  for (const auto& [gs, loss] : completions) {
    if (loss == out.best) {
      out.gpu_hours_to_best = gs / 3600;
      break;
    }
  }
  v1::Sweep sweep = *controller.GetSweep(hpo::server::Controller::AllowedForTest(), *id);
  auto hours = [](const google::protobuf::Timestamp& t) {
    return (static_cast<double>(t.seconds()) + t.nanos() * 1e-9) / 3600;
  };
  out.wall_hours = hours(sweep.ended_at()) - hours(sweep.created_at());
  for (const v1::Trial& t : daemon.Trials(*id)) out.gpu_hours += t.gpu_seconds() / 3600;
  return out;
}

#ifdef HPO_WITH_SLURM
// Part 2: the AllocationPool against a scripted slurmctld in virtual time.
struct Efficiency {
  double trial_gpu_hours = 0, alloc_gpu_hours = 0, wall_hours = 0, mean_wait_min = 0;
  int allocations = 0, interruptions = 0;
};

Efficiency RunPool(int trials, double queue_minutes, double limit_hours, unsigned seed) {
  namespace slurm = hpo::slurm;
  std::vector<uint32_t> canceled;
  hpo::fakes::FakeSlurm api(canceled);
  hpo::FakeClock clock(absl::FromUnixSeconds(1'800'000'000));
  slurm::SlurmCalls calls(/*thread=*/false);  // slurmctld answers at once
  slurm::AllocationPool pool(api, calls, clock, "bench");
  slurm::SlurmPlacement settings;
  settings.time_limit_minutes = static_cast<int>(limit_hours * 60);
  settings.allocation.gpus_per_node = 8;
  settings.allocation.cpus_per_node = 8;
  settings.allocation.max = 4;
  settings.allocation.idle_timeout = absl::Minutes(5);
  const hpo::backend::Placement p = slurm::OnSlurm(settings);
  const absl::Duration grace = absl::Minutes(2), dt = absl::Seconds(10);
  pool.NoteCheckpointGrace(1, grace);
  struct Work {
    int64_t id;
    int gpus;
    absl::Duration left;
    absl::Time queued;
    bool resumed = false;  // it waits after an interruption
  };
  struct Step {
    Work w;
    uint32_t job;
    absl::Time end;
  };
  std::mt19937_64 rng(seed);
  std::vector<Work> waiting;
  const int sizes[] = {1, 1, 1, 2, 2, 4};
  for (int i = 0; i < trials; ++i) {
    waiting.push_back({i + 1, sizes[rng() % 6],
                       absl::Minutes(std::uniform_real_distribution<double>(10, 90)(rng)),
                       clock.Now(), false});
  }
  std::map<int64_t, Step> running;
  std::map<uint32_t, absl::Time> submitted;
  Efficiency e;
  double waited_minutes = 0;
  int starts = 0;
  const absl::Time t0 = clock.Now();
  while (!waiting.empty() || !running.empty()) {
    absl::Time now = clock.Now();
    // slurmctld: queued allocations start after the queue wait and end at their time limit.
    for (auto& [job, j] : api.jobs) {
      slurm::JobStatus& s = j.status;
      if (!submitted.count(job)) submitted[job] = now;
      if (s.state == slurm::JobState::kPending &&
          now - submitted[job] >= absl::Minutes(queue_minutes)) {
        s.submit_time = submitted[job];
        api.Run(job, absl::StrCat("n", job), now, now + absl::Minutes(settings.time_limit_minutes));
        ++e.allocations;
      } else if (s.state == slurm::JobState::kRunning && now >= s.end_time) {
        s.state = slurm::JobState::kTimeout;
      }
      if (s.state == slurm::JobState::kRunning) {
        e.alloc_gpu_hours += settings.allocation.gpus_per_node * absl::ToDoubleHours(dt);
      }
    }
    std::map<uint32_t, const slurm::JobStatus*> by_id;
    for (auto& [job, j] : api.jobs) by_id[job] = &j.status;
    pool.Update(by_id);
    // Steps end: done, or told to checkpoint before their allocation's end (back to the front).
    for (auto it = running.begin(); it != running.end();) {
      Step& s = it->second;
      std::optional<slurm::AllocationPool::Ending> ending = pool.EndOf(s.job);
      bool told = ending && now >= ending->at - grace;
      if (now < s.end && !told) {
        e.trial_gpu_hours += s.w.gpus * absl::ToDoubleHours(dt);
        ++it;
        continue;
      }
      if (now < s.end) {
        s.w.left = s.end - now;
        s.w.queued = now;
        s.w.resumed = true;
        waiting.insert(waiting.begin(), s.w);
        ++e.interruptions;
      }
      pool.Release(it->first, now);
      it = running.erase(it);
    }
    // Start what fits, oldest first (as the controller does, without its backfill limit).
    for (auto it = waiting.begin(); it != waiting.end();) {
      hpo::backend::Resources r;
      r.gpus = it->gpus;
      r.needs = 2 * grace;
      if (!pool.CanPlace(1, r, p)) {
        ++it;
        continue;
      }
      std::optional<slurm::AllocationPool::Placed> placed = pool.Place(it->id, 1, r);
      if (it->resumed) {
        waited_minutes += absl::ToDoubleMinutes(now - it->queued);
        ++starts;
      }
      running[it->id] = {*it, placed->job_id, now + it->left};
      it = waiting.erase(it);
    }
    pool.Resize();
    clock.Advance(dt);
  }
  pool.SweepEnded(1);
  e.wall_hours = absl::ToDoubleHours(clock.Now() - t0);
  e.mean_wait_min = starts > 0 ? waited_minutes / starts : 0;
  return e;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"interruption_bench: what interruptions cost a sweep, resume against retry"};
  Config c;
  int pool_trials = 300;
  double queue_minutes = 10;
  app.add_option("--trials", c.trials, "trials in the sweep")->capture_default_str();
  app.add_option("--concurrent", c.concurrent, "GPUs (one per trial)")->capture_default_str();
  app.add_option("--epochs", c.epochs, "epochs per trial")->capture_default_str();
  app.add_option("--epoch-minutes", c.epoch_minutes)->capture_default_str();
  app.add_option("--time-limit-hours", c.time_limit_hours, "allocation time limit")
      ->capture_default_str();
  app.add_option("--checkpoint-every", c.checkpoint_every, "periodic checkpoint, in epochs")
      ->capture_default_str();
  app.add_option("--seed", c.seed)->capture_default_str();
  app.add_option("--pool-trials", pool_trials, "part 2: trials of mixed size")
      ->capture_default_str();
  app.add_option("--queue-minutes", queue_minutes, "part 2: an allocation's queue wait")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::printf(
      "Part 1: %d trials of %d epochs x %.0f min on %d GPUs, allocations end every %.0f h, "
      "restart %.0f min, grace %.0f min, periodic checkpoint every %d epochs, seed %u\n\n",
      c.trials, c.epochs, c.epoch_minutes, c.concurrent, c.time_limit_hours, c.restart_minutes,
      c.grace_minutes, c.checkpoint_every, c.seed);
  std::printf("%-34s %-8s %7s %14s %13s %9s %9s %12s\n", "interruptions", "mode", "count",
              "recomputed/int", "max/int", "wall h", "GPU-h", "GPU-h->best");
  const Rates scenarios[] = {
      {"time limits", 0, 0},
      {"+ preemption 1/8 GPU-h", 1.0 / 8, 0},
      {"+ node failure 1/24 GPU-h", 1.0 / 8, 1.0 / 24},
  };
  for (const Rates& r : scenarios) {
    for (bool resumable : {true, false}) {
      Outcome o = RunSweep(c, r, resumable);
      std::printf("%-34s %-8s %7d %14.2f %13.0f %9.2f %9.1f %12.1f\n", r.name,
                  resumable ? "resume" : "scratch", o.interruptions,
                  o.interruptions > 0 ? o.recomputed_sum / o.interruptions : 0.0, o.recomputed_max,
                  o.wall_hours, o.gpu_hours, o.gpu_hours_to_best);
    }
  }
#ifdef HPO_WITH_SLURM
  std::printf(
      "\nPart 2: the steps-mode allocation pool, %d resumable trials of 1, 2 or 4 GPUs and 10-90 "
      "min on 8-GPU allocations (max 4), queue wait %.0f min\n\n",
      pool_trials, queue_minutes);
  std::printf("%-16s %12s %12s %11s %9s %14s %12s\n", "time limit", "trial GPU-h", "alloc GPU-h",
              "efficiency", "wall h", "allocations", "resume wait");
  for (double hours : {1.0, 4.0, 12.0}) {
    Efficiency e = RunPool(pool_trials, queue_minutes, hours, c.seed);
    std::printf("%-16s %12.1f %12.1f %10.1f%% %9.2f %14d %10.1f m\n",
                absl::StrCat(hours, " h").c_str(), e.trial_gpu_hours, e.alloc_gpu_hours,
                100 * e.trial_gpu_hours / e.alloc_gpu_hours, e.wall_hours, e.allocations,
                e.mean_wait_min);
  }
#else
  std::printf("\nPart 2 needs the Slurm backend (built with HPO_WITH_SLURM=OFF).\n");
#endif
  return 0;
}
