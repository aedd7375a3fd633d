// hpod: the hyperparameter optimization daemon. See docs/ and `hpod --help`.
//
// main: the flags, the data directory (one daemon per directory), the store, the backend, the
// controller and the gRPC endpoints, then waits for a signal: SIGTERM, SIGINT or SIGHUP stop
// it (running trials end LOST and are retried at the next start); SIGUSR1 stops it and leaves
// the trials running for the next start to re-adopt (`hpo daemon stop --keep-trials`).

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/address.h"
#include "common/clock.h"
#include "common/daemon_lock.h"
#include "common/data_dir.h"
#include "common/duration.h"
#include "common/file_system.h"
#include "common/files.h"
#include "common/layout.h"
#include "common/run_command.h"
#include "common/version.h"
#include "hpo/v1/states.h"
#include "server/api/hpo_service.h"
#include "server/core/controller.h"
#include "server/core/trial_files.h"
#include "server/hpod/endpoints.h"
#include "server/hpod/hpod_flags.h"
#include "server/hpod/json_log.h"
#include "server/hpod/open_backend.h"
#include "server/store/sqlite_store.h"
#include "server/web/dashboard.h"
#include "spdlog/sinks/basic_file_sink.h"
#include "spdlog/spdlog.h"
#ifdef HPO_WITH_SLURM
#include "slurm_backend/agent_hub.h"
#endif

namespace {

int Fail(const std::string& msg) {
  spdlog::error("{}", msg);
  std::fprintf(stderr, "hpod: %s\n", msg.c_str());
  return 1;
}

// The signals that stop hpod, blocked before any thread starts so that sigwait takes them.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return signals;
}

void WriteOrWarn(const std::string& path, const std::string& text) {
  if (absl::Status s = hpo::WriteFileAtomic(path, text, 0600); !s.ok()) {
    spdlog::warn("cannot write {}: {}", path, s.ToString());
  }
}

// The Slurm job hpod runs as (`hpo daemon start --as-job`: hpod is its batch script, which
// `hpo daemon stop` signals through scancel), or "". Configured as a job (`as_job`), hpod is
// the job of its SLURM_JOB_ID however it was started (sbatch execs it; a scrontab line runs it
// under a shell). Otherwise only as the batch step itself: hpod merely started from a shell
// inside an allocation (its parent not slurmstepd) is not that job's.
std::string DaemonJob(bool as_job) {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (job == nullptr || *job == '\0') return "";
  if (as_job) return job;
  absl::StatusOr<std::string> parent = hpo::ReadFile(absl::StrCat("/proc/", ::getppid(), "/comm"));
  if (!parent.ok() || !absl::StartsWith(*parent, "slurmstepd")) return "";
  return job;
}

// How long Slurm job `job` has left (squeue's %L: "M:SS", "H:MM:SS" or "D-HH:MM:SS"); nullopt
// when squeue does not say (no limit, or no answer).
std::optional<absl::Duration> JobTimeLeft(const std::string& job) {
  auto [rc, said] = hpo::RunCommand({"squeue", "--noheader", "--jobs=" + job, "--format=%L"});
  std::string text(absl::StripAsciiWhitespace(said));
  if (rc != 0 || text.empty()) return std::nullopt;
  int64_t seconds = 0;
  if (size_t dash = text.find('-'); dash != std::string::npos) {
    if (!absl::SimpleAtoi(text.substr(0, dash), &seconds)) return std::nullopt;
    seconds *= 24;  // hours, then minutes and seconds below
    text = text.substr(dash + 1);
  }
  for (absl::string_view part : absl::StrSplit(text, ':')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v)) return std::nullopt;
    seconds = seconds * 60 + v;
  }
  return absl::Seconds(seconds);
}

// A SIGTERM this close to the job's time limit is the limit's (the job script asks for it 120 s
// before; slurmctld sends it within a minute or so of that).
constexpr absl::Duration kHandOverWithin = absl::Minutes(5);

// hpod run as a job (--as-job), told to stop near its time limit: the next job is queued now,
// with the same sbatch options and --dependency=singleton, so that it starts as soon as this one
// ended and takes the trials back. A SIGTERM with more time left (scancel, a drain) hands over
// nothing: whoever stopped hpod starts the next one (or the scrontab line does).
void HandOver(const std::string& sbatch_options, const std::string& job,
              const std::string& script) {
  std::optional<absl::Duration> left = JobTimeLeft(job);
  if (!left || *left > kHandOverWithin) {
    spdlog::info("Slurm job {} is not near its time limit: no next job is queued", job);
    return;
  }
  std::vector<std::string> argv = {"sbatch", "--parsable", "--dependency=singleton"};
  for (absl::string_view o : absl::StrSplit(sbatch_options, ' ', absl::SkipWhitespace())) {
    argv.emplace_back(o);
  }
  argv.push_back(script);
  auto [rc, said] = hpo::RunCommand(argv);
  std::string answer(absl::StripAsciiWhitespace(said));
  if (rc == 0) {
    spdlog::info("Slurm job {} ends in {}: handed over to job {}, which starts once this one ended",
                 job, absl::FormatDuration(*left), answer);
  } else {
    spdlog::error("Slurm job {} ends in {}, and sbatch refused the next job: {}", job,
                  absl::FormatDuration(*left), answer);
  }
}

// Whether the store holds sweeps on Slurm that have not ended (their trials must wait for
// slurmctld rather than be lost while it is away).
bool SlurmSweepsUnfinished(hpo::server::Store& store) {
  auto sweeps = store.LoadSweeps();
  if (!sweeps.ok()) return false;
  for (const auto& s : *sweeps) {
    if (s.backend == "slurm" && !hpo::v1::IsFinal(s.state)) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  hpo::server::HpodFlags flags;
  if (int rc = hpo::server::ParseHpodFlags(argc, argv, flags); rc >= 0) return rc;
  // Private files whatever the caller's umask: the store, the trial directories, their logs and
  // what the trials write (they inherit it).
  const unsigned umask_bits =
      flags.share_group ? hpo::layout::kGroupUmask : hpo::layout::kPrivateUmask;
  ::umask(umask_bits);
  // gRPC's absl::Mutex would otherwise track lock graphs for deadlock detection on every lock.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (!flags.log_file.empty()) {
    spdlog::set_default_logger(spdlog::basic_logger_mt("hpod", flags.log_file));
    // What hpod says at info and above is on disk at once: a kill -9 loses none of it (those
    // lines are few: starts, recoveries, sweeps and trials ending early); debug lines go within
    // a second.
    spdlog::flush_every(std::chrono::seconds(1));
    spdlog::flush_on(spdlog::level::info);
  }
  if (flags.log_format == "json") {
    spdlog::set_formatter(std::make_unique<hpo::server::JsonLogFormatter>());
  }
  spdlog::set_level(spdlog::level::from_str(flags.log_level));

  hpo::DataDir data_dir = flags.data_dir.empty() ? hpo::DataDir::FromEnvironment()
                                                 : hpo::DataDir(hpo::AbsolutePath(flags.data_dir));
  if (!flags.sweeps_dir.empty()) data_dir.set_sweeps_root(hpo::AbsolutePath(flags.sweeps_dir));
  if (absl::Status s = data_dir.Create(); !s.ok()) return Fail(s.ToString());
  if (data_dir.socket_path().size() >= 100) {
    return Fail(absl::StrCat("the socket path ", data_dir.socket_path(),
                             " is too long for a Unix socket (max ~100 bytes); use a shorter "
                             "HPO_DATA_DIR"));
  }
  // One daemon per data directory, also across hosts that share it; held until hpod exits,
  // after the store closed.
  hpo::DaemonLock::Options lock_options;
  lock_options.stale = *hpo::ParseDuration(flags.lock_stale);  // checked
  // Several beats within the stale time, so that a live holder is never taken for a gone one.
  lock_options.beat = std::min(hpo::DaemonLock::kBeat, lock_options.stale / 4);
  const std::string job = DaemonJob(!flags.as_job.empty());
  auto lock = hpo::DaemonLock::Acquire(data_dir.lock_path(), hpo::HostName(), job, lock_options);
  if (!lock.ok()) return Fail(std::string(lock.status().message()));
  // Another hpod took the data directory (this one was frozen, or cut off, past --lock-stale):
  // nothing more of this one's is written, the store's commits included (their fence, below);
  // its trials go on, for that hpod.
  (*lock)->OnLost([root = data_dir.root()](const std::optional<hpo::LockHolder>& now) {
    std::string who = now ? absl::StrCat("hpod on ", now->host, " (pid ", now->pid, ")")
                          : std::string("nobody (its lock file is gone)");
    spdlog::critical(
        "this hpod no longer holds {}: its lock file names {}; it stops at once and "
        "writes nothing more",
        root, who);
    spdlog::default_logger()->flush();
    std::fprintf(stderr, "hpod: this hpod no longer holds %s (its lock file names %s); stopped\n",
                 root.c_str(), who.c_str());
    std::_Exit(75);
  });
  // The options this start keeps for the next ones (hpod_flags.h), once it holds the directory.
  if (!flags.config_text.empty()) {
    if (absl::Status s = hpo::WriteFileAtomic(flags.config_path, flags.config_text, 0600);
        !s.ok()) {
      return Fail(absl::StrCat("cannot keep hpod's options: ", s.message()));
    }
    spdlog::info("hpod's options kept in {} for every later start", flags.config_path);
  }
  if (const auto& gone = (*lock)->replaced()) {
    spdlog::warn(
        "the data directory was held by hpod on {} (pid {}{}{}), silent since {}: taken over",
        gone->host, gone->pid, gone->job.empty() ? "" : ", Slurm job ", gone->job,
        absl::FormatTime(gone->seen));
  }
  // Last out: what goes after it (the backend releasing its allocations) still logs.
  struct LogsLast {
    bool started = false;
    ~LogsLast() {
      if (started) spdlog::info("hpod stopped");
      spdlog::shutdown();
    }
  } logs_last;
  auto token = data_dir.ReadOrCreateToken();
  if (!token.ok()) return Fail(token.status().ToString());

  hpo::server::SqliteStore::Options store_options;
  store_options.durable = !flags.no_durable;
  store_options.report_flush_interval = absl::Milliseconds(flags.report_flush_ms);
  store_options.fence = [held = lock->get()] { return held->StillHeld(); };
  // SQLite's shared-memory WAL index does not work across hosts: on a network file system the
  // store is held by this one connection.
  std::string network_fs = hpo::NetworkFileSystem(data_dir.root());
  store_options.exclusive =
      flags.store_mode == "exclusive" || (flags.store_mode == "auto" && !network_fs.empty());
  auto store = hpo::server::SqliteStore::Open(data_dir.db_path(), store_options);
  // The store (trial tokens are in it) is the owner's alone, and the trial directories' root the
  // owner's (or the group's), also where an older hpod or a looser umask made them readable.
  // SQLite makes the WAL and its index with the store's own mode.
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::string path = data_dir.db_path() + suffix;
    if (::access(path.c_str(), F_OK) == 0) ::chmod(path.c_str(), 0600);
  }
  (void)hpo::MakeDirs(data_dir.sweeps_root(), 0750);
  ::chmod(data_dir.sweeps_root().c_str(), 0777 & ~umask_bits);
  if (store.ok() && store_options.exclusive) {
    spdlog::info("the store is held by this hpod alone (WAL without shared memory){}",
                 network_fs.empty() ? "" : absl::StrCat(": its directory is on ", network_fs));
  }
  if (!store.ok()) return Fail(store.status().ToString());

  sigset_t signals = BlockStopSignals();

  // TLS of the TCP address: a site's certificate, else one of hpod's own CA (made at the first
  // start), unless --insecure-listen.
  absl::StatusOr<hpo::server::ServerTls> tls = hpo::server::LoadServerTls(flags, data_dir);
  if (!tls.ok()) return Fail(std::string(tls.status().message()));

  // Every trial runs under hpo-shim (installed next to hpod), so that it outlives a crash of
  // this daemon and the next start re-adopts it.
  std::string shim = hpo::ExecutableDir() + "/hpo-shim";
  if (::access(shim.c_str(), X_OK) != 0) {
    return Fail(absl::StrCat("cannot find ", shim, " (installed with hpod)"));
  }
  // Where the hpo-agents of Slurm allocations call: it outlives the backend, and answers its
  // held calls before the server stops.
#ifdef HPO_WITH_SLURM
  auto agents =
      std::make_unique<hpo::slurm::AgentHub>(data_dir.agents_dir(), hpo::SystemClock::Get());
  hpo::slurm::AgentHub* agent_hub = agents.get();
#else
  hpo::slurm::AgentHub* agent_hub = nullptr;
#endif
  auto backend = hpo::server::OpenBackends(flags, data_dir, tls->ca_pem, shim,
                                           SlurmSweepsUnfinished(**store), agent_hub);
  if (!backend.ok()) return Fail(std::string(backend.status().message()));

  hpo::server::ThreadedTrialFiles files;
  hpo::server::Controller::Options options;
  options.data_dir = data_dir;
  options.hpo_bin_dir = hpo::ExecutableDir();
  options.tick = absl::Milliseconds(flags.tick_ms);
  options.tls_ca_pem = tls->ca_pem;
  options.umask = umask_bits;
  options.suggest_thread = true;  // a slow proposal never holds a report back
  hpo::server::Metrics metrics;   // /metrics: what the controller and the services measure
  options.telemetry = &metrics;
  hpo::server::Controller controller(options, **store, **backend, files, hpo::SystemClock::Get());
  // Who may call: one table for every front door (gRPC, the dashboard, /metrics).
  hpo::server::TokenTable tokens(hpo::server::ProcessUserName(), *token, data_dir.users_dir(),
                                 hpo::SystemClock::Get(), data_dir.token_path());
  hpo::server::HpoServiceImpl hpo_service(controller, files, tokens);
  hpo::server::ReportServiceImpl report_service(controller);
  // The dashboard starts once the controller runs; `hpo dashboard` asks for its login link.
  std::unique_ptr<hpo::server::Dashboard> dashboard;
  std::atomic<hpo::server::Dashboard*> serving{nullptr};
  if (flags.dashboard != "none") {
    hpo_service.set_dashboard_login([&serving](const hpo::server::Caller& caller) {
      hpo::server::Dashboard* d = serving.load();
      return d != nullptr ? d->IssueLogin(caller) : std::string();
    });
  }
  std::vector<grpc::Service*> services = {&hpo_service, &report_service};
#ifdef HPO_WITH_SLURM
  services.push_back(agents.get());
#endif
  auto endpoints = hpo::server::StartEndpoints(flags, *tls, data_dir, services);
  if (!endpoints.ok()) return Fail(std::string(endpoints.status().message()));
  controller.set_report_endpoint(endpoints->endpoint);
#ifdef HPO_WITH_SLURM
  agents->SetEndpoint(endpoints->endpoint);
#endif
  if (absl::Status s = controller.Recover(); !s.ok()) return Fail(s.ToString());
  controller.Start();
  if (flags.dashboard != "none") {
    hpo::server::Dashboard::Options dashboard_options;
    // HTTPS with a site's certificate, and off loopback with hpod's own (a browser is not asked
    // to trust hpod's CA for a page it reaches through `ssh -L`).
    if (!tls->clear_text && (!tls->own || !hpo::IsLoopback(flags.dashboard))) {
      dashboard_options.tls_cert = tls->cert_path;
      dashboard_options.tls_key = tls->key_path;
    }
    dashboard_options.session_idle = *hpo::ParseDuration(flags.dashboard_idle);  // checked
    auto opened = hpo::server::Dashboard::Open(flags.dashboard, dashboard_options, data_dir,
                                               controller, files, tokens, metrics);
    if (!opened.ok()) return Fail(std::string(opened.status().message()));
    dashboard = std::move(*opened);
    serving = dashboard.get();
  }
  // What a client that finds hpod by this directory (from another host) needs besides the token:
  // where it listens, and the CA to trust there.
  if (!tls->clear_text) {
    WriteOrWarn(data_dir.tls_ca_path(), tls->ca_pem);
  } else {
    ::unlink(data_dir.tls_ca_path().c_str());
  }
  WriteOrWarn(data_dir.endpoint_path(), endpoints->endpoint + "\n");
  WriteOrWarn(data_dir.pid_path(), absl::StrCat(::getpid(), "\n"));
  spdlog::info("hpod {} ready: {} and {}; {}; dashboard {}; data in {}", hpo::kVersion,
               data_dir.socket_path(), endpoints->endpoint, (*backend)->Describe(),
               dashboard ? dashboard->url() : "none", data_dir.root());

  int sig = 0;
  sigwait(&signals, &sig);
  bool keep_trials = sig == SIGUSR1 || (sig == SIGTERM && flags.keep_trials_on_term);
  spdlog::info("signal {}: shutting down{}", sig,
               keep_trials ? ", leaving the trials running" : "");
  if (sig == SIGTERM && keep_trials && !flags.as_job.empty() && !job.empty()) {
    HandOver(flags.as_job, job, data_dir.daemon_job_script_path());
  }
  endpoints->unix_listener.reset();  // no new local connections
#ifdef HPO_WITH_SLURM
  agents->Close();
#endif
  endpoints->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  serving = nullptr;
  if (dashboard) dashboard->Stop();
  ::unlink(data_dir.dashboard_path().c_str());
  controller.Shutdown(keep_trials);
  ::unlink(data_dir.endpoint_path().c_str());
  ::unlink(data_dir.pid_path().c_str());
  logs_last.started = true;
  return 0;
}
