// hpod: the hyperparameter optimization daemon. See docs/ and `hpod --help`.

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "absl/strings/str_format.h"
#include "common/data_dir.h"
#include "common/files.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/controller.h"
#include "server/hpo_service.h"
#include "server/sqlite_store.h"
#include "server/unix_listener.h"
#include "slurm_backend/local_backend.h"
#include "slurm_backend/slurm_backend.h"
#include "spdlog/sinks/basic_file_sink.h"
#include "spdlog/spdlog.h"

namespace {

std::string SelfDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

int Fail(const std::string& msg) {
  spdlog::error("{}", msg);
  std::fprintf(stderr, "hpod: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hpod: hyperparameter optimization daemon (local process backend)"};
  std::string data_dir_flag;
  std::string listen = "127.0.0.1:0";
  int gpus = -1, cpus = 0, tick_ms = 50;
  std::string log_file, log_level = "info";
  bool no_durable = false;
  std::string backend_name = "local", slurm_conf;
  app.add_option("--data-dir", data_dir_flag, "data directory (default $HPO_DATA_DIR or ~/.hpo)");
  std::string sweeps_dir_flag;
  app.add_option("--sweeps-dir", sweeps_dir_flag,
                 "where sweep and trial directories (logs, checkpoints) go; default DATA_DIR/sweeps. "
                 "On a cluster: a file system the compute nodes see, with the database kept local");
  app.add_option("--listen", listen,
                 "TCP address for trials and remote clients (host:port; port 0 picks one; "
                 "'none' for the Unix socket only)")->capture_default_str();
  app.add_option("--gpus", gpus, "GPUs to hand out (default: as many as `nvidia-smi -L` lists)");
  app.add_option("--cpus", cpus, "CPU slots to hand out (default: online CPUs)");
  app.add_option("--tick-ms", tick_ms, "scheduling tick in milliseconds")->capture_default_str();
  int flush_ms = 50;
  app.add_option("--report-flush-ms", flush_ms,
                 "how often staged reports move to their indexed table")->capture_default_str();
  app.add_option("--log-file", log_file, "log to this file instead of stderr");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_option("--backend", backend_name, "where trials run: local or slurm")
      ->check(CLI::IsMember({"local", "slurm"}))->capture_default_str();
  app.add_option("--slurm-conf", slurm_conf, "slurm.conf for the slurm backend (default $SLURM_CONF)");
  std::string tls_cert, tls_key, tls_ca;
  app.add_option("--tls-cert", tls_cert, "PEM certificate (chain): the TCP address serves TLS only")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", tls_key, "PEM private key of --tls-cert")->check(CLI::ExistingFile);
  app.add_option("--tls-ca", tls_ca,
                 "PEM CA that trials (HPO_TLS_CA) and remote clients trust; default: --tls-cert itself")
      ->check(CLI::ExistingFile);
  app.add_flag("--no-durable", no_durable,
               "commit without fsync (faster; a power loss may lose the last moments)");
  CLI11_PARSE(app, argc, argv);
  // gRPC's absl::Mutex would otherwise track lock graphs for deadlock detection on every lock.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  if (!log_file.empty()) {
    spdlog::set_default_logger(spdlog::basic_logger_mt("hpod", log_file));
    spdlog::flush_every(std::chrono::seconds(1));
  }
  spdlog::set_level(spdlog::level::from_str(log_level));

  hpo::DataDir data_dir = data_dir_flag.empty() ? hpo::DataDir::FromEnvironment()
                                                : hpo::DataDir(hpo::AbsolutePath(data_dir_flag));
  if (!sweeps_dir_flag.empty()) data_dir.set_sweeps_root(hpo::AbsolutePath(sweeps_dir_flag));
  if (absl::Status s = data_dir.Create(); !s.ok()) return Fail(s.ToString());
  if (data_dir.socket_path().size() >= 100) {
    return Fail(absl::StrCat("the socket path ", data_dir.socket_path(),
                             " is too long for a Unix socket (max ~100 bytes); use a shorter "
                             "HPO_DATA_DIR"));
  }
  // One daemon per data directory.
  std::string lock_path = data_dir.root() + "/hpod.lock";
  int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    return Fail(absl::StrCat("cannot open ", lock_path, ": ", std::strerror(errno),
                             " (hpod needs a writable data directory)"));
  }
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return Fail(absl::StrCat("another hpod already runs for ", data_dir.root()));
  }
  auto token = data_dir.ReadOrCreateToken();
  if (!token.ok()) return Fail(token.status().ToString());

  hpo::server::SqliteStore::Options store_options;
  store_options.durable = !no_durable;
  auto store = hpo::server::SqliteStore::Open(data_dir.db_path(), store_options);
  if (!store.ok()) return Fail(store.status().ToString());

  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGUSR1);  // stop, leaving the trials running (hpo daemon stop --keep-trials)
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  // Every trial runs under hpo-shim (installed next to hpod), so that it outlives a crash of
  // this daemon and the next start re-adopts it.
  std::string shim = SelfDir() + "/hpo-shim";
  if (::access(shim.c_str(), X_OK) != 0) return Fail(absl::StrCat("cannot find ", shim, " (installed with hpod)"));
  std::unique_ptr<hpo::backend::Backend> backend_ptr;
  if (backend_name == "slurm") {
    hpo::backend::SlurmBackend::Options slurm_options;
    slurm_options.shim = shim;
    // Allocation names carry the data directory's hash: a restarted daemon finds its own.
    slurm_options.instance = absl::StrFormat("%08x", static_cast<uint32_t>(std::hash<std::string>()(data_dir.root())));
    backend_ptr = std::make_unique<hpo::backend::SlurmBackend>(hpo::backend::MakeLibSlurm(slurm_conf),
                                                               hpo::SystemClock::Get(), slurm_options);
  } else {
    hpo::backend::LocalBackend::Options backend_options;
    backend_options.gpus = gpus;
    backend_options.cpus = cpus;
    backend_options.shim = shim;
    backend_ptr = std::make_unique<hpo::backend::LocalBackend>(backend_options, hpo::SystemClock::Get());
  }
  hpo::backend::Backend& backend = *backend_ptr;

  hpo::server::Controller::Options options;
  options.data_dir = data_dir;
  options.hpo_bin_dir = SelfDir();
  options.tick = absl::Milliseconds(tick_ms);
  options.report_flush_interval = absl::Milliseconds(flush_ms);
  if (tls_cert.empty() != tls_key.empty()) return Fail("--tls-cert and --tls-key go together");
  std::shared_ptr<grpc::ServerCredentials> tcp_credentials = grpc::InsecureServerCredentials();
  if (!tls_cert.empty()) {
    absl::StatusOr<std::string> cert = hpo::ReadFile(tls_cert), key = hpo::ReadFile(tls_key);
    if (!cert.ok() || !key.ok()) return Fail(absl::StrCat("cannot read ", tls_cert, " or ", tls_key));
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({*key, *cert});
    tcp_credentials = grpc::SslServerCredentials(tls);
    options.tls_ca = hpo::AbsolutePath(tls_ca.empty() ? tls_cert : tls_ca);
  }
  hpo::server::Controller controller(options, **store, backend, hpo::SystemClock::Get());

  hpo::server::HpoServiceImpl hpo_service(controller, *token, data_dir.users_dir());
  hpo::server::ReportServiceImpl report_service(controller);
  // Trials report to the TCP address in their HPO_ENDPOINT, also after this daemon restarts: a
  // port picked by the system (port 0) is remembered and asked for again at the next start.
  std::string port_path = data_dir.root() + "/tcp_port";
  std::string listen_now = listen;
  if (listen != "none" && absl::EndsWith(listen, ":0")) {
    int saved = 0;
    absl::StatusOr<std::string> text = hpo::ReadFile(port_path);
    if (text.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &saved) && saved > 0 && saved < 65536) {
      listen_now = absl::StrCat(listen.substr(0, listen.size() - 1), saved);
    }
  }
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> unix_acceptor;
  int tcp_port = 0;
  auto build = [&](const std::string& address) {
    grpc::ServerBuilder builder;
    hpo::server::ConfigureServerBuilder(builder);
    // The Unix socket's connections come from our own listener, which checks peer credentials.
    unix_acceptor = builder.experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
        grpc::InsecureServerCredentials());
    tcp_port = 0;
    if (address != "none") builder.AddListeningPort(address, tcp_credentials, &tcp_port);
    builder.RegisterService(&hpo_service);
    builder.RegisterService(&report_service);
    server = builder.BuildAndStart();
    return server != nullptr && (address == "none" || tcp_port != 0);
  };
  if (!build(listen_now)) {
    if (listen_now == listen || !build(listen)) {
      return Fail(absl::StrCat("cannot listen on ", data_dir.socket_path(), " and ", listen));
    }
    spdlog::warn("the port of the last run ({}) is taken; trials it left running cannot report "
                 "until they are restarted", listen_now);
  }
  if (tcp_port != 0) (void)hpo::WriteFileAtomic(port_path, absl::StrCat(tcp_port, "\n"), 0600);
  auto unix_listener = hpo::server::UnixListener::Bind(data_dir.socket_path());
  if (!unix_listener.ok()) return Fail(unix_listener.status().ToString());
  (*unix_listener)->Start(std::move(unix_acceptor), ::geteuid());
  std::string endpoint = data_dir.socket_target();
  if (tcp_port != 0) {
    std::string host = listen.substr(0, listen.rfind(':'));
    endpoint = absl::StrCat(host, ":", tcp_port);
  }
  controller.set_report_endpoint(endpoint);
  if (absl::Status s = controller.Recover(); !s.ok()) return Fail(s.ToString());
  controller.Start();
  (void)hpo::WriteFileAtomic(data_dir.endpoint_path(), endpoint + "\n", 0600);
  (void)hpo::WriteFileAtomic(data_dir.pid_path(), absl::StrCat(::getpid(), "\n"), 0600);
  spdlog::info("hpod {} ready: {} and {}; {}; data in {}", "0.1.0", data_dir.socket_path(),
               endpoint, backend.Describe(), data_dir.root());

  int sig = 0;
  sigwait(&signals, &sig);
  bool keep_trials = sig == SIGUSR1;
  spdlog::info("signal {}: shutting down{}", sig, keep_trials ? ", leaving the trials running" : "");
  unix_listener->reset();  // no new local connections
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  controller.Shutdown(keep_trials);
  ::unlink(data_dir.endpoint_path().c_str());
  ::unlink(data_dir.pid_path().c_str());
  spdlog::info("hpod stopped");
  spdlog::shutdown();
  return 0;
}
