// The allocation's agent: SlurmBackend in steps mode with its AgentHub served over gRPC, a
// scripted slurmctld (tests/fakes/fake_slurm.h), and the real hpo-agent run from the batch script
// the backend submitted, starting steps through a stand-in for srun on this machine. The real
// thing runs in tests/slurm/test_host_loss.sh.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "backend/process.h"
#include "common/files.h"
#include "common/proofs.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "slurm_backend/agent_hub.h"
#include "slurm_backend/slurm_backend.h"
#include "tests/fakes/act_now.h"
#include "tests/fakes/fake_slurm.h"

namespace hpo::slurm {
namespace {

using backend::BackendEvent;
using backend::LaunchSpec;
using backend::Resources;
using fakes::FakeSlurm;
using ::testing::HasSubstr;

// What answers at hpod's address while hpod is away, as a stranger would: it writes down all it
// hears and answers every call with an order to run a command of its own, sealed with a key of
// its own (it has no agent token).
class Impostor final : public v1::AgentService::CallbackService {
 public:
  explicit Impostor(std::string marker) : marker_(std::move(marker)) {}
  grpc::ServerUnaryReactor* AgentCall(grpc::CallbackServerContext* ctx,
                                      const v1::AgentEnvelope* call,
                                      v1::AgentEnvelope* answer) override {
    Hear(*ctx, call->SerializeAsString());
    v1::AgentSyncRequest req;
    (void)req.ParseFromString(call->body());
    v1::AgentSyncResponse order = Order();
    answer->set_job_id(call->job_id());
    answer->set_body(order.SerializeAsString());
    answer->set_mac(AgentReplyMac("a guess", req.nonce(), answer->body()));
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerUnaryReactor* AgentSync(grpc::CallbackServerContext* ctx,
                                      const v1::AgentSyncRequest* req,
                                      v1::AgentSyncResponse* resp) override {
    Hear(*ctx, req->SerializeAsString());
    *resp = Order();
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  std::string heard() {
    std::lock_guard lock(mu_);
    return heard_;
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  void Hear(const grpc::CallbackServerContext& ctx, const std::string& body) {
    std::lock_guard lock(mu_);
    ++calls_;
    for (const auto& [k, v] : ctx.client_metadata()) {
      absl::StrAppend(&heard_, std::string(k.data(), k.size()), "=",
                      std::string(v.data(), v.size()), "\n");
    }
    absl::StrAppend(&heard_, body, "\n");
  }
  v1::AgentSyncResponse Order() const {
    v1::AgentSyncResponse resp;
    resp.set_epoch("impostor");
    v1::AgentOrder* order = resp.add_orders();
    order->set_seq(1);
    v1::AgentLaunch* launch = order->mutable_launch();
    launch->set_trial_id(99);
    launch->set_segment(1);
    for (const char* a : {"/bin/sh", "-c"}) launch->add_argv(a);
    launch->add_argv("id > " + marker_);
    launch->set_workdir("/tmp");
    launch->set_stdout_path("/dev/null");
    launch->set_stderr_path("/dev/null");
    launch->set_trial_dir("/tmp");
    return resp;
  }
  std::string marker_;
  std::mutex mu_;
  std::string heard_;
  int calls_ = 0;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hpo-agent-unit-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    // srun's stand-in (the task records what it is).
    ASSERT_TRUE(
        fakes::WriteSrunStandIn(dir_ + "/srun", "SLURMD_NODENAME=n1 SLURM_PROCID=0 SLURM_STEP_ID=7")
            .ok());
    endpoint_file_ = dir_ + "/endpoint";
    Serve();
    Open();
  }
  void TearDown() override {
    backend_.reset();
    if (agent_pid_ > 0) {
      ::kill(agent_pid_, SIGKILL);
      ::waitpid(agent_pid_, nullptr, 0);
    }
    Unserve();
    std::system(("rm -rf " + dir_).c_str());
  }
  // hpod's side: the hub on a fresh port, written to the endpoint file.
  void Serve() {
    hub_ = std::make_unique<AgentHub>(dir_ + "/agents", clock_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(hub_.get());
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(WriteFileAtomic(endpoint_file_, absl::StrCat("127.0.0.1:", port, "\n")).ok());
  }
  void Unserve() {
    if (hub_) hub_->Close();
    if (server_) server_->Shutdown();
    server_.reset();
    hub_.reset();
  }
  // A backend (again, over what `before` knew of the cluster; `tweak` changes the cluster or
  // the options first).
  void Open(const FakeSlurm* before = nullptr,
            const std::function<void(FakeSlurm&, SlurmBackend::Options&)>& tweak = nullptr) {
    auto fake = std::make_unique<FakeSlurm>(canceled_);
    if (before != nullptr) fake->TakeOver(*before);
    slurm_ = fake.get();
    SlurmBackend::Options options;
    options.srun = dir_ + "/srun";
    options.instance = "test";
    options.query_interval = options.fast_query_interval = absl::ZeroDuration();
    options.agent_query_interval = absl::ZeroDuration();
    options.agent.hub = hub_.get();
    options.agent.argv = {HPO_AGENT, "--silence", silence_, "--dir", dir_ + "/agents"};
    options.agent.env["HPO_ENDPOINT_FILE"] = endpoint_file_;
    if (tweak) tweak(*slurm_, options);
    backend_ = std::make_unique<SlurmBackend>(std::move(fake), clock_, options);
    placement_.allocation.gpus_per_node = 4;
    placement_.allocation.cpus_per_node = 8;
    placement_.allocation.max = 1;
  }
  LaunchSpec Spec(int64_t trial, std::vector<std::string> argv) {
    LaunchSpec s;
    s.trial_id = trial;
    s.sweep_id = 1;
    s.argv = std::move(argv);
    s.workdir = dir_;
    s.trial_dir = dir_ + "/t" + std::to_string(trial);
    EXPECT_TRUE(MakeDirs(s.trial_dir).ok());
    s.resources.gpus = 1;
    s.placement = OnSlurm(placement_);
    return s;
  }
  // The allocation runs: slurmctld says so, and its batch script (hpo-agent) starts here, as
  // slurmd would start it, with the job's environment.
  uint32_t Allocate() {
    Resources one;
    one.gpus = 1;
    EXPECT_FALSE(backend_->CanLaunch(1, one, OnSlurm(placement_)));
    backend_->Poll();
    uint32_t id = slurm_->next_id - 1;
    const JobRequest& req = slurm_->jobs.at(id).req;
    EXPECT_THAT(req.script, HasSubstr(absl::StrCat("exec ", HPO_AGENT, " --silence ", silence_)));
    slurm_->Run(id, "n1");
    backend_->Poll();
    backend::SpawnSpec spawn;
    spawn.argv = {"/bin/sh", "-c", req.script};
    for (const std::string& kv : req.environment) {
      size_t eq = kv.find('=');
      spawn.env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    spawn.env["SLURM_JOB_ID"] = std::to_string(id);
    spawn.inherit = [](absl::string_view) { return false; };
    spawn.workdir = dir_;
    spawn.stdout_path = spawn.stderr_path = "/dev/null";  // as hpod submits it
    absl::StatusOr<backend::Spawned> agent = backend::Spawn(spawn);
    EXPECT_TRUE(agent.ok() && agent->exec_errno == 0);
    agent_pid_ = agent.ok() ? agent->pid : 0;
    job_ = id;
    return id;
  }
  // Polls until an end event arrives (or 15 s passed); the others go to `seen`.
  std::optional<BackendEvent> WaitEnd(std::vector<BackendEvent>* seen = nullptr) {
    for (int i = 0; i < 1500; ++i) {
      for (auto& e : backend_->Poll()) {
        if (e.kind == BackendEvent::Kind::kExited || e.kind == BackendEvent::Kind::kLost) return e;
        if (seen != nullptr) seen->push_back(e);
      }
      ::usleep(10'000);
    }
    return std::nullopt;
  }
  // Launches `spec` and waits (3 s at most) until its step runs: the record the backend gives it.
  std::string Started(const LaunchSpec& spec) {
    EXPECT_TRUE(fakes::LaunchNow(*backend_, spec).ok());
    std::string backend_id;
    for (int i = 0; i < 300 && !absl::StrContains(backend_id, " step=7"); ++i) {
      for (auto& e : backend_->Poll()) {
        if (!e.backend_id.empty()) backend_id = e.backend_id;
      }
      ::usleep(10'000);
    }
    return backend_id;
  }
  // hpod goes away, leaving its steps to their agent: what slurmctld knows moves to `cluster`.
  void GoAway(FakeSlurm& cluster) {
    cluster.TakeOver(*slurm_);
    backend_->Detach();
    backend_.reset();
    Unserve();
  }
  // hpod comes back (on another port, which the endpoint file names) and takes the step back:
  // how it ended, as the agent tells it.
  std::optional<BackendEvent> BackForItsEnd(const FakeSlurm& cluster, const LaunchSpec& spec,
                                            const std::string& backend_id) {
    Serve();
    Open(&cluster);
    EXPECT_TRUE(backend_->Adopt(spec, backend_id, "").ok());
    return WaitEnd();
  }
  // What the agent wrote in its log.
  std::string AgentLog() const {
    return ReadFile(absl::StrCat(dir_, "/agents/", job_, ".log")).value_or("");
  }
  // This process's children (the agent, when it runs): a trial's step is none of them.
  static int Children() {
    int n = 0;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
      std::ifstream stat(entry.path() / "stat");
      std::string pid, comm, state;
      long ppid = 0;
      if (stat >> pid >> comm >> state >> ppid && ppid == ::getpid()) ++n;
    }
    return n;
  }

  std::string dir_, endpoint_file_;
  // The agents' --silence (set before Open): long enough that no test but the one about it sees
  // an agent give hpod up, however loaded the machine.
  std::string silence_ = "60s";
  std::vector<uint32_t> canceled_;
  const Clock& clock_ = SystemClock::Get();
  FakeSlurm* slurm_ = nullptr;
  std::unique_ptr<AgentHub> hub_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<SlurmBackend> backend_;
  SlurmPlacement placement_;
  pid_t agent_pid_ = 0;
  uint32_t job_ = 0;
};

TEST_F(AgentTest, TheAllocationsAgentStartsItsStepsAndTellsHowTheyEnd) {
  uint32_t job = Allocate();
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(1, {"sh", "-c", "sleep 0.5; exit 3"})).ok());
  std::vector<BackendEvent> seen;
  // hpod's side holds no process of the step: the agent is this process's only child.
  ::usleep(200'000);
  EXPECT_EQ(Children(), 1);
  std::optional<BackendEvent> end = WaitEnd(&seen);
  ASSERT_TRUE(end.has_value()) << AgentLog();
  EXPECT_EQ(end->kind, BackendEvent::Kind::kExited) << end->message;
  EXPECT_EQ(end->exit_code, 3);
  bool started = false;
  for (const BackendEvent& e : seen) {
    if (e.kind != BackendEvent::Kind::kStarted) continue;
    started = true;
    EXPECT_EQ(e.backend_id, absl::StrCat("slurm:job=", job, " step=pending nodes=n1 agent"));
  }
  EXPECT_TRUE(started);
  // The agent wrote down what it started and saw end.
  std::string journal = ReadFile(absl::StrCat(dir_, "/agents/", job, ".journal")).value_or("");
  EXPECT_THAT(journal, HasSubstr("launch 1 1 "));
  EXPECT_THAT(journal, HasSubstr("end 1 1 3 0 0"));
}

TEST_F(AgentTest, AStepOutlivesHpodAndARestartLearnsItsOutcomeFromTheAgent) {
  uint32_t job = Allocate();
  LaunchSpec spec = Spec(2, {"sh", "-c", "sleep 2; exit 5"});
  std::string backend_id = Started(spec);
  ASSERT_THAT(backend_id, HasSubstr(" agent"));
  // hpod goes away, leaving the step (its journal and the agent's token stay); it comes back
  // on another port, which the endpoint file names.
  FakeSlurm cluster(canceled_);
  GoAway(cluster);
  std::optional<BackendEvent> end = BackForItsEnd(cluster, spec, backend_id);
  ASSERT_TRUE(end.has_value()) << AgentLog();
  EXPECT_EQ(end->kind, BackendEvent::Kind::kExited) << end->message;
  EXPECT_EQ(end->exit_code, 5);
  EXPECT_THAT(AgentLog(), HasSubstr("hpod moved"));
  // Never started twice.
  std::string journal = ReadFile(absl::StrCat(dir_, "/agents/", job, ".journal")).value_or("");
  EXPECT_EQ(journal.find("launch 2 1 "), journal.rfind("launch 2 1 "));
}

TEST_F(AgentTest, AnAgentThatHearsNothingLetsItsStepsFinishThenEndsItsAllocation) {
  silence_ = "3s";
  Open();
  Allocate();
  LaunchSpec spec = Spec(3, {"sh", "-c", "sleep 5; echo done > done"});
  ASSERT_TRUE(fakes::LaunchNow(*backend_, spec).ok());
  for (int i = 0; i < 100 && !std::filesystem::exists(spec.trial_dir + "/hpo.pid"); ++i) {
    backend_->Poll();
    ::usleep(20'000);
  }
  backend_->Detach();
  backend_.reset();
  Unserve();  // hpod is gone for good; the agent's --silence is 3 s
  absl::Time gone = absl::Now();
  int status = 0;
  ASSERT_EQ(::waitpid(agent_pid_, &status, 0), agent_pid_);
  agent_pid_ = 0;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Not before its step finished.
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/done")) << AgentLog();
  EXPECT_GE(absl::Now() - gone, absl::Seconds(3));
  EXPECT_THAT(AgentLog(), HasSubstr("ending the allocation"));
}

TEST_F(AgentTest, AnAllocationHpodIsDoneWithIsEndedByItsAgentNotByACancel) {
  uint32_t job = Allocate();
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(4, {"true"})).ok());
  ASSERT_TRUE(WaitEnd().has_value()) << AgentLog();
  backend_->SweepEnded(1);
  // The agent hears that hpod released the allocation, and its batch script ends.
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 500 && done == 0; ++i) {
    backend_->Poll();
    done = ::waitpid(agent_pid_, &status, WNOHANG);
    ::usleep(10'000);
  }
  ASSERT_EQ(done, agent_pid_) << "the agent did not end its allocation";
  agent_pid_ = 0;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_THAT(canceled_, ::testing::Not(::testing::Contains(job)));
  EXPECT_FALSE(std::filesystem::exists(absl::StrCat(dir_, "/agents/", job, ".token")));
}

TEST_F(AgentTest, AnImpostorAtHpodsAddressGetsNoTokenAndStartsNothingWhileTheStepsGoOn) {
  uint32_t job = Allocate();
  LaunchSpec spec = Spec(5, {"sh", "-c", "sleep 4; echo done > done5"});
  std::string backend_id = Started(spec);
  ASSERT_THAT(backend_id, HasSubstr(" agent")) << AgentLog();
  std::string token =
      ReadFile(absl::StrCat(dir_, "/agents/", job, ".token")).value_or("no token file");
  token = std::string(absl::StripAsciiWhitespace(token));
  // hpod goes away; a stranger answers at the address the agent follows.
  FakeSlurm cluster(canceled_);
  GoAway(cluster);
  std::string marker = dir_ + "/impostor-ran";
  Impostor impostor(marker);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&impostor);
  std::unique_ptr<grpc::Server> stranger = builder.BuildAndStart();
  ASSERT_TRUE(WriteFileAtomic(endpoint_file_, absl::StrCat("127.0.0.1:", port, "\n")).ok());
  // Two calls at least: the answer to the first was refused, and the agent went on calling.
  for (int i = 0; i < 1500 && impostor.calls() < 2; ++i) ::usleep(10'000);
  ASSERT_GE(impostor.calls(), 2) << AgentLog();
  EXPECT_THAT(impostor.heard(), ::testing::Not(HasSubstr(token)));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the agent ran the impostor's order";
  EXPECT_THAT(AgentLog(), HasSubstr("answered without proof that it is hpod"));
  EXPECT_THAT(AgentLog(), ::testing::Not(HasSubstr("trial 99")));
  stranger->Shutdown();
  // hpod comes back: the step went on meanwhile, and its end is told.
  std::optional<BackendEvent> end = BackForItsEnd(cluster, spec, backend_id);
  ASSERT_TRUE(end.has_value()) << AgentLog();
  EXPECT_EQ(end->kind, BackendEvent::Kind::kExited) << end->message;
  EXPECT_EQ(end->exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/done5"));
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST_F(AgentTest, WhileItsAgentWatchesAnAllocationSlurmctldIsAskedOnlyNowAndThen) {
  Open(nullptr, [](FakeSlurm& slurm, SlurmBackend::Options& options) {
    PartitionLimits debug;  // the default partition, without a time limit
    debug.name = "debug";
    debug.is_default = true;
    slurm.partitions = {debug};
    options.agent_query_interval = absl::Hours(1);
  });
  EXPECT_EQ(slurm_->partition_queries, 1) << "read once, when the backend opens";
  uint32_t job = Allocate();
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(1, {"sh", "-c", "sleep 1"})).ok());
  for (int i = 0; i < 500 && !hub_->InTouch(job, clock_.Now()); ++i) {
    backend_->Poll();
    ::usleep(10'000);
  }
  ASSERT_TRUE(hub_->InTouch(job, clock_.Now())) << AgentLog();
  int asked = slurm_->queries;
  std::optional<BackendEvent> end = WaitEnd();
  ASSERT_TRUE(end.has_value()) << AgentLog();
  EXPECT_EQ(end->kind, BackendEvent::Kind::kExited);
  EXPECT_EQ(slurm_->queries, asked) << "its agent said how the step ended; slurmctld was not asked";
  // A step that ends badly may have been ended by a preemption, which only slurmctld says: its
  // end waits for slurmctld's next answer.
  ASSERT_TRUE(fakes::LaunchNow(*backend_, Spec(2, {"sh", "-c", "exit 3"})).ok());
  end = WaitEnd();
  ASSERT_TRUE(end.has_value()) << AgentLog();
  EXPECT_EQ(end->exit_code, 3);
  EXPECT_GT(slurm_->queries, asked);
}

// An AgentHub served on a loopback port, and a stub that calls it.
struct ServedHub {
  ServedHub(const std::string& dir, const Clock& clock) : hub(dir, clock) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&hub);
    server = builder.BuildAndStart();
    stub = v1::AgentService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  AgentHub hub;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::AgentService::Stub> stub;
};

TEST(AgentHubTest, OnlyTheAllocationsOwnTokenIsHeardAndItOutlivesARestart) {
  char tmpl[] = "/tmp/hpo-agent-hub-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  {
    AgentHub hub(dir, SystemClock::Get());
    ASSERT_TRUE(hub.Admit(42, "secret").ok());
    EXPECT_TRUE(hub.Admitted(42));
    EXPECT_FALSE(hub.Admitted(43));
  }
  ServedHub served(dir, SystemClock::Get());  // a restarted hpod
  AgentHub& hub = served.hub;
  auto& stub = served.stub;
  EXPECT_TRUE(hub.Admitted(42));
  auto sync = [&](uint32_t job, const std::string& token, uint64_t applied,
                  const std::string& epoch, v1::AgentSyncResponse* resp) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    v1::AgentSyncRequest req;
    req.set_job_id(job);
    req.set_applied(applied);
    req.set_epoch(epoch);
    v1::AgentStep* s = req.add_steps();
    s->set_trial_id(7);
    s->set_segment(1);
    s->set_ended(true);
    return stub->AgentSync(&ctx, req, resp);
  };
  v1::AgentSyncResponse resp;
  EXPECT_EQ(sync(42, "wrong", 0, "", &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(sync(43, "secret", 0, "", &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Orders queued before the call are answered at once, numbered; what the agent applied of
  // this run goes; an ended step the backend took is acknowledged.
  v1::AgentOrder launch;
  launch.mutable_launch()->set_trial_id(7);
  uint64_t first = hub.Order(42, launch);
  uint64_t second = hub.Order(42, launch);
  EXPECT_LT(first, second);
  ASSERT_TRUE(sync(42, "secret", 0, "", &resp).ok());
  ASSERT_EQ(resp.orders_size(), 2);
  std::string epoch = resp.epoch();
  EXPECT_FALSE(hub.Applied(42, first));
  resp.Clear();
  hub.Acknowledge(42, 7, 1);
  ASSERT_TRUE(sync(42, "secret", first, epoch, &resp).ok());
  ASSERT_EQ(resp.orders_size(), 1);
  EXPECT_EQ(resp.orders(0).seq(), second);
  EXPECT_TRUE(hub.Applied(42, first));
  ASSERT_EQ(resp.acknowledged_size(), 1);
  EXPECT_EQ(resp.acknowledged(0).trial_id(), 7);
  std::vector<AgentHub::Heard> heard = hub.TakeHeard();
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0].job_id, 42u);
  EXPECT_EQ(heard[0].steps.size(), 1u);
  // Applied orders of another run count for nothing in this one.
  resp.Clear();
  ASSERT_TRUE(sync(42, "secret", second, "another-run", &resp).ok());
  EXPECT_EQ(resp.orders_size(), 1);

  // The agent's own call: the token is never sent; hpod's answer proves itself over the call.
  int64_t sent = absl::ToUnixMillis(absl::Now());
  auto call = [&](uint32_t job, const std::string& token, int64_t at, const std::string& nonce,
                  v1::AgentEnvelope* answer) {
    v1::AgentSyncRequest req;
    req.set_job_id(job);
    req.set_nonce(nonce);
    req.set_sent_unix_ms(at);
    v1::AgentEnvelope env;
    env.set_job_id(job);
    env.set_body(req.SerializeAsString());
    env.set_mac(AgentRequestMac(token, env.body()));
    grpc::ClientContext ctx;
    return stub->AgentCall(&ctx, env, answer);
  };
  v1::AgentEnvelope answer;
  EXPECT_EQ(call(42, "wrong", sent, "n1", &answer).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE(call(42, "secret", sent, "n1", &answer).ok());
  EXPECT_TRUE(ProofsEqual(answer.mac(), AgentReplyMac("secret", "n1", answer.body())));
  EXPECT_FALSE(ProofsEqual(answer.mac(), AgentReplyMac("secret", "n2", answer.body())));
  v1::AgentSyncResponse inner;
  ASSERT_TRUE(inner.ParseFromString(answer.body()));
  EXPECT_EQ(inner.epoch(), epoch);
  // The same call again (a replay), or one dated long ago, is refused.
  EXPECT_EQ(call(42, "secret", sent, "n1", &answer).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call(42, "secret", sent - 3'600'000, "n3", &answer).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE(call(42, "secret", sent + 1, "n4", &answer).ok());
  // A released allocation is told so inside the proven answer.
  hub.Release(42);
  answer.Clear();
  ASSERT_TRUE(call(42, "secret", sent + 2, "n5", &answer).ok());
  EXPECT_TRUE(ProofsEqual(answer.mac(), AgentReplyMac("secret", "n5", answer.body())));
  inner.Clear();
  ASSERT_TRUE(inner.ParseFromString(answer.body()));
  EXPECT_TRUE(inner.released());
  hub.Close();
  served.server->Shutdown();
  hub.Forget(42);
  EXPECT_FALSE(std::filesystem::exists(dir + "/42.token"));
  std::filesystem::remove_all(dir);
}

TEST(AgentHubTest, InTouchSinceCountsFromTheAgentsReturnAfterASilence) {
  char tmpl[] = "/tmp/hpo-agent-hub-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  FakeClock clock;
  ServedHub served(dir, clock);
  AgentHub& hub = served.hub;
  ASSERT_TRUE(hub.Admit(42, "secret").ok());
  auto sync = [&] {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer secret");
    v1::AgentSyncRequest req;
    req.set_job_id(42);
    v1::AgentSyncResponse resp;
    return served.stub->AgentSync(&ctx, req, &resp).ok();
  };
  EXPECT_FALSE(hub.InTouchSince(42, clock.Now()).has_value()) << "never heard";
  absl::Time first = clock.Now();
  ASSERT_TRUE(sync());
  EXPECT_EQ(hub.InTouchSince(42, clock.Now()), first);
  clock.Advance(absl::Seconds(20));
  ASSERT_TRUE(sync());
  EXPECT_EQ(hub.InTouchSince(42, clock.Now()), first) << "heard again within its wait: no break";
  clock.Advance(absl::Minutes(2));
  EXPECT_FALSE(hub.InTouchSince(42, clock.Now()).has_value()) << "silent: out of touch";
  ASSERT_TRUE(sync());
  EXPECT_EQ(hub.InTouchSince(42, clock.Now()), clock.Now()) << "counted from its return";
  hub.Close();
  served.server->Shutdown();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hpo::slurm
