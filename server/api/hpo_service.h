#pragma once
// The gRPC services of hpod over the callback API. Handlers check the caller's token, validate
// what they can without state, then post the work to the controller and finish their reactor
// when the controller's batch has committed. They never block on SQLite or the backend.
//
// Auth: HpoService calls need a user's token (server/auth.h: the owner's, or one of
// DATA_DIR/users/NAME.token), and every handler names what it needs (a Need: an action on a
// sweep or trial), which the gate decides before the handler's work runs; ReportService calls
// need the trial's own token; both as "authorization: Bearer <token>" metadata.

#include <memory>
#include <string>

#include "grpcpp/server_builder.h"
#include "hpo/v1/hpo.grpc.pb.h"
#include "server/core/controller.h"
#include "server/core/trial_files.h"

namespace hpo::server {

class HpoServiceImpl final : public v1::HpoService::CallbackService {
 public:
  // Callers are found in `tokens`. Log tails are read through `files`, off the controller's
  // thread.
  HpoServiceImpl(Controller& controller, TrialFiles& files, TokenTable& tokens)
      : controller_(controller), files_(files), tokens_(tokens) {}

  grpc::ServerUnaryReactor* ValidateSweep(grpc::CallbackServerContext* ctx,
                                          const v1::ValidateSweepRequest* req,
                                          v1::ValidateSweepResponse* resp) override;
  grpc::ServerUnaryReactor* SubmitSweep(grpc::CallbackServerContext* ctx,
                                        const v1::SubmitSweepRequest* req,
                                        v1::SubmitSweepResponse* resp) override;
  grpc::ServerUnaryReactor* GetSweep(grpc::CallbackServerContext* ctx,
                                     const v1::GetSweepRequest* req,
                                     v1::GetSweepResponse* resp) override;
  grpc::ServerUnaryReactor* ListSweeps(grpc::CallbackServerContext* ctx,
                                       const v1::ListSweepsRequest* req,
                                       v1::ListSweepsResponse* resp) override;
  grpc::ServerUnaryReactor* CancelSweep(grpc::CallbackServerContext* ctx,
                                        const v1::CancelSweepRequest* req,
                                        v1::CancelSweepResponse* resp) override;
  grpc::ServerUnaryReactor* PauseSweep(grpc::CallbackServerContext* ctx,
                                       const v1::PauseSweepRequest* req,
                                       v1::PauseSweepResponse* resp) override;
  grpc::ServerUnaryReactor* ResumeSweep(grpc::CallbackServerContext* ctx,
                                        const v1::ResumeSweepRequest* req,
                                        v1::ResumeSweepResponse* resp) override;
  grpc::ServerUnaryReactor* PlanSweep(grpc::CallbackServerContext* ctx,
                                      const v1::PlanSweepRequest* req,
                                      v1::PlanSweepResponse* resp) override;
  grpc::ServerUnaryReactor* AllowNode(grpc::CallbackServerContext* ctx,
                                      const v1::AllowNodeRequest* req,
                                      v1::AllowNodeResponse* resp) override;
  grpc::ServerUnaryReactor* ExtendSweep(grpc::CallbackServerContext* ctx,
                                        const v1::ExtendSweepRequest* req,
                                        v1::ExtendSweepResponse* resp) override;
  grpc::ServerUnaryReactor* Enqueue(grpc::CallbackServerContext* ctx, const v1::EnqueueRequest* req,
                                    v1::EnqueueResponse* resp) override;
  grpc::ServerUnaryReactor* Ask(grpc::CallbackServerContext* ctx, const v1::AskRequest* req,
                                v1::AskResponse* resp) override;
  grpc::ServerUnaryReactor* Tell(grpc::CallbackServerContext* ctx, const v1::TellRequest* req,
                                 v1::TellResponse* resp) override;
  grpc::ServerUnaryReactor* RemoveSweep(grpc::CallbackServerContext* ctx,
                                        const v1::RemoveSweepRequest* req,
                                        v1::RemoveSweepResponse* resp) override;
  grpc::ServerUnaryReactor* ListTrials(grpc::CallbackServerContext* ctx,
                                       const v1::ListTrialsRequest* req,
                                       v1::ListTrialsResponse* resp) override;
  grpc::ServerUnaryReactor* GetTrial(grpc::CallbackServerContext* ctx,
                                     const v1::GetTrialRequest* req,
                                     v1::GetTrialResponse* resp) override;
  grpc::ServerUnaryReactor* TailTrialLog(grpc::CallbackServerContext* ctx,
                                         const v1::TailTrialLogRequest* req,
                                         v1::TailTrialLogResponse* resp) override;
  grpc::ServerWriteReactor<v1::Event>* WatchSweep(grpc::CallbackServerContext* ctx,
                                                  const v1::WatchSweepRequest* req) override;
  grpc::ServerUnaryReactor* DashboardLogin(grpc::CallbackServerContext* ctx,
                                           const v1::DashboardLoginRequest* req,
                                           v1::DashboardLoginResponse* resp) override;
  // How DashboardLogin makes a login link for a caller (the dashboard's IssueLogin); unset: this
  // hpod serves no dashboard.
  void set_dashboard_login(std::function<std::string(const Caller&)> login) {
    dashboard_login_ = std::move(login);
  }

 private:
  // The caller, or nullopt after finishing `reactor` with UNAUTHENTICATED.
  std::optional<Caller> Authorized(grpc::CallbackServerContext* ctx,
                                   grpc::ServerUnaryReactor* reactor) const;
  // Posts the gate's decision on `need` and, when it allows, `fn(allowed)` (returning
  // absl::Status, filling the response); finishes after commit. `writes` false (Read): the reply
  // does not depend on the batch's commit, so reads still work while hpod cannot write its
  // store.
  template <typename Fn>
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* ctx, Need need, Fn fn,
                                bool writes = true);
  template <typename Fn>
  grpc::ServerUnaryReactor* Read(grpc::CallbackServerContext* ctx, Need need, Fn fn) {
    return Run(ctx, need, std::move(fn), false);
  }
  // Run for a verb that answers through a Controller::Reply (Validate, Submit): `fn(allowed,
  // reply)` returns what the controller returned; `fill(answer)` fills the response before the
  // reply finishes, after its batch's commit (`writes`) or regardless of it.
  template <typename T, typename Fn, typename Fill>
  grpc::ServerUnaryReactor* RunReplying(grpc::CallbackServerContext* ctx, Need need, Fn fn,
                                        Fill fill, bool writes);

  Controller& controller_;
  TrialFiles& files_;
  TokenTable& tokens_;
  std::function<std::string(const Caller&)> dashboard_login_;
  // Open WatchSweep streams (each may buffer kMaxWatchBacklog events): so many per user, and in
  // all.
  std::shared_ptr<Slots> watches_ =
      Slots::Make("open watches (hpo watch, the Python client's watch)", 32, 512);
};

class ReportServiceImpl final : public v1::ReportService::CallbackService {
 public:
  explicit ReportServiceImpl(Controller& controller) : controller_(controller) {}
  grpc::ServerUnaryReactor* Report(grpc::CallbackServerContext* ctx, const v1::ReportRequest* req,
                                   v1::ReportResponse* resp) override;
  grpc::ServerBidiReactor<v1::ReportRequest, v1::ReportResponse>* ReportStream(
      grpc::CallbackServerContext* ctx) override;

 private:
  Controller& controller_;
};

// What every hpod server has: health checking and reflection on, the message size limit, HTTP/2
// tuning for many small messages on many connections.
void ConfigureServerBuilder(grpc::ServerBuilder& builder);
inline constexpr int kMaxMessageBytes = 4 << 20;

// The token in "authorization: Bearer <token>" metadata, or "".
std::string BearerToken(const grpc::ServerContextBase& ctx);

}  // namespace hpo::server
