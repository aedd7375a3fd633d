// report_bench: how many durable reports per second a real hpod takes from N concurrent trial
// clients over loopback gRPC, with p50/p99 latency; then checks that every acknowledged report is
// in the SQLite file, and measures Optuna 3.1 doing the equivalent (trial.report +
// should_prune into an SQLite storage) in the same run.
//
// The trials are real: a sweep of N trials whose processes only publish their id and token and
// sleep; this program then reports on their behalf with one gRPC channel per trial, as N
// separate trial processes would.
//
// --soak-seconds S instead runs a soak: --soak-clients trials each reporting at --soak-hz (open
// loop, paced) for S seconds, sampling hpod's RSS every 10 s; it prints the latency, the RSS
// over time and its growth after the warm-up (the first fifth), and counts the reports in the
// database against those acknowledged.

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>
#include <sstream>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "bench/bench_daemon.h"
#include "client/client.h"
#include "common/data_dir.h"
#include "common/files.h"
#include "common/proofs.h"
#include "grpcpp/alarm.h"
#include "grpcpp/grpcpp.h"
#include "hpo/v1/hpo.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Creds {
  int64_t trial_id;
  std::string token;
};

// Where the load goes: hpod's TCP address, and the CA it proves itself with (TLS, as trials
// reach it; "" for an hpod started with --insecure-listen).
struct Target {
  std::string endpoint;
  std::string tls_ca_pem;
};

struct Result {
  int clients = 0;
  double offered = 0;  // reports/s offered (paced); 0: closed loop
  double seconds = 0;
  int64_t ok = 0;
  int64_t errors = 0;
  double rate = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
  double hpod_cores = 0, generator_cores = 0;  // CPU used during the measured window, in cores
};

// CPU seconds (user + system) `pid` has used so far, all its threads (0 when unknown).
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  // The fields after the command name (which may hold spaces) in parentheses.
  size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {  // fields 14 and 15: utime, stime (ticks)
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The load generator shares the 2 cores with hpod; its channels use gRPC's lean client stack
// and no bandwidth probing so that as much CPU as possible goes to the server under test.
void LoadGeneratorArgs(grpc::ChannelArguments& args) {
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // its own connection, like a process
  args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
}

double Percentile(std::vector<double>& v, double p);

// The virtual trials, all driven by one thread over one completion queue: each trial has its own
// connection and exactly one operation in flight. One thread with no hand-offs keeps the load
// generator's share of the 2 cores small, so the measurement is of hpod.
class LoadGenerator {
 public:
  enum class Rpc { kUnary, kStream };

  // `interval` 0: each trial sends its next report as soon as the last is answered (closed loop);
  // otherwise one report per interval per trial (open loop, paced), starts spread over one
  // interval. Paced latencies count from when a report was due, not from when it went out, so a
  // trial held back by a slow answer (or a late generator) shows as latency (no coordinated
  // omission).
  LoadGenerator(const Target& target, const std::vector<Creds>& creds, int k, Rpc rpc,
                int64_t first_step, Clock::duration interval = Clock::duration::zero())
      : rpc_(rpc), interval_(interval) {
    for (int i = 0; i < k; ++i) {
      auto t = std::make_unique<Trial>();
      t->creds = creds[static_cast<size_t>(i)];
      t->step = first_step;
      grpc::ChannelArguments args;
      LoadGeneratorArgs(args);
      t->channel = grpc::CreateCustomChannel(
          target.endpoint, hpo::client::ChannelCredentials(target.tls_ca_pem), args);
      t->stub = hpo::v1::ReportService::NewStub(t->channel);
      t->channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5));
      trials_.push_back(std::move(t));
    }
  }

  // Runs until `stop` is set and every trial has wound down.
  void Run(const std::atomic<bool>& stop, const std::atomic<bool>& measuring) {
    stop_ = &stop;
    measuring_ = &measuring;
    int active = static_cast<int>(trials_.size());
    for (auto& t : trials_) Begin(*t);
    void* tag = nullptr;
    bool ok = false;
    while (active > 0 && cq_.Next(&tag, &ok)) {
      if (!Step(*static_cast<Trial*>(tag), ok)) --active;
    }
    cq_.Shutdown();
    while (cq_.Next(&tag, &ok)) {
    }
  }

  void Collect(Result* r, std::vector<double>* latencies, int64_t* acknowledged) const {
    for (const auto& t : trials_) {
      latencies->insert(latencies->end(), t->latencies_ms.begin(), t->latencies_ms.end());
      *acknowledged += t->ok;
      r->errors += t->errors;
      if (t->errors > 0) std::fprintf(stderr, "error: %s\n", t->last_error.c_str());
    }
  }

 private:
  enum class Phase { kUnary, kWait, kStart, kWrite, kRead, kWritesDone, kFinish };
  struct Trial {
    Creds creds;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<hpo::v1::ReportService::Stub> stub;
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<grpc::ClientAsyncResponseReader<hpo::v1::ReportResponse>> unary;
    std::unique_ptr<grpc::ClientAsyncReaderWriter<hpo::v1::ReportRequest, hpo::v1::ReportResponse>>
        stream;
    hpo::v1::ReportRequest req;
    hpo::v1::ReportResponse resp;
    grpc::Status status;
    Phase phase = Phase::kUnary;
    int64_t step = 0;
    bool measured = false;
    Clock::time_point sent;
    Clock::time_point next;  // paced: when the next report is due
    grpc::Alarm alarm;
    int64_t ok = 0, errors = 0;
    std::string last_error;
    std::vector<double> latencies_ms;
  };

  // As a trial's reporter calls: no token sent, each report proven with it (common/proofs.h).
  void NewContext(Trial& t) { t.ctx = std::make_unique<grpc::ClientContext>(); }
  void Prepare(Trial& t) {
    t.req.Clear();
    t.req.set_trial_id(t.creds.trial_id);
    t.req.set_step(++t.step);
    double loss = 1.0 / static_cast<double>(t.step);
    (*t.req.mutable_metrics())["loss"] = loss;
    t.req.set_proof(hpo::ReportProof(t.creds.token, t.creds.trial_id, t.step, 0, std::nullopt,
                                     {{"loss", loss}}));
    t.measured = measuring_->load(std::memory_order_relaxed);
    t.sent = Paced() ? t.next : Clock::now();
  }
  void Answered(Trial& t) {
    ++t.ok;
    if (t.measured) {
      t.latencies_ms.push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - t.sent).count());
    }
  }
  void Failed(Trial& t) {
    ++t.errors;
    t.last_error = t.status.error_message();
  }
  bool Paced() const { return interval_ > Clock::duration::zero(); }
  // Paced: waits for the trial's next slot (or goes at once when it is behind; the slot keeps
  // its time, so the delay counts).
  void Wait(Trial& t) {
    auto now = Clock::now();
    auto when = std::chrono::system_clock::now() +
                std::chrono::duration_cast<std::chrono::system_clock::duration>(
                    std::max(t.next, now) - now);
    t.phase = Phase::kWait;
    t.alarm.Set(&cq_, when, &t);
  }
  // Paced: the first slot, spread over one interval across the trials.
  void FirstSlot(Trial& t) {
    t.next = Clock::now() + interval_ * static_cast<int64_t>(t.creds.trial_id % 1000) / 1000;
    Wait(t);
  }
  void Begin(Trial& t) {
    if (rpc_ == Rpc::kUnary && Paced()) {
      FirstSlot(t);
      return;
    }
    if (rpc_ == Rpc::kUnary) {
      SendUnary(t);
      return;
    }
    NewContext(t);
    t.stream = t.stub->PrepareAsyncReportStream(t.ctx.get(), &cq_);
    t.phase = Phase::kStart;
    t.stream->StartCall(&t);
  }
  void SendUnary(Trial& t) {
    Prepare(t);
    NewContext(t);
    t.unary = t.stub->PrepareAsyncReport(t.ctx.get(), t.req, &cq_);
    t.unary->StartCall();
    t.phase = Phase::kUnary;
    t.unary->Finish(&t.resp, &t.status, &t);
  }
  void SendStream(Trial& t) {
    if (stop_->load(std::memory_order_relaxed)) {
      t.phase = Phase::kWritesDone;
      t.stream->WritesDone(&t);
      return;
    }
    Prepare(t);
    t.phase = Phase::kWrite;
    t.stream->Write(t.req, &t);
  }
  void FinishStream(Trial& t) {
    t.phase = Phase::kFinish;
    t.stream->Finish(&t.status, &t);
  }
  // Handles one completion; false once the trial is done.
  bool Step(Trial& t, bool ok) {
    switch (t.phase) {
      case Phase::kUnary:
        if (t.status.ok())
          Answered(t);
        else
          Failed(t);
        if (stop_->load(std::memory_order_relaxed)) return false;
        if (Paced()) {
          t.next += interval_;
          Wait(t);
          return true;
        }
        SendUnary(t);
        return true;
      case Phase::kWait:
        if (rpc_ == Rpc::kStream) {
          SendStream(t);
          return true;
        }
        if (stop_->load(std::memory_order_relaxed)) return false;
        SendUnary(t);
        return true;
      case Phase::kStart:
        if (!ok)
          FinishStream(t);
        else if (Paced())
          FirstSlot(t);
        else
          SendStream(t);
        return true;
      case Phase::kWrite:
        if (!ok) {
          FinishStream(t);
          return true;
        }
        t.phase = Phase::kRead;
        t.stream->Read(&t.resp, &t);
        return true;
      case Phase::kRead:
        if (!ok) {
          FinishStream(t);
          return true;
        }
        Answered(t);
        if (Paced()) {
          t.next += interval_;
          Wait(t);
          return true;
        }
        SendStream(t);
        return true;
      case Phase::kWritesDone:
        FinishStream(t);
        return true;
      case Phase::kFinish:
        if (!t.status.ok()) Failed(t);
        return false;
    }
    return false;
  }

  Rpc rpc_;
  Clock::duration interval_;
  grpc::CompletionQueue cq_;
  std::vector<std::unique_ptr<Trial>> trials_;
  const std::atomic<bool>* stop_ = nullptr;
  const std::atomic<bool>* measuring_ = nullptr;
};

// Runs `k` virtual trials on `rpc` for `seconds` after a 1 s warm-up.
// `rate` > 0: the trials together offer `rate` reports/s (each k/rate apart), else closed loop.
Result Measure(const Target& target, const std::vector<Creds>& creds, int k, double seconds,
               LoadGenerator::Rpc rpc, int64_t first_step, double rate, pid_t daemon,
               int64_t* acknowledged) {
  auto interval = rate > 0 ? std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(static_cast<double>(k) / rate))
                           : Clock::duration::zero();
  LoadGenerator gen(target, creds, k, rpc, first_step, interval);
  std::atomic<bool> stop{false}, measuring{false};
  std::thread driver([&] { gen.Run(stop, measuring); });
  std::this_thread::sleep_for(std::chrono::seconds(1));  // warm-up
  measuring = true;
  auto t0 = Clock::now();
  double hpod_cpu0 = CpuSeconds(daemon), self_cpu0 = CpuSeconds(::getpid());
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  measuring = false;
  double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  double hpod_cpu = CpuSeconds(daemon) - hpod_cpu0, self_cpu = CpuSeconds(::getpid()) - self_cpu0;
  stop = true;
  driver.join();
  Result r;
  r.clients = k;
  r.offered = rate;
  r.seconds = elapsed;
  std::vector<double> all;
  gen.Collect(&r, &all, acknowledged);
  r.ok = static_cast<int64_t>(all.size());
  r.rate = static_cast<double>(r.ok) / elapsed;
  r.p50_ms = Percentile(all, 0.50);
  r.p90_ms = Percentile(all, 0.90);
  r.p99_ms = Percentile(all, 0.99);
  r.max_ms = all.empty() ? 0 : *std::max_element(all.begin(), all.end());
  r.hpod_cores = hpod_cpu / elapsed;
  r.generator_cores = self_cpu / elapsed;
  return r;
}

// Resident set size of `pid` in MiB (0 when unknown).
double RssMiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  double kb = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> kb;
      break;
    }
  }
  return kb / 1024.0;
}

struct Soak {
  Result r;
  std::vector<std::pair<double, double>> rss;  // (seconds since the start, MiB)
};

// `k` trials, each reporting at `hz` for `seconds`; hpod's RSS every 10 s.
Soak RunSoak(const Target& target, const std::vector<Creds>& creds, int k, double hz,
             double seconds, pid_t daemon, int64_t* acknowledged, int64_t first_step = 0) {
  auto interval =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / hz));
  LoadGenerator gen(target, creds, k, LoadGenerator::Rpc::kUnary, first_step, interval);
  std::atomic<bool> stop{false}, measuring{true};
  Soak out;
  auto t0 = Clock::now();
  std::thread driver([&] { gen.Run(stop, measuring); });
  auto since = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  out.rss.emplace_back(0.0, RssMiB(daemon));
  while (since() < seconds) {
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(10.0, seconds - since())));
    out.rss.emplace_back(since(), RssMiB(daemon));
  }
  stop = true;
  driver.join();
  double elapsed = since();
  std::vector<double> all;
  gen.Collect(&out.r, &all, acknowledged);
  out.r.clients = k;
  out.r.seconds = elapsed;
  out.r.ok = static_cast<int64_t>(all.size());
  out.r.rate = static_cast<double>(out.r.ok) / elapsed;
  out.r.p50_ms = Percentile(all, 0.50);
  out.r.p90_ms = Percentile(all, 0.90);
  out.r.p99_ms = Percentile(all, 0.99);
  out.r.max_ms = all.empty() ? 0 : *std::max_element(all.begin(), all.end());
  return out;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

int64_t CountReports(const std::string& db_path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) return -1;
  sqlite3_stmt* st = nullptr;
  int64_t n = -1;
  if (sqlite3_prepare_v2(
          db, "SELECT (SELECT COUNT(*) FROM reports) + (SELECT COUNT(*) FROM report_log)", -1, &st,
          nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    n = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "report_bench: %s\n", msg.c_str());
  std::exit(1);
}

}  // namespace

// A viewer's flood of what a shared hpod's callers may ask, as fast as it is answered, from
// `threads` threads each: plans of a 100,000-trial sweep, watches held open (more than the
// cap), and reads of the sweep and its trials. Counts what was answered and what refused.
struct Flood {
  std::atomic<int64_t> plans{0}, plans_refused{0}, watches{0}, watches_refused{0}, reads{0};
  void Run(hpo::client::Client& client, int64_t sweep_id, const std::string& base_dir,
           const std::atomic<bool>& stop, int threads, const std::string& kinds) {
    auto has = [&](const char* kind) { return absl::StrContains(kinds, kind); };
    std::vector<std::thread> all;
    hpo::v1::PlanSweepRequest plan;
    plan.set_spec_yaml(
        "name: huge\ncommand: 'true'\nparameters: {x: {type: float, low: 0, high: 1}}\n"
        "objective: {metric: loss, direction: minimize}\nalgorithm: random\n"
        "early_stopping: {name: asha, max_resource: 81}\n"
        "budget: {max_trials: 100000, max_concurrent: 64}\nplan: {steps: 81}\n");
    plan.set_source("huge.yaml");
    plan.set_base_dir(base_dir);
    for (int i = 0; i < threads; ++i) {
      if (has("plans"))
        all.emplace_back([&] {
          while (!stop) {
            absl::StatusOr<hpo::v1::PlanSweepResponse> r = client.Plan(plan);
            (r.ok() ? plans : plans_refused)++;
            if (!r.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        });
      if (has("reads"))
        all.emplace_back([&] {
          hpo::v1::ListTrialsRequest req;
          req.set_sweep_id(sweep_id);
          while (!stop) {
            (void)client.ListTrials(req);
            (void)client.GetSweep(sweep_id);
            reads += 2;
          }
        });
    }
    for (int i = 0; i < (has("watches") ? 40 : 0); ++i) {  // past the cap of 32 per user
      all.emplace_back([&] {
        while (!stop) {
          absl::Status s = client.Watch(
              sweep_id, 0, [&](const hpo::v1::Event&) { return !stop; }, absl::Seconds(2));
          if (absl::IsResourceExhausted(s)) {
            watches_refused++;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          } else {
            watches++;
          }
        }
      });
    }
    for (std::thread& t : all) t.join();
  }
};

int main(int argc, char** argv) {
  // Debian's Abseil checks every Mutex for lock-order cycles; gRPC's locks then cost the load
  // generator CPU that hpod (on the same cores) would use. hpod turns it off as well.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"report_bench: durable report throughput of hpod vs Optuna 3.1"};
  std::string clients_list = "1,16,64";
  std::string rpc_list = "unary,stream";
  double seconds = 10, optuna_seconds = 10;
  bool no_optuna = false, no_durable = false;
  std::string src_dir = HPO_SOURCE_DIR;
  app.add_option("--clients", clients_list, "comma-separated client counts")->capture_default_str();
  app.add_option("--rpc", rpc_list, "which RPCs: unary,stream")->capture_default_str();
  std::string offered_list;
  app.add_option("--offered", offered_list,
                 "open-loop rates (reports/s, comma-separated; empty: none) run at the largest "
                 "client count")
      ->capture_default_str();
  app.add_option("--seconds", seconds, "measured seconds per client count")->capture_default_str();
  app.add_option("--optuna-seconds", optuna_seconds, "seconds for the Optuna run")
      ->capture_default_str();
  app.add_flag("--no-optuna", no_optuna, "skip the Optuna measurement");
  int tick_ms = 50, flush_ms = 50;
  app.add_option("--report-flush-ms", flush_ms, "hpod's report-log flush interval")
      ->capture_default_str();
  app.add_option("--tick-ms", tick_ms, "hpod's scheduling tick")->capture_default_str();
  app.add_flag("--no-durable", no_durable, "run hpod with --no-durable (no fsync per commit)");
  app.add_option("--src", src_dir, "source tree (for bench/optuna_report.py)");
  double soak_seconds = 0, soak_hz = 10;
  int soak_clients = 500;
  app.add_option("--soak-seconds", soak_seconds, "run a soak of this length instead (e.g. 300)");
  app.add_option("--soak-clients", soak_clients, "soak: concurrent trials")->capture_default_str();
  app.add_option("--soak-hz", soak_hz, "soak: reports per second per trial")->capture_default_str();
  double flood_seconds = 0;
  int flood_threads = 4;
  std::string flood_kinds = "plans,reads,watches";
  app.add_option("--flood-kinds", flood_kinds, "flood: which calls")->capture_default_str();
  app.add_option("--flood-seconds", flood_seconds,
                 "measure the soak's trials quiet, then as long again while a viewer floods "
                 "plans, watches and reads (e.g. 30)");
  app.add_option("--flood-threads", flood_threads, "flood: threads per kind of call")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (soak_seconds > 0 || flood_seconds > 0) clients_list = std::to_string(soak_clients);

  std::vector<int> counts;
  for (auto part : absl::StrSplit(clients_list, ','))
    counts.push_back(std::stoi(std::string(part)));
  int max_clients = *std::max_element(counts.begin(), counts.end());
  std::vector<std::string> rpcs = absl::StrSplit(rpc_list, ',');
  std::vector<double> offered;
  for (auto part : absl::StrSplit(offered_list, ',', absl::SkipEmpty()))
    offered.push_back(std::stod(std::string(part)));

  std::vector<std::string> daemon_args = {absl::StrCat("--cpus=", max_clients + 4),
                                          absl::StrCat("--tick-ms=", tick_ms),
                                          absl::StrCat("--report-flush-ms=", flush_ms)};
  if (no_durable) daemon_args.push_back("--no-durable");
  hpo::bench::BenchDaemon hpod;
  if (!hpod.Start("report", daemon_args)) Die(hpod.error());
  const std::string& data = hpod.data();
  hpo::DataDir dir = hpod.dir();
  const Target target{hpod.endpoint(), hpod.tls_ca_pem()};
  pid_t daemon = hpod.pid();
  hpo::client::Client client(dir.socket_target(), *dir.ReadToken());

  // The trials: publish id and token, then wait to be canceled.
  std::string yaml = absl::StrCat(
      "name: report-bench\n",
      "command: 'echo \"$HPO_TRIAL_ID $HPO_TRIAL_TOKEN\" > \"$HPO_TRIAL_DIR/creds.tmp\" && ",
      "mv \"$HPO_TRIAL_DIR/creds.tmp\" \"$HPO_TRIAL_DIR/creds\" && exec sleep 3600'\n",
      "parameters: {x: {type: float, low: 0, high: 1}}\n",
      "objective: {metric: loss, direction: minimize}\n", "budget: {max_trials: ", max_clients,
      ", max_concurrent: ", max_clients, "}\n");
  hpo::v1::SubmitSweepRequest req;
  req.set_spec_yaml(yaml);
  req.set_source("report-bench.yaml");
  req.set_base_dir(data);
  auto sweep = client.Submit(req);
  if (!sweep.ok()) Die(sweep.status().ToString());
  std::vector<Creds> creds;
  for (int n = 0; n < max_clients; ++n) {
    std::string path = dir.trial_dir(sweep->id(), n) + "/creds";
    for (int i = 0; i < 600 && !std::filesystem::exists(path); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::ifstream in(path);
    Creds c;
    if (!(in >> c.trial_id >> c.token)) Die("trial " + std::to_string(n) + " did not start");
    creds.push_back(c);
  }

  std::vector<std::pair<std::string, Result>> results;
  int64_t acknowledged = 0;
  if (flood_seconds > 0) {
    // The same trials, quiet and then flooded by a viewer, side by side.
    Soak quiet =
        RunSoak(target, creds, soak_clients, soak_hz, flood_seconds, daemon, &acknowledged, 0);
    Flood flood;
    std::atomic<bool> stop{false};
    std::thread flooder([&] {
      flood.Run(client, sweep->id(), data, stop, std::max(1, flood_threads), flood_kinds);
    });
    std::this_thread::sleep_for(std::chrono::seconds(2));  // the flood at full strength
    Soak flooded = RunSoak(target, creds, soak_clients, soak_hz, flood_seconds, daemon,
                           &acknowledged, 1'000'000'000);
    stop = true;
    flooder.join();
    (void)client.Cancel(sweep->id());
    std::printf(
        "\nreport latency of %d trials x %.0f Hz, quiet and while one viewer floods hpod (%d "
        "threads each of plans and reads, 40 watches), %.0f s each (durable SQLite, loopback TCP, "
        "%u cores)\n\n",
        soak_clients, soak_hz, flood_threads, flood_seconds, std::thread::hardware_concurrency());
    std::printf(
        "| | reports/s | p50 ms | p99 ms | max ms | errors |\n|---|---:|---:|---:|---:|---:|\n");
    for (const auto& [name, soak] : {std::pair<const char*, const Soak&>{"quiet", quiet},
                                     std::pair<const char*, const Soak&>{"flooded", flooded}}) {
      std::printf("| %s | %.0f | %.2f | %.2f | %.1f | %lld |\n", name, soak.r.rate, soak.r.p50_ms,
                  soak.r.p99_ms, soak.r.max_ms, static_cast<long long>(soak.r.errors));
    }
    double ratio = quiet.r.p99_ms > 0 ? flooded.r.p99_ms / quiet.r.p99_ms : 0;
    std::printf(
        "\nthe flood: %lld plans answered, %lld refused (2 per user at once); %lld watches "
        "opened, %lld refused (32 per user); %lld reads\n",
        static_cast<long long>(flood.plans), static_cast<long long>(flood.plans_refused),
        static_cast<long long>(flood.watches), static_cast<long long>(flood.watches_refused),
        static_cast<long long>(flood.reads));
    std::printf("p99 flooded / quiet: %.2fx (target <= 2x)\n", ratio);
    return ratio <= 2 ? 0 : 1;
  }
  if (soak_seconds > 0) {
    Soak soak = RunSoak(target, creds, soak_clients, soak_hz, soak_seconds, daemon, &acknowledged);
    (void)client.Cancel(sweep->id());
    int64_t stored = CountReports(dir.db_path());
    const Result& r = soak.r;
    std::printf(
        "\nhpod soak: %d trials x %.0f Hz unary reports for %.0f s (durable SQLite, loopback TCP, "
        "%u cores)\n\n",
        soak_clients, soak_hz, r.seconds, std::thread::hardware_concurrency());
    std::printf(
        "| reports acknowledged | reports/s | p50 ms | p90 ms | p99 ms | max ms | errors |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
    std::printf("| %lld | %.0f | %.2f | %.2f | %.2f | %.1f | %lld |\n",
                static_cast<long long>(acknowledged), r.rate, r.p50_ms, r.p90_ms, r.p99_ms,
                r.max_ms, static_cast<long long>(r.errors));
    std::printf("\nhpod RSS (MiB) every 10 s:");
    for (const auto& [t, mib] : soak.rss) std::printf(" %.0f", mib);
    // Warm-up: the first fifth of the run (caches, SQLite's page cache, gRPC's buffers fill up).
    double warm = soak.rss.front().second;
    for (const auto& [t, mib] : soak.rss) {
      if (t <= r.seconds / 5) warm = mib;
    }
    double end = soak.rss.back().second;
    double growth = warm > 0 ? (end - warm) / warm * 100 : 0;
    std::printf(
        "\nRSS after the warm-up (%.0f s): %.1f MiB; at the end: %.1f MiB; growth %.1f%% (target < "
        "10%%)\n",
        r.seconds / 5, warm, end, growth);
    std::printf("reports acknowledged: %lld; rows in the store: %lld -> %s\n",
                static_cast<long long>(acknowledged), static_cast<long long>(stored),
                stored == acknowledged ? "zero lost" : "MISMATCH");
    return stored == acknowledged && growth < 10 ? 0 : 1;
  }
  for (const std::string& rpc : rpcs) {
    for (int k : counts) {
      // Each run's steps continue past the previous run's, so no two reports of a trial share one.
      int64_t first_step = static_cast<int64_t>(results.size()) * 1'000'000'000;
      auto kind = rpc == "unary" ? LoadGenerator::Rpc::kUnary : LoadGenerator::Rpc::kStream;
      results.emplace_back(
          rpc, Measure(target, creds, k, seconds, kind, first_step, 0, daemon, &acknowledged));
    }
    // Open loop at the largest client count: the latency at a given load, not at saturation.
    for (double rate : offered) {
      int64_t first_step = static_cast<int64_t>(results.size()) * 1'000'000'000;
      auto kind = rpc == "unary" ? LoadGenerator::Rpc::kUnary : LoadGenerator::Rpc::kStream;
      results.emplace_back(rpc, Measure(target, creds, max_clients, seconds, kind, first_step, rate,
                                        daemon, &acknowledged));
    }
  }
  (void)client.Cancel(sweep->id());
  int64_t stored = CountReports(dir.db_path());

  // Optuna with as many client processes as hpod had clients, each count on its own, so that
  // every ratio compares the same concurrency.
  struct Peer {
    int clients = 0;
    double rate = 0;
    std::string line;
  };
  std::vector<Peer> optuna;
  if (!no_optuna) {
    for (int k : counts) {
      Peer peer;
      peer.clients = k;
      std::string cmd =
          absl::StrCat("/usr/bin/python3 ", src_dir, "/bench/optuna_report.py --seconds ",
                       optuna_seconds, " --clients ", k);
      FILE* p = ::popen(cmd.c_str(), "r");
      int status = -1;
      if (p != nullptr) {
        char buf[512];
        while (std::fgets(buf, sizeof(buf), p) != nullptr) {
          std::string line(buf);
          if (auto pos = line.find("optuna_reports_per_s="); pos != std::string::npos) {
            peer.rate = std::stod(line.substr(pos + 21));
            peer.line = std::string(absl::StripAsciiWhitespace(line));
          }
        }
        status = ::pclose(p);
      }
      if (status != 0 || peer.rate <= 0) {  // a failed peer run is an error, not a missing row
        std::fprintf(stderr, "report_bench: Optuna's run failed (status %d): %s\n", status,
                     cmd.c_str());
        return 2;
      }
      optuna.push_back(std::move(peer));
    }
  }

  std::printf(
      "\nhpod report throughput (%s SQLite, loopback TCP gRPC, one channel per trial, %u "
      "cores)\n\n",
      no_durable ? "synchronous=NORMAL" : "durable: WAL + synchronous=FULL",
      std::thread::hardware_concurrency());
  std::printf(
      "| RPC | clients | offered/s | reports/s | p50 ms | p90 ms | p99 ms | max ms | errors "
      "| hpod CPU | generator CPU | hpod µs/report |\n");
  std::printf(
      "|-----|--------:|----------:|----------:|-------:|-------:|-------:|-------:|-------:"
      "|---------:|--------------:|---------------:|\n");
  for (const auto& [rpc, r] : results) {
    std::string offered_text =
        r.offered > 0 ? absl::StrCat(static_cast<int64_t>(r.offered)) : "max (closed loop)";
    std::printf(
        "| %s | %7d | %s | %9.0f | %6.2f | %6.2f | %6.2f | %6.1f | %6lld | %8.2f | %13.2f | %14.0f "
        "|\n",
        rpc == "unary" ? "Report (unary)" : "ReportStream", r.clients, offered_text.c_str(), r.rate,
        r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms, static_cast<long long>(r.errors), r.hpod_cores,
        r.generator_cores, r.rate > 0 ? r.hpod_cores * 1e6 / r.rate : 0.0);
  }
  std::printf(
      "\n(CPU in cores over the measured window: hpod's process, and this program's, which is the\n"
      "load generator; both share the machine's %u cores.)\n",
      std::thread::hardware_concurrency());
  std::printf("\nacknowledged reports: %lld; rows in the store: %lld -> %s\n",
              static_cast<long long>(acknowledged), static_cast<long long>(stored),
              stored == acknowledged ? "every acknowledged report is stored" : "MISMATCH");
  if (!optuna.empty()) {
    std::printf(
        "\nOptuna (trial.report + should_prune, SQLite storage, one process per client)\n\n"
        "| Optuna clients | reports/s | run |\n|---:|---:|---|\n");
    for (const Peer& peer : optuna) {
      std::printf("| %d | %.1f | %s |\n", peer.clients, peer.rate, peer.line.c_str());
    }
    std::printf(
        "\n| hpod RPC | clients | hpod / Optuna at the same number of clients |\n"
        "|---|---:|---:|\n");
    for (const auto& [rpc, r] : results) {
      if (r.offered != 0) continue;
      for (const Peer& peer : optuna) {
        if (peer.clients == r.clients) {
          std::printf("| %s | %d | %.0fx |\n", rpc.c_str(), r.clients, r.rate / peer.rate);
        }
      }
    }
  }
  return stored == acknowledged ? 0 : 1;
}
