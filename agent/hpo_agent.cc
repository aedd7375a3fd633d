// hpo-agent: the batch script of every Slurm allocation hpod requests in steps mode. It runs on
// the allocation's first node, takes hpod's orders over gRPC (AgentService.AgentSync, a long
// poll), starts each step there itself (srun inside the allocation, under hpo-shim, which
// writes the step's exit record into the trial directory), watches it, and tells hpod how its
// steps run and end. So hpod's host holds no process per running trial, and a step outlives
// hpod and hpod's host.
//
//   hpo-agent [--silence 10m] [--dir DATA_DIR/agents]
//
// It reads HPO_AGENT_TOKEN (its allocation's own token), SLURM_JOB_ID, HPO_ENDPOINT_FILE (where
// hpod says it listens, read again at each reconnect, so that the agent follows a moved hpod),
// HPO_ENDPOINT (used while that file says nothing), HPO_TLS_CA_DATA (the CA hpod's certificate must
// chain to) and HPO_UMASK. It never sends its token: each call carries a proof of it, and it obeys
// only an answer that carries hpod's (common/proofs.h); a stranger at hpod's address is logged and
// ignored, and the steps go on.
//
// What it started and saw end is written to DIR/JOB.journal (default: next to the endpoint
// file, in DATA_DIR/agents; where that cannot be written, a private directory it makes under the
// job's $TMPDIR), and what it does to DIR/JOB.log, both its own files (never through a link),
// before it tells hpod: an agent started again in the same allocation
// (a requeued job) never starts a step twice, and reports the outcome of those it started, from
// the trial directory's exit record.
//
// hpod releases an idle allocation by telling its agent (FAILED_PRECONDITION "released"): the
// agent lets whatever still runs finish and exits, which ends the allocation without an RPC of
// hpod's to slurmctld. SIGTERM (hpod canceled the allocation, or it reached its end) ends the
// agent at once; Slurm ends the steps. When hpod does not answer, the steps go on; the agent keeps
// their outcomes and calls again every second while hpod's host refuses the connection (a restart),
// and with a back-off doubling to 30 s while its calls run into their deadline. When it has not
// heard from hpod for --silence, it takes no more orders, lets its steps finish, and ends, which
// ends the allocation.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backend/process.h"
#include "client/client.h"
#include "common/address.h"
#include "common/duration.h"
#include "common/files.h"
#include "common/layout.h"
#include "common/proofs.h"
#include "common/token.h"
#include "grpcpp/grpcpp.h"
#include "hpo/v1/hpo.grpc.pb.h"

namespace {

using hpo::backend::ExitRecord;
using hpo::backend::TrialProcess;

void Log(const std::string& line) {
  std::string stamp = absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::Now(), absl::LocalTimeZone());
  std::fprintf(stderr, "%s hpo-agent: %s\n", stamp.c_str(), line.c_str());
  std::fflush(stderr);
}

// Opens `path` to append to it, as this user's own regular file: never through a symbolic link,
// never a file someone else made or may read. -1 (errno set) otherwise.
int OpenPrivate(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 077) != 0) {
    ::close(fd);
    errno = EPERM;
    return -1;
  }
  return fd;
}

// Where the agent of allocation `job` keeps its journal and log when the data directory cannot
// be written from its node: a directory of its own under the job's $TMPDIR (else /tmp), made by
// mkdtemp (mode 0700). An agent started again in the same allocation finds the one an earlier
// agent made: owned by this user, mode 0700, a directory and not a link; nothing else is taken.
std::string PrivateTempDir(uint32_t job) {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  std::string prefix = absl::StrCat("hpo-agent-", job, ".");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(base, ec)) {
    std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, prefix)) continue;
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
        st.st_uid == ::geteuid() && (st.st_mode & 0777) == 0700) {
      return entry.path().string();
    }
  }
  std::string path = absl::StrCat(base, "/", prefix, "XXXXXX");
  if (::mkdtemp(path.data()) == nullptr) return "";
  return path;
}

// A step the agent started.
struct Run {
  int64_t trial_id = 0;
  int segment = 1;
  TrialProcess process;
  bool ended = false;
  bool vanished = false;
  ExitRecord outcome;
};

using Key = std::pair<int64_t, int>;  // trial, segment

// DIR/JOB.journal: one line per fact, appended and flushed before hpod hears of it.
//   launch TRIAL SEGMENT PID DIR
//   end TRIAL SEGMENT EXIT_CODE TERM_SIGNAL EXEC_ERRNO
//   vanished TRIAL SEGMENT
//   ack TRIAL SEGMENT
class Journal {
 public:
  explicit Journal(std::string path) : path_(std::move(path)) {}

  // What an earlier agent of this allocation wrote: its steps hpod has not acknowledged, and
  // (`launched`) every step it started.
  std::map<Key, Run> Load(std::set<Key>* launched) const {
    std::map<Key, Run> runs;
    absl::StatusOr<std::string> text = hpo::ReadFile(path_);
    if (!text.ok()) return runs;
    for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
      std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(' ', 5));
      Key key;
      if (f.size() < 3 || !absl::SimpleAtoi(f[1], &key.first) ||
          !absl::SimpleAtoi(f[2], &key.second)) {
        continue;
      }
      if (f[0] == "launch" && f.size() == 5) {
        launched->insert(key);
        Run& run = runs[key];
        run.trial_id = key.first;
        run.segment = key.second;
        run.process.trial_id = key.first;
        run.process.segment = key.second;
        run.process.adopted = true;  // not this process's child
        (void)absl::SimpleAtoi(f[3], &run.process.pid);
        run.process.dir = f[4];
      } else if (f[0] == "end" && f.size() == 6 && runs.count(key)) {
        Run& run = runs[key];
        run.ended = true;
        (void)absl::SimpleAtoi(f[3], &run.outcome.exit_code);
        (void)absl::SimpleAtoi(f[4], &run.outcome.term_signal);
        (void)absl::SimpleAtoi(f[5], &run.outcome.exec_errno);
      } else if (f[0] == "vanished" && runs.count(key)) {
        runs[key].ended = runs[key].vanished = true;
      } else if (f[0] == "ack") {
        runs.erase(key);
      }
    }
    return runs;
  }

  void Append(const std::string& line) {
    if (file_ == nullptr) {
      int fd = OpenPrivate(path_);
      if (fd >= 0) file_ = ::fdopen(fd, "a");
    }
    if (file_ == nullptr) {
      Log(absl::StrCat("cannot write ", path_, ": ", std::strerror(errno)));
      return;
    }
    std::fprintf(file_, "%s\n", line.c_str());
    std::fflush(file_);
    ::fdatasync(fileno(file_));
  }

 private:
  std::string path_;
  FILE* file_ = nullptr;
};

class Agent {
 public:
  struct Options {
    uint32_t job_id = 0;
    std::string token, endpoint, endpoint_file, tls_ca_pem, shim, journal, nodelist;
    absl::Duration silence = absl::Minutes(10);
  };
  explicit Agent(Options options) : options_(std::move(options)), journal_(options_.journal) {
    host_ = hpo::HostName();
    runs_ = journal_.Load(&launched_);
    // Steps an earlier agent of this allocation started: still running, or ended as their exit
    // record says.
    for (auto& [key, run] : runs_) {
      if (run.ended) continue;
      ExitRecord outcome;
      TrialProcess::State state = run.process.Check(&outcome);
      if (state != TrialProcess::State::kRunning) Ended(run, state, outcome);
    }
    watcher_.SetWakeup([this] { Wake(); });
  }

  int Loop() {
    absl::Time last_heard = absl::Now();
    absl::Duration backoff = absl::ZeroDuration();
    bool draining = false;
    bool failing = false;
    absl::StatusCode failure = absl::StatusCode::kOk;
    bool released = false;  // hpod is done with this allocation
    while (true) {
      Reap();
      if (released || absl::Now() - last_heard > options_.silence) {
        if (!draining && !released) {
          Log(absl::StrCat("hpod has been silent for ", hpo::HumanDuration(options_.silence),
                           ": no new steps; ending once the ", Running(),
                           " running one(s) finish"));
          draining = true;
        }
        if (Running() == 0) {
          Log("ending the allocation");
          return 0;
        }
      }
      absl::Time sent = absl::Now();
      absl::StatusOr<hpo::v1::AgentSyncResponse> resp = Sync(draining ? 1000 : 20000);
      if (absl::IsFailedPrecondition(resp.status()) && !released) {
        // The end of the allocation is this agent's to make: its batch script ends (no signal,
        // no cancel through slurmctld).
        Log(absl::StrCat(resp.status().message(), ": ending once the ", Running(),
                         " running step(s) finish"));
        released = true;
        continue;
      }
      if (!resp.ok()) {
        if (absl::IsCancelled(resp.status())) continue;  // a step ended: say so at once
        // Once a streak, and again when the kind of miss changes (hpod gone, then a stranger at
        // its address).
        if (!failing || resp.status().code() != failure) {
          Log(absl::StrCat(absl::IsUnauthenticated(resp.status())    ? "hpod refuses this agent: "
                           : absl::IsPermissionDenied(resp.status()) ? ""
                                                                     : "hpod does not answer: ",
                           resp.status().message()));
        }
        failing = true;
        failure = resp.status().code();
        // A host that refuses at once is tried again every second (hpod restarting); one whose
        // calls run into their deadline, less and less often.
        bool quick = absl::Now() - sent < absl::Seconds(1);
        backoff =
            quick ? absl::Seconds(1) : std::clamp(backoff * 2, absl::Seconds(1), absl::Seconds(30));
        Pause(backoff);
        continue;
      }
      if (failing) Log("hpod answers again");
      failing = false;
      backoff = absl::ZeroDuration();
      last_heard = absl::Now();
      if (draining) {
        Log("hpod answers again: taking orders");
        draining = false;
      }
      Apply(*resp);
      // Never a busy loop, whatever hpod answers.
      if (resp->orders_size() == 0 && absl::Now() - sent < absl::Milliseconds(50)) {
        Pause(absl::Milliseconds(100));
      }
    }
  }

 private:
  int Running() const {
    int n = 0;
    for (const auto& [key, run] : runs_) n += !run.ended;
    return n;
  }

  void Wake() {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
    if (call_ != nullptr) call_->TryCancel();
    cv_.notify_all();
  }

  void Pause(absl::Duration d) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, absl::ToChronoMilliseconds(d), [this] { return woken_; });
    woken_ = false;
  }

  void Ended(Run& run, TrialProcess::State state, const ExitRecord& outcome) {
    run.ended = true;
    if (state == TrialProcess::State::kVanished) {
      run.vanished = true;
      journal_.Append(absl::StrCat("vanished ", run.trial_id, " ", run.segment));
      Log(absl::StrCat("trial ", run.trial_id, ": its step is gone and left no exit record"));
      return;
    }
    run.outcome = outcome;
    journal_.Append(absl::StrCat("end ", run.trial_id, " ", run.segment, " ", outcome.exit_code,
                                 " ", outcome.term_signal, " ", outcome.exec_errno));
  }

  void Reap() {
    for (auto& [key, run] : runs_) {
      if (run.ended) continue;
      ExitRecord outcome;
      TrialProcess::State state = run.process.Check(&outcome);
      if (state != TrialProcess::State::kRunning) Ended(run, state, outcome);
    }
  }

  // The endpoint hpod says it has now, else the one it was given.
  std::string Endpoint() const {
    if (!options_.endpoint_file.empty()) {
      absl::StatusOr<std::string> text = hpo::ReadFile(options_.endpoint_file);
      if (text.ok() && !absl::StripAsciiWhitespace(*text).empty()) {
        return std::string(absl::StripAsciiWhitespace(*text));
      }
    }
    return options_.endpoint;
  }

  absl::StatusOr<hpo::v1::AgentSyncResponse> Sync(int wait_ms) {
    std::string endpoint = Endpoint();
    if (endpoint.empty()) {
      return absl::UnavailableError(
          absl::StrCat("no endpoint yet (", options_.endpoint_file, " is empty or missing)"));
    }
    if (endpoint != endpoint_ || stub_ == nullptr) {
      if (!endpoint_.empty() && endpoint != endpoint_)
        Log(absl::StrCat("hpod moved: ", endpoint_, " -> ", endpoint));
      endpoint_ = endpoint;
      stub_ = hpo::v1::AgentService::NewStub(
          hpo::client::ComputeNodeChannel(endpoint_, options_.tls_ca_pem));
    }
    hpo::v1::AgentSyncRequest req;
    req.set_job_id(options_.job_id);
    req.set_host(host_);
    req.set_epoch(epoch_);
    req.set_applied(applied_);
    req.set_wait_ms(wait_ms);
    req.set_nodelist(options_.nodelist);
    for (const auto& [key, run] : runs_) {
      hpo::v1::AgentStep* s = req.add_steps();
      s->set_trial_id(run.trial_id);
      s->set_segment(run.segment);
      s->set_pid(run.process.pid);
      s->set_ended(run.ended);
      s->set_vanished(run.vanished);
      s->set_exit_code(run.outcome.exit_code);
      s->set_term_signal(run.outcome.term_signal);
      s->set_exec_errno(run.outcome.exec_errno);
    }
    // The token never leaves this node: the call carries a proof of it, and only an answer with
    // hpod's proof over this call's nonce is obeyed.
    req.set_nonce(hpo::RandomHex(16));
    last_sent_ms_ = std::max(absl::ToUnixMillis(absl::Now()), last_sent_ms_ + 1);
    req.set_sent_unix_ms(last_sent_ms_);
    hpo::v1::AgentEnvelope call;
    call.set_job_id(options_.job_id);
    call.set_body(req.SerializeAsString());
    call.set_mac(hpo::AgentRequestMac(options_.token, call.body()));
    grpc::ClientContext ctx;
    ctx.set_deadline(hpo::client::Deadline(absl::Milliseconds(wait_ms) + absl::Seconds(10)));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (woken_) {  // something ended since the request was made: make it again
        woken_ = false;
        return absl::CancelledError("woken");
      }
      call_ = &ctx;
    }
    hpo::v1::AgentEnvelope answer;
    grpc::Status status = stub_->AgentCall(&ctx, call, &answer);
    {
      std::lock_guard<std::mutex> lock(mu_);
      call_ = nullptr;
      woken_ = false;
    }
    if (!status.ok()) {
      // The next call goes on a new connection: a channel whose TLS connection broke under a
      // held call (hpod killed) was seen failing every handshake with the hpod that came back.
      stub_.reset();
      absl::Status error = hpo::client::FromGrpc(status);
      // Only a proven answer ends the allocation (see below); a bare refusal of that kind may
      // come from anyone.
      if (absl::IsFailedPrecondition(error)) return absl::UnavailableError(error.message());
      return error;
    }
    if (!hpo::ProofsEqual(answer.mac(),
                          hpo::AgentReplyMac(options_.token, req.nonce(), answer.body()))) {
      return absl::PermissionDeniedError(absl::StrCat(
          "the server at ", endpoint_,
          " answered without proof that it is hpod (it does not hold this allocation's token): "
          "its answer is ignored, no order of it is run, and the steps go on"));
    }
    hpo::v1::AgentSyncResponse resp;
    if (!resp.ParseFromString(answer.body())) {
      return absl::InternalError("hpod's answer cannot be read");
    }
    if (resp.released()) {
      return absl::FailedPreconditionError(
          absl::StrCat("hpod released allocation ", options_.job_id));
    }
    return resp;
  }

  void Apply(const hpo::v1::AgentSyncResponse& resp) {
    if (resp.epoch() != epoch_) {  // a new run of hpod numbers its orders afresh
      epoch_ = resp.epoch();
      applied_ = 0;
    }
    for (const hpo::v1::AgentStep& ack : resp.acknowledged()) {
      Key key{ack.trial_id(), ack.segment()};
      auto it = runs_.find(key);
      if (it == runs_.end() || !it->second.ended) continue;
      journal_.Append(absl::StrCat("ack ", key.first, " ", key.second));
      runs_.erase(it);
    }
    for (const hpo::v1::AgentOrder& order : resp.orders()) {
      if (order.seq() <= applied_) continue;
      applied_ = order.seq();
      if (order.has_launch()) Launch(order.launch());
      if (order.has_signal()) Signal(order.signal());
    }
  }

  void Launch(const hpo::v1::AgentLaunch& l) {
    Key key{l.trial_id(), l.segment()};
    if (!launched_.insert(key).second) return;  // never twice
    hpo::backend::SpawnSpec spawn;
    spawn.argv.assign(l.argv().begin(), l.argv().end());
    spawn.env.insert(l.env().begin(), l.env().end());
    spawn.inherit = [](absl::string_view) { return false; };
    spawn.workdir = l.workdir();
    spawn.stdout_path = l.stdout_path();
    spawn.stderr_path = l.stderr_path();
    spawn.shim = options_.shim;
    spawn.shim_dir = l.trial_dir();
    Run run;
    run.trial_id = l.trial_id();
    run.segment = l.segment();
    run.process.trial_id = l.trial_id();
    run.process.segment = l.segment();
    run.process.dir = l.trial_dir();
    absl::StatusOr<hpo::backend::Spawned> spawned = hpo::backend::Spawn(spawn);
    run.process.pid = spawned.ok() ? spawned->pid : 0;
    journal_.Append(absl::StrCat("launch ", run.trial_id, " ", run.segment, " ", run.process.pid,
                                 " ", run.process.dir));
    if (!spawned.ok() || spawned->exec_errno != 0) {
      ExitRecord failed;
      failed.exit_code = 127;
      failed.exec_errno = spawned.ok() ? spawned->exec_errno : EIO;
      Log(absl::StrCat("trial ", run.trial_id, ": cannot start its step: ",
                       spawned.ok() ? std::strerror(failed.exec_errno)
                                    : std::string(spawned.status().message())));
      Ended(run, TrialProcess::State::kEnded, failed);
    } else {
      watcher_.Watch(run.process.pid);
      Log(absl::StrCat("trial ", run.trial_id, ": started its step (segment ", run.segment,
                       ", hpo-shim pid ", run.process.pid, ")"));
    }
    runs_[key] = std::move(run);
  }

  void Signal(const hpo::v1::AgentSignal& s) {
    auto it = runs_.find({s.trial_id(), s.segment()});
    if (it == runs_.end() || it->second.ended || it->second.process.pid <= 0) return;
    Log(absl::StrCat("trial ", s.trial_id(), ": signal ", s.signal(), " to its step"));
    ::kill(-it->second.process.pid, s.signal());  // srun passes it on to the step
  }

  Options options_;
  Journal journal_;
  std::string host_;
  std::map<Key, Run> runs_;
  std::set<Key> launched_;  // every step it started: never started again
  std::string epoch_;
  uint64_t applied_ = 0;
  int64_t last_sent_ms_ = 0;  // the time of the last call, which the next one's exceeds
  std::string endpoint_;
  std::unique_ptr<hpo::v1::AgentService::Stub> stub_;
  std::mutex mu_;
  std::condition_variable cv_;
  grpc::ClientContext* call_ = nullptr;  // the call in flight, canceled when a step ends
  bool woken_ = false;
  hpo::backend::ChildWatcher watcher_;  // last: its thread stops first
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("hpo-agent: runs the steps of hpod's trials inside this Slurm allocation");
  std::string silence = "10m";
  std::string dir;
  app.add_option("--silence", silence,
                 "when hpod has not answered for this long, take no more orders, let the running "
                 "steps finish, and end the allocation");
  app.add_option("--dir", dir, "where its journal and log go (default: DATA_DIR/agents)");
  CLI11_PARSE(app, argc, argv);

  // What it writes (its journal and log) and what its steps write are private, or the group's,
  // as hpod says.
  const char* bits = std::getenv(hpo::layout::kUmaskEnv);
  ::umask(bits != nullptr && *bits != '\0'
              ? static_cast<mode_t>(std::strtoul(bits, nullptr, 8) & 0777)
              : static_cast<mode_t>(hpo::layout::kPrivateUmask));
  Agent::Options options;
  absl::StatusOr<absl::Duration> parsed = hpo::ParseDuration(silence);
  if (!parsed.ok() || *parsed <= absl::ZeroDuration()) {
    Log(absl::StrCat("--silence ", silence, ": not a positive duration"));
    return 2;
  }
  options.silence = *parsed;
  const char* token = std::getenv("HPO_AGENT_TOKEN");
  const char* job = std::getenv("SLURM_JOB_ID");
  if (token == nullptr || *token == '\0' || job == nullptr ||
      !absl::SimpleAtoi(job, &options.job_id)) {
    Log("HPO_AGENT_TOKEN and SLURM_JOB_ID must be set: hpo-agent runs as the batch script of an "
        "allocation hpod requested");
    return 2;
  }
  options.token = token;
  if (const char* e = std::getenv("HPO_ENDPOINT")) options.endpoint = e;
  if (const char* n = std::getenv("SLURM_JOB_NODELIST")) options.nodelist = n;
  if (const char* f = std::getenv("HPO_ENDPOINT_FILE")) options.endpoint_file = f;
  absl::StatusOr<std::string> ca = hpo::client::TlsCaFromEnvironment();
  if (!ca.ok()) {
    Log(std::string(ca.status().message()));
    return 2;
  }
  options.tls_ca_pem = *ca;
  options.shim = hpo::ExecutableDir() + "/hpo-shim";
  if (::access(options.shim.c_str(), X_OK) != 0) {
    Log(absl::StrCat("cannot find ", options.shim, " (installed with hpo-agent)"));
    return 2;
  }
  if (dir.empty() && !options.endpoint_file.empty()) {
    dir = hpo::DirName(options.endpoint_file) + "/" + hpo::layout::kAgentsDir;
  }
  // Where this node cannot write (a data directory on the login node's own disk): a private
  // directory of its own under the job's $TMPDIR.
  std::string wanted = dir;
  if (dir.empty() || !hpo::MakeDirs(dir, 0700).ok() || ::access(dir.c_str(), W_OK) != 0) {
    dir = PrivateTempDir(options.job_id);
    if (dir.empty()) {
      Log(absl::StrCat("cannot write to ", wanted,
                       " nor make a private directory under $TMPDIR: ", std::strerror(errno)));
      return 1;
    }
  }
  options.journal = absl::StrCat(dir, "/", options.job_id, hpo::layout::kAgentJournalSuffix);
  // Its log beside the journal (the batch job's own output goes nowhere).
  std::string log = absl::StrCat(dir, "/", options.job_id, hpo::layout::kAgentLogSuffix);
  if (int fd = OpenPrivate(log); fd >= 0) {
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
  if (dir != wanted) Log(absl::StrCat("cannot write to ", wanted, "; journal and log in ", dir));

  Log(absl::StrCat("allocation ", options.job_id, ": taking hpod's orders (",
                   options.endpoint_file.empty() ? options.endpoint : options.endpoint_file, ")"));
  Agent agent(std::move(options));
  return agent.Loop();
}
