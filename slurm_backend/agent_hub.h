#pragma once
// AgentHub: where hpod meets the hpo-agent of each Slurm allocation it holds (steps mode), and
// the gRPC service (AgentService) the agents call.
//
// Each allocation hpod requests runs hpo-agent as its batch script (agent/hpo_agent.cc), with a
// token of its own (HPO_AGENT_TOKEN) made for that allocation alone and kept in
// DATA_DIR/agents/JOB.token (mode 0600), so that a restarted hpod knows its agents again. The
// token never crosses the network: the agent calls AgentCall, whose call and answer each carry an
// HMAC of what they say under it (common/proofs.h), so that the agent obeys hpod alone and hpod
// hears the agent alone; a call made long ago or already heard is refused (its time, in the call,
// must be within kCallSkew of hpod's clock and later than the agent's last). AgentSync, the same
// call with the token as a bearer and no proofs, stays for agents of older releases. The agent
// calls in a loop: it hands over the whole table of the steps it started and
// has not been told to forget, and takes the orders (launch a step, signal one) hpod queued for
// its allocation after the last it applied. hpod holds the call while it has no order (a long
// poll of at most `wait_ms`), so an order reaches the agent at once; a newer call of the same
// agent answers the one it holds.
//
// Orders are numbered per run of hpod (its epoch): an agent that reports the orders of another
// run as applied has applied none of this one's, and the agent itself never starts a step
// (trial and segment) twice. An ended step is acknowledged (Acknowledge) once the backend
// took its outcome, and the agent forgets it when it sees the acknowledgement.
//
// Thread safety: thread-safe. The backend calls Admit, Order, TakeHeard and Acknowledge on the
// controller's thread; gRPC calls AgentSync on its own.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "hpo/v1/hpo.grpc.pb.h"

namespace hpo::slurm {

class AgentHub final : public v1::AgentService::CallbackService {
 public:
  // `dir`: DATA_DIR/agents; the tokens there are read now.
  AgentHub(std::string dir, const Clock& clock);
  // Close()s.
  ~AgentHub() override;
  // Answers the calls it holds, and holds none from now on: before the gRPC server shuts down.
  void Close();
  AgentHub(const AgentHub&) = delete;
  AgentHub& operator=(const AgentHub&) = delete;

  // Allocation `job_id`'s agent may call with `token` (written down first, so that a restart
  // knows it).
  [[nodiscard]] absl::Status Admit(uint32_t job_id, const std::string& token);
  bool Admitted(uint32_t job_id) const;
  // The allocation is gone: its token, journal and log go, and so do its orders.
  void Forget(uint32_t job_id);
  // hpod is done with the allocation: as Forget, and its agent is told so (FAILED_PRECONDITION,
  // at once if it waits in a call), upon which it ends, and with it the allocation.
  void Release(uint32_t job_id);
  // Queues an order for the allocation's agent; returns its number.
  uint64_t Order(uint32_t job_id, v1::AgentOrder order);
  // Whether the agent said it applied order `seq` of this run.
  bool Applied(uint32_t job_id, uint64_t seq) const;

  // What an agent said in a call.
  struct Heard {
    uint32_t job_id = 0;
    std::string host;
    std::string nodelist;  // the allocation's nodes, as Slurm writes them ("n[1-2]")
    std::vector<v1::AgentStep> steps;
    absl::Time at;
  };
  // The agents heard since the last call (the latest of each), oldest first.
  std::vector<Heard> TakeHeard();
  // When the allocation's agent was last heard, or nullopt: never by this run of hpod.
  std::optional<absl::Time> LastHeard(uint32_t job_id) const;
  // Whether the allocation's agent is in touch at `now`: hpod holds its call, or heard it within
  // kMaxWait and a margin (an agent calls again as soon as a held call is answered).
  bool InTouch(uint32_t job_id, absl::Time now) const;
  // Since when it has been in touch without a break, up to `now`; nullopt when it is not now.
  std::optional<absl::Time> InTouchSince(uint32_t job_id, absl::Time now) const;
  // The backend took this ended step's outcome: the agent may forget it.
  void Acknowledge(uint32_t job_id, int64_t trial_id, int segment);
  // Where hpod listens (HPO_ENDPOINT in the allocations it requests from now on); the agents
  // look in the data directory's endpoint file first, when their node sees it.
  void SetEndpoint(std::string endpoint);
  std::string Endpoint() const;
  const std::string& dir() const { return dir_; }
  // Called (on gRPC's thread) after each call that brought something new.
  void SetWakeup(std::function<void()> wake);

  grpc::ServerUnaryReactor* AgentCall(grpc::CallbackServerContext* ctx,
                                      const v1::AgentEnvelope* call,
                                      v1::AgentEnvelope* answer) override;
  grpc::ServerUnaryReactor* AgentSync(grpc::CallbackServerContext* ctx,
                                      const v1::AgentSyncRequest* req,
                                      v1::AgentSyncResponse* resp) override;

  // The longest hpod holds a call.
  static constexpr absl::Duration kMaxWait = absl::Seconds(30);
  // How far an AgentCall's time may be from hpod's clock.
  static constexpr absl::Duration kCallSkew = absl::Minutes(5);

 private:
  // A call being answered: AgentSync's plain answer, or AgentCall's, sealed with the proof.
  struct Pending {
    grpc::ServerUnaryReactor* reactor = nullptr;
    v1::AgentSyncResponse* resp = nullptr;  // the answer being made (`inner` for AgentCall)
    v1::AgentEnvelope* sealed = nullptr;    // AgentCall: where the sealed answer goes
    v1::AgentSyncResponse inner;
    std::string token, nonce;
  };
  // Answers the call (sealing an AgentCall's answer; its "released" goes in the sealed body) and
  // deletes it.
  static void Finish(Pending* call, grpc::Status status);
  struct Held {
    Pending* call = nullptr;
    std::chrono::steady_clock::time_point until;
  };
  struct Agent {
    std::string token;
    std::vector<v1::AgentOrder> orders;  // not applied yet, oldest first
    uint64_t applied = 0;                // of this run
    std::set<std::pair<int64_t, int>> acknowledged;
    std::optional<Held> held;
    std::optional<absl::Time> heard;
    absl::Time in_touch_since;  // when it was heard after a silence (or first)
    int64_t last_call_ms = 0;   // the time of the last AgentCall heard: later ones only
  };
  // One call of an agent, whose token (or proof) checked when `proven`.
  void Sync(const v1::AgentSyncRequest& req, const std::string& token, bool proven, Pending* call);
  // Fills `resp` with the agent's orders and acknowledgements.
  void AnswerLocked(const Agent& agent, v1::AgentSyncResponse* resp) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // InTouch, of an agent hpod holds.
  static bool InTouchLocked(const Agent& agent, absl::Time now);
  void Expire();
  std::string TokenPath(uint32_t job_id) const;
  void Drop(uint32_t job_id, bool release);
  // What an agent hpod no longer holds is told: released by hpod, or unknown.
  static grpc::Status Released(uint32_t job_id, bool released);

  const std::string dir_;
  const Clock& clock_;
  const std::string epoch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint32_t, Agent> agents_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, Heard> heard_ ABSL_GUARDED_BY(mu_);
  // Told to end (Release), with their tokens, to prove that answer too.
  std::map<uint32_t, std::string> released_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> wake_ ABSL_GUARDED_BY(mu_);
  std::string endpoint_ ABSL_GUARDED_BY(mu_);
  std::thread expirer_;
};

}  // namespace hpo::slurm
