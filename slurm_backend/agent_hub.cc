#include "slurm_backend/agent_hub.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/layout.h"
#include "common/proofs.h"
#include "common/token.h"
#include "spdlog/spdlog.h"

namespace hpo::slurm {

namespace {

std::string BearerToken(const grpc::ServerContextBase& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return "";
  absl::string_view v(it->second.data(), it->second.size());
  if (!absl::ConsumePrefix(&v, "Bearer ")) return "";
  return std::string(v);
}

}  // namespace

AgentHub::AgentHub(std::string dir, const Clock& clock)
    : dir_(std::move(dir)), clock_(clock), epoch_(RandomHex(8)) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    std::string name = entry.path().filename().string();
    absl::string_view id = name;
    uint32_t job_id = 0;
    if (!absl::ConsumeSuffix(&id, layout::kAgentTokenSuffix) || !absl::SimpleAtoi(id, &job_id)) {
      continue;
    }
    absl::StatusOr<std::string> token = ReadFile(entry.path().string());
    if (!token.ok()) continue;
    agents_[job_id].token = std::string(absl::StripAsciiWhitespace(*token));
  }
  expirer_ = std::thread([this] { Expire(); });
}

AgentHub::~AgentHub() {
  Close();
  expirer_.join();
}

void AgentHub::Close() {
  std::vector<Pending*> finish;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [job_id, agent] : agents_) {
      if (!agent.held) continue;
      AnswerLocked(agent, agent.held->call->resp);
      finish.push_back(agent.held->call);
      agent.held.reset();
    }
  }
  cv_.notify_all();
  for (Pending* call : finish) Finish(call, grpc::Status::OK);
}

void AgentHub::Finish(Pending* call, grpc::Status status) {
  if (call->sealed != nullptr && status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
    call->resp->set_released(true);  // said in the sealed answer, where an impostor cannot
    status = grpc::Status::OK;
  }
  if (call->sealed != nullptr && status.ok()) {
    std::string body = call->resp->SerializeAsString();
    call->sealed->set_mac(AgentReplyMac(call->token, call->nonce, body));
    call->sealed->set_body(std::move(body));
  }
  call->reactor->Finish(status);
  delete call;
}

std::string AgentHub::TokenPath(uint32_t job_id) const {
  return absl::StrCat(dir_, "/", job_id, layout::kAgentTokenSuffix);
}

absl::Status AgentHub::Admit(uint32_t job_id, const std::string& token) {
  if (absl::Status s = MakeDirs(dir_, 0700); !s.ok()) return s;
  if (absl::Status s = WriteFileAtomic(TokenPath(job_id), token + "\n", 0600); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  agents_[job_id].token = token;
  return absl::OkStatus();
}

bool AgentHub::Admitted(uint32_t job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return agents_.count(job_id) > 0;
}

void AgentHub::Forget(uint32_t job_id) { Drop(job_id, false); }

void AgentHub::Release(uint32_t job_id) { Drop(job_id, true); }

void AgentHub::Drop(uint32_t job_id, bool release) {
  ::unlink(TokenPath(job_id).c_str());
  ::unlink(absl::StrCat(dir_, "/", job_id, layout::kAgentJournalSuffix).c_str());
  ::unlink(absl::StrCat(dir_, "/", job_id, layout::kAgentLogSuffix).c_str());
  Pending* finish = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = agents_.find(job_id);
    if (it == agents_.end()) return;
    if (it->second.held) {
      finish = it->second.held->call;
      it->second.held.reset();
    }
    if (release) released_[job_id] = it->second.token;
    agents_.erase(it);
    heard_.erase(job_id);
  }
  if (finish != nullptr) Finish(finish, Released(job_id, release));
}

grpc::Status AgentHub::Released(uint32_t job_id, bool released) {
  if (!released) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat("hpod holds no allocation ", job_id));
  }
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      absl::StrCat("hpod released allocation ", job_id));
}

uint64_t AgentHub::Order(uint32_t job_id, v1::AgentOrder order) {
  Pending* finish = nullptr;
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = next_seq_++;
    order.set_seq(seq);
    Agent& agent = agents_[job_id];
    agent.orders.push_back(std::move(order));
    if (agent.held) {
      AnswerLocked(agent, agent.held->call->resp);
      finish = agent.held->call;
      agent.held.reset();
    }
  }
  if (finish != nullptr) Finish(finish, grpc::Status::OK);
  return seq;
}

bool AgentHub::Applied(uint32_t job_id, uint64_t seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(job_id);
  return it != agents_.end() && it->second.applied >= seq;
}

std::vector<AgentHub::Heard> AgentHub::TakeHeard() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Heard> out;
  for (auto& [job_id, heard] : heard_) out.push_back(std::move(heard));
  heard_.clear();
  std::sort(out.begin(), out.end(), [](const Heard& a, const Heard& b) { return a.at < b.at; });
  return out;
}

std::optional<absl::Time> AgentHub::LastHeard(uint32_t job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(job_id);
  return it == agents_.end() ? std::nullopt : it->second.heard;
}

bool AgentHub::InTouch(uint32_t job_id, absl::Time now) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(job_id);
  if (it == agents_.end()) return false;
  return InTouchLocked(it->second, now);
}

bool AgentHub::InTouchLocked(const Agent& agent, absl::Time now) {
  return agent.held.has_value() ||
         (agent.heard && now - *agent.heard <= kMaxWait + absl::Seconds(10));
}

std::optional<absl::Time> AgentHub::InTouchSince(uint32_t job_id, absl::Time now) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(job_id);
  if (it == agents_.end() || !InTouchLocked(it->second, now)) return std::nullopt;
  return it->second.in_touch_since;
}

void AgentHub::Acknowledge(uint32_t job_id, int64_t trial_id, int segment) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(job_id);
  if (it != agents_.end()) it->second.acknowledged.insert({trial_id, segment});
}

void AgentHub::SetEndpoint(std::string endpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  endpoint_ = std::move(endpoint);
}

std::string AgentHub::Endpoint() const {
  std::lock_guard<std::mutex> lock(mu_);
  return endpoint_;
}

void AgentHub::SetWakeup(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  wake_ = std::move(wake);
}

void AgentHub::AnswerLocked(const Agent& agent, v1::AgentSyncResponse* resp) const {
  resp->set_epoch(epoch_);
  for (const v1::AgentOrder& o : agent.orders) *resp->add_orders() = o;
  for (const auto& [trial_id, segment] : agent.acknowledged) {
    v1::AgentStep* s = resp->add_acknowledged();
    s->set_trial_id(trial_id);
    s->set_segment(segment);
  }
}

grpc::ServerUnaryReactor* AgentHub::AgentCall(grpc::CallbackServerContext* ctx,
                                              const v1::AgentEnvelope* call,
                                              v1::AgentEnvelope* answer) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  uint32_t job_id = call->job_id();
  std::string token;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = agents_.find(job_id); it != agents_.end()) {
      token = it->second.token;
    } else if (auto gone = released_.find(job_id); gone != released_.end()) {
      token = gone->second;
    }
  }
  auto refuse = [&](const std::string& why) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, why));
    return reactor;
  };
  if (token.empty() || !ProofsEqual(call->mac(), AgentRequestMac(token, call->body()))) {
    return refuse(absl::StrCat("hpod holds no allocation ", job_id, " with this agent token"));
  }
  v1::AgentSyncRequest req;
  if (!req.ParseFromString(call->body()) || req.job_id() != job_id || req.nonce().empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 absl::StrCat("allocation ", job_id, ": a malformed agent call")));
    return reactor;
  }
  absl::Duration skew = absl::Milliseconds(req.sent_unix_ms()) - (clock_.Now() - absl::UnixEpoch());
  if (absl::AbsDuration(skew) > kCallSkew) {
    return refuse(absl::StrCat("allocation ", job_id, ": the agent's call is dated ",
                               absl::FormatDuration(absl::Trunc(skew, absl::Seconds(1))),
                               " from hpod's clock (a replay, or clocks that disagree; they must "
                               "agree within ",
                               absl::FormatDuration(kCallSkew), ")"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = agents_.find(job_id); it != agents_.end()) {
      if (req.sent_unix_ms() <= it->second.last_call_ms) {
        reactor->Finish(grpc::Status(
            grpc::StatusCode::UNAUTHENTICATED,
            absl::StrCat("allocation ", job_id, ": an agent call heard before (a replay)")));
        return reactor;
      }
      it->second.last_call_ms = req.sent_unix_ms();
    }
  }
  auto* pending = new Pending;
  pending->reactor = reactor;
  pending->resp = &pending->inner;
  pending->sealed = answer;
  pending->token = token;
  pending->nonce = req.nonce();
  answer->set_job_id(job_id);
  Sync(req, token, /*proven=*/true, pending);
  return reactor;
}

grpc::ServerUnaryReactor* AgentHub::AgentSync(grpc::CallbackServerContext* ctx,
                                              const v1::AgentSyncRequest* req,
                                              v1::AgentSyncResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto* pending = new Pending;
  pending->reactor = reactor;
  pending->resp = resp;
  Sync(*req, BearerToken(*ctx), /*proven=*/false, pending);  // may finish (and delete) it
  return reactor;
}

void AgentHub::Sync(const v1::AgentSyncRequest& req, const std::string& token, bool proven,
                    Pending* call) {
  Pending* superseded = nullptr;
  std::function<void()> wake;
  bool hold = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = agents_.find(req.job_id());
    if (it == agents_.end() && released_.count(req.job_id()) > 0) {
      Finish(call, Released(req.job_id(), true));
      return;
    }
    if (it == agents_.end() || it->second.token.empty() ||
        (!proven && (token.empty() || !TokensEqual(it->second.token, token)))) {
      Finish(call, grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                absl::StrCat("hpod holds no allocation ", req.job_id(),
                                             " with this agent token")));
      return;
    }
    Agent& agent = it->second;
    absl::Time now = clock_.Now();
    if (!agent.heard) {
      spdlog::info("the agent of Slurm allocation {} on {} is in touch ({} step(s){})",
                   req.job_id(), req.host(), req.steps_size(),
                   proven ? "" : "; an agent of an older release, without proofs");
    }
    if (!InTouchLocked(agent, now)) agent.in_touch_since = now;
    agent.heard = now;
    if (req.epoch() == epoch_ && req.applied() > agent.applied) agent.applied = req.applied();
    while (!agent.orders.empty() && agent.orders.front().seq() <= agent.applied) {
      agent.orders.erase(agent.orders.begin());
    }
    // What the agent no longer lists needs no acknowledgement.
    std::set<std::pair<int64_t, int>> listed;
    for (const v1::AgentStep& s : req.steps()) listed.insert({s.trial_id(), s.segment()});
    for (auto a = agent.acknowledged.begin(); a != agent.acknowledged.end();) {
      a = listed.count(*a) ? std::next(a) : agent.acknowledged.erase(a);
    }
    Heard& heard = heard_[req.job_id()];
    heard.job_id = req.job_id();
    heard.host = req.host();
    heard.nodelist = req.nodelist();
    heard.steps.assign(req.steps().begin(), req.steps().end());
    heard.at = now;
    wake = wake_;
    if (agent.held) {
      AnswerLocked(agent, agent.held->call->resp);
      superseded = agent.held->call;
      agent.held.reset();
    }
    absl::Duration wait =
        std::clamp(absl::Milliseconds(req.wait_ms()), absl::ZeroDuration(), kMaxWait);
    if (agent.orders.empty() && wait > absl::ZeroDuration() && !stopping_) {
      hold = true;
      agent.held = Held{call, std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(wait)};
    } else {
      AnswerLocked(agent, call->resp);
    }
  }
  if (superseded != nullptr) Finish(superseded, grpc::Status::OK);  // answered empty
  if (hold) {
    cv_.notify_all();
  } else {
    Finish(call, grpc::Status::OK);
  }
  if (wake) wake();
}

void AgentHub::Expire() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    auto next = std::chrono::steady_clock::time_point::max();
    auto now = std::chrono::steady_clock::now();
    std::vector<Pending*> finish;
    for (auto& [job_id, agent] : agents_) {
      if (!agent.held) continue;
      if (agent.held->until <= now) {
        AnswerLocked(agent, agent.held->call->resp);
        finish.push_back(agent.held->call);
        agent.held.reset();
      } else {
        next = std::min(next, agent.held->until);
      }
    }
    if (!finish.empty()) {
      lock.unlock();
      for (Pending* call : finish) Finish(call, grpc::Status::OK);
      lock.lock();
      continue;
    }
    if (next == std::chrono::steady_clock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, next);
    }
  }
}

}  // namespace hpo::slurm
