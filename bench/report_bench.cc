// report_bench: how many durable reports per second a real hpod takes from N concurrent trial
// clients over loopback gRPC, with p50/p99 latency; then checks that every acknowledged report is
// in the SQLite file, and measures Optuna 3.1 doing the equivalent (trial.report +
// should_prune into an SQLite storage) in the same run.
//
// The trials are real: a sweep of N trials whose processes only publish their id and token and
// sleep; this program then reports on their behalf with one gRPC channel per trial, as N
// separate trial processes would.

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
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/client.h"
#include "common/data_dir.h"
#include "common/files.h"
#include "grpcpp/grpcpp.h"
#include "hpo/v1/hpo.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Creds {
  int64_t trial_id;
  std::string token;
};

struct Result {
  int clients = 0;
  double seconds = 0;
  int64_t ok = 0;
  int64_t errors = 0;
  double rate = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
};

// The load generator shares the 2 cores with hpod; its channels use gRPC's lean client stack
// and no bandwidth probing so that as much CPU as possible goes to the server under test.
void LoadGeneratorArgs(grpc::ChannelArguments& args) {
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // its own connection, like a process
  args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
}

// What both kinds of virtual trial share: a connection of its own, its credentials, the next
// report to send, and the tally.
class VirtualTrial {
 public:
  VirtualTrial(const std::string& endpoint, const Creds& creds, int64_t first_step)
      : creds_(creds), step_(first_step) {
    grpc::ChannelArguments args;
    LoadGeneratorArgs(args);
    channel_ = grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
    stub_ = hpo::v1::ReportService::NewStub(channel_);
    channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
  void Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
  }
  const std::vector<double>& latencies_ms() const { return latencies_ms_; }
  int64_t ok() const { return ok_; }
  int64_t errors() const { return errors_; }
  const std::string& last_error() const { return last_error_; }

 protected:
  // Fills req_ with the next report; false once told to stop.
  bool PrepareNext() {
    if (stop_->load()) return false;
    req_.Clear();
    req_.set_trial_id(creds_.trial_id);
    req_.set_step(++step_);
    (*req_.mutable_metrics())["loss"] = 1.0 / static_cast<double>(step_);
    measured_ = measuring_->load();
    sent_ = Clock::now();
    return true;
  }
  void Answered() {
    ++ok_;
    if (measured_) {
      latencies_ms_.push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent_).count());
    }
  }
  void Failed(const grpc::Status& s) {
    ++errors_;
    last_error_ = s.error_message();
  }
  void Done() {
    std::lock_guard lock(mu_);
    done_ = true;
    cv_.notify_all();
  }

  Creds creds_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<hpo::v1::ReportService::Stub> stub_;
  hpo::v1::ReportRequest req_;
  hpo::v1::ReportResponse resp_;
  std::atomic<bool>* stop_ = nullptr;
  std::atomic<bool>* measuring_ = nullptr;

 private:
  int64_t step_;
  bool measured_ = false;
  Clock::time_point sent_;
  int64_t ok_ = 0, errors_ = 0;
  std::string last_error_;
  std::vector<double> latencies_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

// A virtual trial on unary Report: one call in flight until told to stop.
class ReportLoop final : public VirtualTrial {
 public:
  ReportLoop(const std::string& endpoint, const Creds& creds) : VirtualTrial(endpoint, creds, 0) {}
  void Start(std::atomic<bool>* stop, std::atomic<bool>* measuring) {
    stop_ = stop;
    measuring_ = measuring;
    Next();
  }

 private:
  void Next() {
    if (!PrepareNext()) {
      Done();
      return;
    }
    ctx_ = std::make_unique<grpc::ClientContext>();
    ctx_->AddMetadata("authorization", "Bearer " + creds_.token);
    stub_->async()->Report(ctx_.get(), &req_, &resp_, [this](grpc::Status s) {
      if (s.ok()) Answered();
      else Failed(s);
      Next();
    });
  }
  std::unique_ptr<grpc::ClientContext> ctx_;
};

double Percentile(std::vector<double>& v, double p);

// A virtual trial on ReportStream: one stream, one report in flight at a time.
class StreamLoop final : public VirtualTrial,
                         public grpc::ClientBidiReactor<hpo::v1::ReportRequest, hpo::v1::ReportResponse> {
 public:
  // Steps far from the unary run's, which used the same trials.
  StreamLoop(const std::string& endpoint, const Creds& creds) : VirtualTrial(endpoint, creds, 1'000'000'000) {}
  void Start(std::atomic<bool>* stop, std::atomic<bool>* measuring) {
    stop_ = stop;
    measuring_ = measuring;
    ctx_.AddMetadata("authorization", "Bearer " + creds_.token);
    stub_->async()->ReportStream(&ctx_, this);
    StartCall();
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (ok) StartRead(&resp_);  // else OnDone follows with the status
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    Answered();
    Next();
  }
  void OnDone(const grpc::Status& s) override {
    if (!s.ok()) Failed(s);
    Done();
  }

 private:
  void Next() {
    if (!PrepareNext()) {
      StartWritesDone();
      return;
    }
    StartWrite(&req_);
  }
  grpc::ClientContext ctx_;
};

// Runs `k` loops of type L for `seconds` after a 1 s warm-up.
template <typename L>
Result Measure(const std::string& endpoint, const std::vector<Creds>& creds, int k, double seconds,
               int64_t* acknowledged) {
  std::vector<std::unique_ptr<L>> loops;
  for (int i = 0; i < k; ++i) loops.push_back(std::make_unique<L>(endpoint, creds[static_cast<size_t>(i)]));
  std::atomic<bool> stop{false}, measuring{false};
  for (auto& l : loops) l->Start(&stop, &measuring);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // warm-up
  measuring = true;
  auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  measuring = false;
  double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  stop = true;
  for (auto& l : loops) l->Wait();
  Result r;
  r.clients = k;
  r.seconds = elapsed;
  std::vector<double> all;
  for (auto& l : loops) {
    all.insert(all.end(), l->latencies_ms().begin(), l->latencies_ms().end());
    *acknowledged += l->ok();
    r.errors += l->errors();
    if (l->errors() > 0) std::fprintf(stderr, "error: %s\n", l->last_error().c_str());
  }
  r.ok = static_cast<int64_t>(all.size());
  r.rate = static_cast<double>(r.ok) / elapsed;
  r.p50_ms = Percentile(all, 0.50);
  r.p90_ms = Percentile(all, 0.90);
  r.p99_ms = Percentile(all, 0.99);
  r.max_ms = all.empty() ? 0 : *std::max_element(all.begin(), all.end());
  return r;
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
  if (sqlite3_prepare_v2(db, "SELECT (SELECT COUNT(*) FROM reports) + (SELECT COUNT(*) FROM report_log)", -1, &st, nullptr) == SQLITE_OK &&
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

int main(int argc, char** argv) {
  CLI::App app{"report_bench: durable report throughput of hpod vs Optuna 3.1"};
  std::string clients_list = "1,16,64";
  std::string rpc_list = "unary,stream";
  double seconds = 10, optuna_seconds = 10;
  bool no_optuna = false, no_durable = false;
  std::string src_dir = HPO_SOURCE_DIR;
  app.add_option("--clients", clients_list, "comma-separated client counts")->capture_default_str();
  app.add_option("--rpc", rpc_list, "which RPCs: unary,stream")->capture_default_str();
  app.add_option("--seconds", seconds, "measured seconds per client count")->capture_default_str();
  app.add_option("--optuna-seconds", optuna_seconds, "seconds for the Optuna run")->capture_default_str();
  app.add_flag("--no-optuna", no_optuna, "skip the Optuna measurement");
  int tick_ms = 50, flush_ms = 50;
  app.add_option("--report-flush-ms", flush_ms, "hpod's report-log flush interval")->capture_default_str();
  app.add_option("--tick-ms", tick_ms, "hpod's scheduling tick")->capture_default_str();
  app.add_flag("--no-durable", no_durable, "run hpod with --no-durable (no fsync per commit)");
  app.add_option("--src", src_dir, "source tree (for bench/optuna_report.py)");
  CLI11_PARSE(app, argc, argv);

  std::vector<int> counts;
  for (auto part : absl::StrSplit(clients_list, ',')) counts.push_back(std::stoi(std::string(part)));
  int max_clients = *std::max_element(counts.begin(), counts.end());
  std::vector<std::string> rpcs = absl::StrSplit(rpc_list, ',');

  std::string data = std::filesystem::temp_directory_path() / ("hpo-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(data);
  ::setenv("HPO_DATA_DIR", data.c_str(), 1);
  hpo::DataDir dir(data);
  std::string hpod = (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "hpod").string();
  std::vector<std::string> daemon_args = {hpod, "--data-dir=" + data, "--log-file=" + data + "/hpod.log",
                                          absl::StrCat("--cpus=", max_clients + 4),
                                          absl::StrCat("--tick-ms=", tick_ms),
                                          absl::StrCat("--report-flush-ms=", flush_ms)};
  if (no_durable) daemon_args.push_back("--no-durable");
  pid_t daemon = ::fork();
  if (daemon == 0) {
    std::vector<char*> av;
    for (auto& a : daemon_args) av.push_back(a.data());
    av.push_back(nullptr);
    execv(av[0], av.data());
    ::_exit(127);
  }
  for (int i = 0; i < 200 && !std::filesystem::exists(dir.endpoint_path()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto endpoint_text = hpo::ReadFile(dir.endpoint_path());
  if (!endpoint_text.ok()) Die("hpod did not start; see " + data + "/hpod.log");
  std::string endpoint(absl::StripAsciiWhitespace(*endpoint_text));
  hpo::client::Client client(dir.socket_target(), *dir.ReadToken());

  // The trials: publish id and token, then wait to be canceled.
  std::string yaml = absl::StrCat(
      "name: report-bench\n",
      "command: 'echo \"$HPO_TRIAL_ID $HPO_TRIAL_TOKEN\" > \"$HPO_TRIAL_DIR/creds.tmp\" && ",
      "mv \"$HPO_TRIAL_DIR/creds.tmp\" \"$HPO_TRIAL_DIR/creds\" && exec sleep 3600'\n",
      "parameters: {x: {type: float, low: 0, high: 1}}\n",
      "objective: {metric: loss, direction: minimize}\n",
      "budget: {max_trials: ", max_clients, ", max_concurrent: ", max_clients, "}\n");
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
  for (const std::string& rpc : rpcs) {
    for (int k : counts) {
      if (rpc == "unary") results.emplace_back(rpc, Measure<ReportLoop>(endpoint, creds, k, seconds, &acknowledged));
      else results.emplace_back(rpc, Measure<StreamLoop>(endpoint, creds, k, seconds, &acknowledged));
    }
  }
  (void)client.Cancel(sweep->id());
  int64_t stored = CountReports(dir.db_path());

  double optuna_rate = 0;
  std::string optuna_line = "skipped";
  if (!no_optuna) {
    std::string cmd = absl::StrCat("/usr/bin/python3 ", src_dir, "/bench/optuna_report.py --seconds ", optuna_seconds);
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[512];
      while (std::fgets(buf, sizeof(buf), p) != nullptr) {
        std::string line(buf);
        if (auto pos = line.find("optuna_reports_per_s="); pos != std::string::npos) {
          optuna_rate = std::stod(line.substr(pos + 21));
          optuna_line = std::string(absl::StripAsciiWhitespace(line));
        }
      }
      ::pclose(p);
    }
  }

  std::printf("\nhpod report throughput (%s SQLite, loopback TCP gRPC, one channel per trial, %u cores)\n\n",
              no_durable ? "synchronous=NORMAL" : "durable: WAL + synchronous=FULL",
              std::thread::hardware_concurrency());
  std::printf("| RPC | clients | reports/s | p50 ms | p90 ms | p99 ms | max ms | errors |\n");
  std::printf("|-----|--------:|----------:|-------:|-------:|-------:|-------:|-------:|\n");
  for (const auto& [rpc, r] : results) {
    std::printf("| %s | %7d | %9.0f | %6.2f | %6.2f | %6.2f | %6.1f | %6lld |\n",
                rpc == "unary" ? "Report (unary)" : "ReportStream", r.clients, r.rate, r.p50_ms,
                r.p90_ms, r.p99_ms, r.max_ms, static_cast<long long>(r.errors));
  }
  std::printf("\nacknowledged reports: %lld; rows in the store: %lld -> %s\n",
              static_cast<long long>(acknowledged), static_cast<long long>(stored),
              stored == acknowledged ? "every acknowledged report is stored" : "MISMATCH");
  if (!no_optuna) {
    std::printf("\nOptuna (report + should_prune, SQLite storage, 1 client): %.1f reports/s  [%s]\n",
                optuna_rate, optuna_line.c_str());
    for (const auto& [rpc, r] : results) {
      if (optuna_rate > 0) {
        std::printf("hpod %s at %d clients / Optuna: %.0fx\n", rpc.c_str(), r.clients, r.rate / optuna_rate);
      }
    }
  }
  ::kill(daemon, SIGTERM);
  int status = 0;
  ::waitpid(daemon, &status, 0);
  std::filesystem::remove_all(data);
  return stored == acknowledged ? 0 : 1;
}
