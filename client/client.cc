#include "client/client.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <limits>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/address.h"
#include "common/crypto.h"
#include "common/daemon_lock.h"
#include "common/data_dir.h"
#include "common/files.h"
#include "common/fingerprint.h"
#include "common/run_command.h"
#include "common/shell_quote.h"
#include "common/status_macros.h"
#include "common/token.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"

namespace hpo::client {

std::chrono::system_clock::time_point Deadline(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(d);
}

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

std::shared_ptr<grpc::Channel> ComputeNodeChannel(const std::string& endpoint,
                                                  const std::string& tls_ca_pem) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);  // tiny messages: no bandwidth probing
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  return grpc::CreateCustomChannel(endpoint, ChannelCredentials(tls_ca_pem), args);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const std::string& tls_ca_pem) {
  if (tls_ca_pem.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = tls_ca_pem;
  return grpc::SslCredentials(tls);
}

absl::StatusOr<std::string> TlsCaFromEnvironment() {
  if (const char* data = std::getenv(kTlsCaDataEnv); data != nullptr && *data != '\0') {
    std::string pem;
    if (!Base64Decode(absl::StripAsciiWhitespace(data), &pem)) {
      return absl::FailedPreconditionError(
          absl::StrCat(kTlsCaDataEnv, " is not base64 (of a PEM CA certificate)"));
    }
    return pem;
  }
  const char* path = std::getenv("HPO_TLS_CA");
  if (path == nullptr || *path == '\0') return std::string();
  absl::StatusOr<std::string> pem = ReadFile(path);
  if (!pem.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("HPO_TLS_CA: cannot read ", path, ": ", pem.status().message()));
  }
  return pem;
}

Client::Client(const std::string& target, std::string token, const std::string& tls_ca_pem)
    : channel_(grpc::CreateChannel(target, ChannelCredentials(tls_ca_pem))),
      stub_(v1::HpoService::NewStub(channel_)),
      token_(std::move(token)) {}

std::unique_ptr<grpc::ClientContext> Client::Context(absl::Duration timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + token_);
  if (timeout != absl::InfiniteDuration()) ctx->set_deadline(Deadline(timeout));
  return ctx;
}

bool Client::Healthy(absl::Duration timeout) {
  if (!channel_->WaitForConnected(Deadline(timeout))) return false;
  return true;
}

absl::StatusOr<std::unique_ptr<Client>> Client::FromEnvironment(bool autostart) {
  const char* server = std::getenv("HPO_SERVER");
  if (server == nullptr || *server == '\0') return Local(autostart);
  std::string token;
  if (const char* t = std::getenv("HPO_TOKEN"); t != nullptr && *t != '\0') {
    token = t;
  } else if (const char* f = std::getenv("HPO_TOKEN_FILE"); f != nullptr && *f != '\0') {
    absl::StatusOr<std::string> text = ReadFile(f);
    if (!text.ok())
      return absl::FailedPreconditionError(absl::StrCat("HPO_TOKEN_FILE: cannot read ", f));
    token = std::string(absl::StripAsciiWhitespace(*text));
  } else {
    return absl::FailedPreconditionError(
        absl::StrCat("HPO_SERVER is ", server, ": set HPO_TOKEN or HPO_TOKEN_FILE to your token"));
  }
  ASSIGN_OR_RETURN(std::string ca, TlsCaFromEnvironment());
  if (ca.empty() && !absl::StartsWith(server, "unix:") && !ClearTextAllowed()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "HPO_SERVER is ", server,
        ": hpod serves its TCP address over TLS with a CA of its own, and hpo sends your token "
        "only to the server that CA vouches for: set HPO_TLS_CA to a copy of that hpod's "
        "DATA_DIR/tls-ca.pem. (An hpod started with --insecure-listen serves clear text: "
        "HPO_INSECURE=1 lets hpo send your token there, where anyone who can read the network or "
        "take hpod's port while it is down gets it.)"));
  }
  auto c = std::make_unique<Client>(server, token, ca);
  if (!c->Healthy(absl::Seconds(5))) {
    return absl::UnavailableError(
        absl::StrCat("no hpod answers at ", server,
                     ca.empty() ? "" : " over TLS (check HPO_TLS_CA and the server's name)"));
  }
  return c;
}

bool ClearTextAllowed() {
  const char* v = std::getenv("HPO_INSECURE");
  return v != nullptr && std::string(v) == "1";
}

namespace {

// What hpo needs to call the data directory's hpod over TCP: the CA to trust there ($HPO_TLS_CA,
// else the copy hpod keeps in the data directory while it serves TLS).
absl::StatusOr<std::string> DataDirTlsCa(const DataDir& dir) {
  ASSIGN_OR_RETURN(std::string ca, TlsCaFromEnvironment());
  if (!ca.empty()) return ca;
  if (::access(dir.tls_ca_path().c_str(), F_OK) != 0) return std::string();
  return ReadFile(dir.tls_ca_path());
}

// Whether the hpod that `dir`'s lock file names ran on this host and its process is gone.
bool KilledHere(const DataDir& dir) {
  std::optional<LockHolder> named = NamedLockHolder(dir.lock_path());
  return named && GoneFromThisHost(*named);
}

// hpod of `dir`, if it answers: on its Unix socket (this host), else at the TCP endpoint it
// wrote (another host that shares the directory: hpod run as a Slurm job), over TLS trusting
// the CA it keeps there. `why` (when given) says why hpo did not call that endpoint.
std::unique_ptr<Client> ConnectDataDir(const DataDir& dir, absl::Duration wait,
                                       std::string* why = nullptr) {
  absl::StatusOr<std::string> token = dir.ReadToken();
  if (!token.ok()) return nullptr;
  // An hpod of this host that was killed left its socket and endpoint: nothing answers there,
  // and waiting for it would only hold up the restart.
  if (KilledHere(dir)) return nullptr;
  std::optional<LockHolder> holder = LiveLockHolder(dir.lock_path());
  bool here = !holder || holder->host == HostName();  // another host's socket cannot answer
  if (here && ::access(dir.socket_path().c_str(), F_OK) == 0) {
    auto c = std::make_unique<Client>(dir.socket_target(), *token);
    if (c->Healthy(wait)) return c;
  }
  absl::StatusOr<std::string> text = ReadFile(dir.endpoint_path());
  if (!text.ok()) return nullptr;
  std::string endpoint(absl::StripAsciiWhitespace(*text));
  // A loopback address is this host's, where the socket would have answered.
  if (endpoint.empty() || absl::StartsWith(endpoint, "unix:") || IsLoopback(endpoint)) {
    return nullptr;
  }
  absl::StatusOr<std::string> ca = DataDirTlsCa(dir);
  if (!ca.ok()) return nullptr;
  if (ca->empty() && !ClearTextAllowed()) {
    // No tls-ca.pem: that hpod serves clear text (--insecure-listen), where whoever holds its
    // port would get the token.
    if (why != nullptr) {
      *why = absl::StrCat(
          "hpod of ", dir.root(), " listens at ", endpoint,
          " in clear text (--insecure-listen), and hpo sends your token over the network only "
          "with TLS; HPO_INSECURE=1 sends it anyway (anyone who can read the network or take "
          "hpod's port while it is down gets it), or run hpo on hpod's host");
    }
    return nullptr;
  }
  auto c = std::make_unique<Client>(endpoint, *token, *ca);
  if (c->Healthy(wait)) return c;
  return nullptr;
}

std::string Describe(const LockHolder& h) {
  return absl::StrCat(h.host, " (pid ", h.pid, h.job.empty() ? "" : ", Slurm job ", h.job, ")");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Local(bool autostart) {
  DataDir dir = DataDir::FromEnvironment();
  std::string why;
  if (auto c = ConnectDataDir(dir, absl::Seconds(2), &why)) return c;
  if (!why.empty()) return absl::FailedPreconditionError(why);
  // One that holds the directory but does not answer (starting or stopping, or unreachable from
  // here): starting another would only meet its lock.
  if (std::optional<LockHolder> holder = LiveLockHolder(dir.lock_path());
      holder && (!holder->job.empty() || holder->host != HostName())) {
    auto endpoint = ReadFile(dir.endpoint_path());
    return absl::UnavailableError(absl::StrCat(
        "hpod of ", dir.root(), " runs on ", Describe(*holder), " but does not answer",
        endpoint.ok() ? absl::StrCat(" at ", absl::StripAsciiWhitespace(*endpoint)) : "",
        " from here (is it still starting? `hpo daemon status`)"));
  }
  if (!autostart) {
    return absl::UnavailableError(absl::StrCat("no hpod answers at ", dir.socket_path(),
                                               " (start one with `hpo daemon start`)"));
  }
  // The data directory's hpod runs as a Slurm job: another one here would be another hpod.
  if (absl::StatusOr<std::map<std::string, std::string>> kept = KeptOptions();
      kept.ok() && kept->count("as-job")) {
    return absl::UnavailableError(absl::StrCat(
        "hpod of ", dir.root(), " runs as a Slurm job (", dir.config_path(),
        ") and none serves now: `hpo daemon start` submits its job again (or its scrontab line "
        "will); `squeue --name=hpod` shows a job that is still queued"));
  }
  if (absl::Status s = StartDaemon(absl::Seconds(20)); !s.ok()) return s;
  if (auto c = ConnectDataDir(dir, absl::Seconds(2))) return c;
  return absl::UnavailableError(
      absl::StrCat("hpod started but does not answer at ", dir.socket_path()));
}

#define HPO_UNARY(Rpc, req_expr, out_expr)                 \
  v1::Rpc##Response resp;                                  \
  auto ctx = Context();                                    \
  grpc::Status s = stub_->Rpc(ctx.get(), req_expr, &resp); \
  if (!s.ok()) return FromGrpc(s);                         \
  return out_expr;

absl::StatusOr<v1::ValidateSweepResponse> Client::Validate(const v1::ValidateSweepRequest& req){
    HPO_UNARY(ValidateSweep, req,
              resp)} absl::StatusOr<v1::Sweep> Client::Submit(const v1::SubmitSweepRequest& req){
    HPO_UNARY(SubmitSweep, req,
              resp.sweep())} absl::StatusOr<v1::Sweep> Client::GetSweep(int64_t sweep_id) {
  v1::GetSweepRequest req;
  req.set_sweep_id(sweep_id);
  HPO_UNARY(GetSweep, req, resp.sweep())
}
absl::StatusOr<std::vector<v1::Sweep>> Client::ListSweeps(bool active_only) {
  v1::ListSweepsRequest req;
  req.set_active_only(active_only);
  HPO_UNARY(ListSweeps, req, (std::vector<v1::Sweep>(resp.sweeps().begin(), resp.sweeps().end())))
}
absl::StatusOr<v1::Sweep> Client::Cancel(int64_t sweep_id) {
  v1::CancelSweepRequest req;
  req.set_sweep_id(sweep_id);
  HPO_UNARY(CancelSweep, req, resp.sweep())
}
absl::StatusOr<v1::Sweep> Client::Pause(int64_t sweep_id) {
  v1::PauseSweepRequest req;
  req.set_sweep_id(sweep_id);
  HPO_UNARY(PauseSweep, req, resp.sweep())
}
absl::StatusOr<v1::Sweep> Client::Resume(int64_t sweep_id) {
  v1::ResumeSweepRequest req;
  req.set_sweep_id(sweep_id);
  HPO_UNARY(ResumeSweep, req, resp.sweep())
}
absl::StatusOr<v1::PlanSweepResponse> Client::Plan(const v1::PlanSweepRequest& req){
    HPO_UNARY(PlanSweep, req,
              resp)} absl::StatusOr<v1::Sweep> Client::AllowNode(int64_t sweep_id,
                                                                 const std::string& node) {
  v1::AllowNodeRequest req;
  req.set_sweep_id(sweep_id);
  req.set_node(node);
  HPO_UNARY(AllowNode, req, resp.sweep())
}
// A change sent with a key of its own (request_id) and sent again, with the same key, while hpod
// is unreachable or its answer is late: hpod applies it once, however many times it arrived.
template <typename Request, typename Send>
absl::StatusOr<v1::Sweep> SendOnce(Request req, Send send) {
  if (req.request_id().empty()) req.set_request_id(RandomHex(16));
  absl::Time give_up = absl::Now() + absl::Minutes(1);
  absl::Duration backoff = absl::Milliseconds(200);
  while (true) {
    absl::StatusOr<v1::Sweep> sweep = send(req);
    bool retryable =
        absl::IsUnavailable(sweep.status()) || absl::IsDeadlineExceeded(sweep.status());
    if (!retryable || absl::Now() + backoff > give_up) return sweep;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

absl::StatusOr<v1::Sweep> Client::Extend(const v1::ExtendSweepRequest& request) {
  return SendOnce(request, [this](const v1::ExtendSweepRequest& req) -> absl::StatusOr<v1::Sweep> {
    HPO_UNARY(ExtendSweep, req, resp.sweep())
  });
}
absl::StatusOr<v1::Sweep> Client::Enqueue(const v1::EnqueueRequest& request) {
  return SendOnce(request, [this](const v1::EnqueueRequest& req) -> absl::StatusOr<v1::Sweep> {
    HPO_UNARY(Enqueue, req, resp.sweep())
  });
}
absl::StatusOr<v1::AskResponse> Client::Ask(int64_t sweep_id) {
  v1::AskRequest req;
  req.set_sweep_id(sweep_id);
  HPO_UNARY(Ask, req, resp)
}
absl::StatusOr<v1::Trial> Client::Tell(const v1::TellRequest& req){HPO_UNARY(
    Tell, req,
    resp.trial())} absl::StatusOr<std::vector<std::string>> Client::Remove(int64_t sweep_id) {
  v1::RemoveSweepRequest req;
  req.set_sweep_id(sweep_id);
  HPO_UNARY(RemoveSweep, req,
            (std::vector<std::string>(resp.removed_dirs().begin(), resp.removed_dirs().end())))
}
absl::StatusOr<std::vector<v1::Trial>> Client::ListTrials(const v1::ListTrialsRequest& req){
    HPO_UNARY(ListTrials, req,
              (std::vector<v1::Trial>(resp.trials().begin(), resp.trials().end())))} absl::
    StatusOr<v1::GetTrialResponse> Client::GetTrial(int64_t trial_id, bool include_reports) {
  v1::GetTrialRequest req;
  req.set_trial_id(trial_id);
  req.set_include_reports(include_reports);
  HPO_UNARY(GetTrial, req, resp)
}
absl::StatusOr<v1::TailTrialLogResponse> Client::TailLog(const v1::TailTrialLogRequest& req){
    HPO_UNARY(TailTrialLog, req,
              resp)} absl::StatusOr<v1::DashboardLoginResponse> Client::DashboardLogin() {
  v1::DashboardLoginRequest req;
  HPO_UNARY(DashboardLogin, req, resp)
}
#undef HPO_UNARY

absl::Status Client::Watch(int64_t sweep_id, int64_t since_seq,
                           const std::function<bool(const v1::Event&)>& on_event,
                           absl::Duration timeout) {
  auto ctx = Context(timeout);
  v1::WatchSweepRequest req;
  req.set_sweep_id(sweep_id);
  req.set_since_seq(since_seq);
  std::unique_ptr<grpc::ClientReader<v1::Event>> reader = stub_->WatchSweep(ctx.get(), req);
  v1::Event event;
  while (reader->Read(&event)) {
    if (!on_event(event)) {
      ctx->TryCancel();
      while (reader->Read(&event)) {
      }
      reader->Finish();
      return absl::CancelledError("stopped watching");
    }
  }
  return FromGrpc(reader->Finish());
}

// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------

namespace {

// hpod installed next to this program, else the one on PATH.
std::string HpodPath() {
  std::string hpod = ExecutableDir() + "/hpod";
  return ::access(hpod.c_str(), X_OK) == 0 ? hpod : "hpod";
}

// hpod checks its flags first, so that a typo is told here and nothing starts.
absl::Status CheckHpodFlags(const std::string& hpod, const std::vector<std::string>& args) {
  // Also without options: the data directory's hpod.yaml is read and checked.
  std::vector<std::string> argv = {hpod, "--check-flags"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto [rc, said] = RunCommand(argv);
  if (rc == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("hpod refuses these options (nothing was started): ",
                   absl::StripAsciiWhitespace(said.empty() ? "could not run " + hpod : said)));
}

std::string LogTail(const std::string& path) {
  bool truncated = false;
  absl::StatusOr<std::string> tail = TailFile(path, 2000, &truncated);
  return tail.ok() ? *tail : "";
}

bool HasOption(const std::vector<std::string>& args, const std::string& name) {
  for (const std::string& a : args) {
    if (a == name || absl::StartsWith(a, name + "=")) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> KeptOptions() {
  auto [rc, said] = RunCommand({HpodPath(), "--show-config"});
  if (rc != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("hpod cannot read its options: ", absl::StripAsciiWhitespace(said)));
  }
  std::map<std::string, std::string> out;
  for (absl::string_view line : absl::StrSplit(said, '\n', absl::SkipEmpty())) {
    size_t eq = line.find('=');
    if (eq != absl::string_view::npos) {
      out[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    }
  }
  return out;
}

absl::Status StartDaemon(absl::Duration timeout, const std::vector<std::string>& extra_args) {
  DataDir dir = DataDir::FromEnvironment();
  if (absl::Status s = dir.Create(); !s.ok()) return s;
  std::string hpod = HpodPath();
  RETURN_IF_ERROR(CheckHpodFlags(hpod, extra_args));
  std::string log = dir.log_path();
  // A killed hpod of this host left its endpoint file: gone, the file appears again only once
  // the new hpod serves, and the wait below does not knock on the dead one's socket.
  if (KilledHere(dir)) ::unlink(dir.endpoint_path().c_str());
  pid_t pid = ::fork();
  if (pid < 0) return absl::UnavailableError("fork failed");
  if (pid == 0) {
    // Double fork so the daemon is not our child, in its own session.
    ::setsid();
    if (::fork() != 0) ::_exit(0);
    int null_fd = ::open("/dev/null", O_RDWR);
    int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(null_fd, 0);
    ::dup2(log_fd >= 0 ? log_fd : null_fd, 1);
    ::dup2(log_fd >= 0 ? log_fd : null_fd, 2);
    std::vector<std::string> args = {hpod, "--data-dir=" + dir.root(), "--log-file=" + log};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  absl::Time until = absl::Now() + timeout;
  while (absl::Now() < until) {
    auto token = dir.ReadToken();
    if (token.ok() && ::access(dir.endpoint_path().c_str(), F_OK) == 0) {
      Client c(dir.socket_target(), *token);
      if (c.Healthy(absl::Seconds(1))) return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::UnavailableError(absl::StrCat("hpod did not come up within ",
                                             absl::FormatDuration(timeout), "; its log ", log,
                                             " ends with:\n", LogTail(log)));
}

absl::StatusOr<DaemonJob> StartDaemonAsJob(const std::vector<std::string>& sbatch_args,
                                           const std::vector<std::string>& hpod_args,
                                           absl::Duration wait) {
  DataDir dir = DataDir::FromEnvironment();
  RETURN_IF_ERROR(dir.Create());
  std::string hpod = HpodPath();
  ASSIGN_OR_RETURN(auto kept, KeptOptions());
  std::vector<std::string> args = hpod_args;
  // Reached from the login nodes and the allocations' agents (not on loopback), and its job's end
  // a move: unless its configuration says otherwise already.
  if (!HasOption(args, "--listen") && !kept.count("listen")) args.push_back("--listen=0.0.0.0:0");
  if (!HasOption(args, "--keep-trials-on-term") && !kept.count("keep-trials-on-term")) {
    args.push_back("--keep-trials-on-term");
  }
  std::string as_job = absl::StrJoin(sbatch_args, " ");
  if (!kept.count("as-job") || kept["as-job"] != as_job) args.push_back("--as-job=" + as_job);
  // The configuration first (DATA_DIR/hpod.yaml: every start of the job reads it), checked by
  // hpod: a typo or an option that contradicts it is told now and nothing is submitted.
  RETURN_IF_ERROR(CheckHpodFlags(hpod, args));
  std::vector<std::string> configure = {hpod, "--configure"};
  configure.insert(configure.end(), args.begin(), args.end());
  if (auto [rc, said] = RunCommand(configure); rc != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("hpod cannot keep its options: ", absl::StripAsciiWhitespace(said)));
  }
  std::string out = dir.root() + "/hpod-job.out";
  std::string script = absl::StrCat(
      "#!/bin/bash\n"
      "# hpod run as a Slurm job for ",
      dir.root(),
      ", written by `hpo daemon start --as-job`.\n"
      "# Submit it again (sbatch, or a scrontab line: docs/operations.md) to start hpod\n"
      "# wherever Slurm places it; the sweeps and their trials go on. Its options are in\n"
      "# hpod.yaml beside it.\n"
      "#SBATCH --job-name=hpod\n"
      "#SBATCH --ntasks=1\n"
      "#SBATCH --output=",
      out,
      "\n"
      "#SBATCH --open-mode=append\n"
      "# SIGTERM two minutes before the time limit: hpod stops in its own time, leaving the\n"
      "# trials to the next hpod.\n"
      "#SBATCH --signal=B:TERM@120\n"
      "exec ",
      ShellQuote(hpod), " ", ShellQuote("--data-dir=" + dir.root()), " ",
      ShellQuote("--log-file=" + dir.log_path()), "\n");
  RETURN_IF_ERROR(WriteFileAtomic(dir.daemon_job_script_path(), script, 0700));
  std::vector<std::string> sbatch = {"sbatch", "--parsable"};
  sbatch.insert(sbatch.end(), sbatch_args.begin(), sbatch_args.end());
  sbatch.push_back(dir.daemon_job_script_path());
  auto [rc, said] = RunCommand(sbatch);
  std::string answer(absl::StripAsciiWhitespace(said));
  DaemonJob job;
  job.id = answer.substr(0, answer.find(';'));  // "JOB" or "JOB;CLUSTER"
  int64_t number = 0;
  if (rc != 0 || !absl::SimpleAtoi(job.id, &number)) {
    return absl::FailedPreconditionError(
        absl::StrCat("sbatch refused hpod's job (nothing was started): ",
                     answer.empty() ? "could not run sbatch" : answer));
  }
  absl::Time until = absl::Now() + wait;
  while (true) {
    std::optional<LockHolder> holder = LiveLockHolder(dir.lock_path());
    if (holder && holder->job == job.id && ConnectDataDir(dir, absl::Seconds(1)) != nullptr) {
      job.host = holder->host;
      job.running = true;
      return job;
    }
    auto [squeue_rc, state] =
        RunCommand({"squeue", "--noheader", "--jobs=" + job.id, "--format=%T"});
    state = std::string(absl::StripAsciiWhitespace(state));
    if (squeue_rc == 0 && state.empty()) {  // it left the queue without serving
      return absl::UnavailableError(absl::StrCat(
          "hpod's Slurm job ", job.id, " ended without serving; ", out, " ends with:\n",
          LogTail(out), "\nand ", dir.log_path(), " with:\n", LogTail(dir.log_path())));
    }
    if (absl::Now() >= until) {
      job.state = state;
      return job;
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
}

absl::Status StopDaemon(absl::Duration timeout, bool keep_trials) {
  DataDir dir = DataDir::FromEnvironment();
  std::optional<LockHolder> holder = LiveLockHolder(dir.lock_path());
  if (holder && !holder->job.empty()) {
    // hpod run as a Slurm job (of one node), on whichever node: signaled there, by its pid, from
    // a step of its own job (under a scrontab line hpod is not the batch step's main process, which
    // is all `scancel --batch` reaches); where no step can start, through scancel.
    auto [rc, said] = RunCommand({"srun", "--jobid=" + holder->job, "--overlap", "--nodes=1",
                                  "--ntasks=1", "--quiet", "kill", keep_trials ? "-USR1" : "-INT",
                                  std::to_string(holder->pid)});
    if (rc != 0) {
      std::tie(rc, said) = RunCommand(
          {"scancel", "--batch", keep_trials ? "--signal=USR1" : "--signal=INT", holder->job});
    }
    if (rc != 0) {
      return absl::UnavailableError(absl::StrCat("scancel could not signal hpod's job ",
                                                 holder->job, ": ",
                                                 absl::StripAsciiWhitespace(said)));
    }
    absl::Time until = absl::Now() + timeout;
    while (absl::Now() < until) {
      std::optional<LockHolder> now = LiveLockHolder(dir.lock_path());
      if (!now || now->job != holder->job) return absl::OkStatus();
      absl::SleepFor(absl::Milliseconds(100));
    }
    return absl::DeadlineExceededError(absl::StrCat(
        "hpod (Slurm job ", holder->job, ") did not stop within ", absl::FormatDuration(timeout)));
  }
  if (holder && holder->host != HostName()) {
    return absl::FailedPreconditionError(
        absl::StrCat("hpod of ", dir.root(), " runs on ", Describe(*holder), ": stop it there"));
  }
  auto text = ReadFile(dir.pid_path());
  int pid = 0;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &pid) || pid <= 1) {
    return absl::NotFoundError(absl::StrCat("no hpod runs for ", dir.root()));
  }
  if (::kill(pid, keep_trials ? SIGUSR1 : SIGTERM) != 0) {
    return absl::NotFoundError(
        absl::StrCat("no hpod runs for ", dir.root(), " (stale pid ", pid, ")"));
  }
  absl::Time until = absl::Now() + timeout;
  while (absl::Now() < until) {
    if (::kill(pid, 0) != 0) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("hpod (pid ", pid, ") did not stop within ", absl::FormatDuration(timeout)));
}

}  // namespace hpo::client
