#include "server/api/hpo_service.h"

#include <atomic>
#include <chrono>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/layout.h"
#include "common/proofs.h"
#include "common/status_macros.h"
#include "common/token.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/api/grpc_status.h"
#include "server/core/convert.h"

namespace hpo::server {
namespace {

constexpr size_t kMaxWatchBacklog = 200'000;  // events queued for one slow watcher

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Streams events to one client. Owned by gRPC (deleted in OnDone); the controller reaches it
// through a WatchSink that forgets it when the call is done.
class WatchReactor;

class WatchSink final : public EventSink {
 public:
  explicit WatchSink(WatchReactor* reactor) : reactor_(reactor) {}
  void Push(const v1::Event& event) override;
  void Close(const absl::Status& status) override;
  bool Gone() const override {
    std::lock_guard lock(mu_);
    return reactor_ == nullptr;
  }
  void Detach() {
    std::lock_guard lock(mu_);
    reactor_ = nullptr;
  }

 private:
  mutable std::mutex mu_;
  WatchReactor* reactor_ ABSL_GUARDED_BY(mu_);
};

class WatchReactor final : public grpc::ServerWriteReactor<v1::Event> {
 public:
  WatchReactor() : sink_(std::make_shared<WatchSink>(this)) {}
  std::shared_ptr<WatchSink> sink() { return sink_; }

  void Enqueue(const v1::Event& event) {
    std::lock_guard lock(mu_);
    if (end_) return;
    if (queue_.size() >= kMaxWatchBacklog) {
      end_ = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "the watcher fell behind; resume from the last seq received");
      queue_.clear();
    } else {
      queue_.push_back(event);
    }
    Next();
  }
  void End(const grpc::Status& status) {
    std::lock_guard lock(mu_);
    if (!end_) end_ = status;
    Next();
  }
  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (!ok) {
      queue_.clear();
      if (!end_) end_ = grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    }
    Next();
  }
  void OnCancel() override {
    std::lock_guard lock(mu_);
    queue_.clear();
    if (!end_) end_ = grpc::Status(grpc::StatusCode::CANCELLED, "canceled");
    Next();
  }
  void OnDone() override {
    sink_->Detach();
    delete this;
  }
  // Held while the stream is open (Slots).
  void Hold(Slots::Held slot) { slot_ = std::move(slot); }

 private:
  // Starts the next write, or finishes once the queue drained after End. Holds mu_.
  void Next() {
    if (writing_ || finished_) return;
    if (!queue_.empty()) {
      current_ = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      StartWrite(&current_);
    } else if (end_) {
      finished_ = true;
      Finish(*end_);
    }
  }

  Slots::Held slot_;
  std::recursive_mutex mu_;  // recursive: a reaction may run inline, inside StartWrite or Finish
  std::deque<v1::Event> queue_ ABSL_GUARDED_BY(mu_);
  v1::Event current_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<WatchSink> sink_;
};

void WatchSink::Push(const v1::Event& event) {
  std::lock_guard lock(mu_);
  if (reactor_ != nullptr) reactor_->Enqueue(event);
}

void WatchSink::Close(const absl::Status& status) {
  std::lock_guard lock(mu_);
  if (reactor_ != nullptr) reactor_->End(ToGrpc(status));
}

// One trial's report stream: read a report, let the controller store and answer it, write the
// reply after the commit, read the next. Deletes itself in OnDone.
class ReportStreamReactor final
    : public grpc::ServerBidiReactor<v1::ReportRequest, v1::ReportResponse> {
 public:
  ReportStreamReactor(grpc::CallbackServerContext* ctx, Controller& controller, std::string token)
      : ctx_(ctx), controller_(controller), token_(std::move(token)) {
    StartRead(&req_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side (or went away)
      End(grpc::Status::OK);
      return;
    }
    auto received = std::chrono::steady_clock::now();
    controller_.Post([this, received]() -> Controller::Done {
      std::string refusal_proof;
      auto r = controller_.Report(req_, token_, &refusal_proof);
      absl::Status s = r.status();
      if (r.ok()) resp_ = std::move(*r);
      return [this, s, received, refusal_proof](const absl::Status& commit) {
        absl::Status final = s.ok() ? commit : s;
        if (!final.ok()) {
          if (!s.ok() && !refusal_proof.empty()) {
            ctx_->AddTrailingMetadata(kRefusalProofKey, refusal_proof);
          }
          End(ToGrpc(final));
        } else {
          controller_.telemetry().ObserveReport(SecondsSince(received));
          StartWrite(&resp_);
        }
      };
    });
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      End(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    StartRead(&req_);
  }
  void OnDone() override { delete this; }

 private:
  void End(const grpc::Status& status) {
    if (finished_.exchange(true)) return;
    Finish(status);
  }

  grpc::CallbackServerContext* ctx_;
  Controller& controller_;
  std::string token_;
  v1::ReportRequest req_;
  v1::ReportResponse resp_;
  std::atomic<bool> finished_{false};
};

}  // namespace

void ConfigureServerBuilder(grpc::ServerBuilder& builder) {
  // gRPC health checking (grpc.health.v1) and server reflection, for standard tooling.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // Reports are tiny and frequent: bandwidth-delay probing only adds pings per connection.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // No SO_REUSEPORT: a second daemon asking for a remembered port must fail, not share it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Not GRPC_ARG_MINIMAL_STACK: in gRPC 1.51 it drops the filter that enforces the message size
  // limit (tests/unit/server/grpc_server_test.cc catches that).
}

std::string BearerToken(const grpc::ServerContextBase& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return "";
  absl::string_view v(it->second.data(), it->second.size());
  constexpr absl::string_view kBearer = "Bearer ";
  if (v.substr(0, kBearer.size()) != kBearer) return "";
  return std::string(v.substr(kBearer.size()));
}

std::optional<Caller> HpoServiceImpl::Authorized(grpc::CallbackServerContext* ctx,
                                                 grpc::ServerUnaryReactor* reactor) const {
  if (std::optional<Caller> caller = tokens_.Find(BearerToken(*ctx))) return caller;
  reactor->Finish(
      grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                   "missing or wrong token (the user token is in $HPO_DATA_DIR/token)"));
  return std::nullopt;
}

template <typename Fn>
grpc::ServerUnaryReactor* HpoServiceImpl::Run(grpc::CallbackServerContext* ctx, Need need, Fn fn,
                                              bool writes) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::optional<Caller> caller = Authorized(ctx, reactor);
  if (!caller) return reactor;
  controller_.Post([this, reactor, caller = std::move(*caller), need, fn = std::move(fn),
                    writes]() -> Controller::Done {
    absl::StatusOr<Allowed> allowed = controller_.Allow(caller, need);
    absl::Status s = allowed.ok() ? fn(*allowed) : allowed.status();
    return [reactor, s, writes](const absl::Status& commit) {
      reactor->Finish(ToGrpc(s.ok() && writes ? commit : s));
    };
  });
  return reactor;
}

template <typename T, typename Fn, typename Fill>
grpc::ServerUnaryReactor* HpoServiceImpl::RunReplying(grpc::CallbackServerContext* ctx, Need need,
                                                      Fn fn, Fill fill, bool writes) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::optional<Caller> caller = Authorized(ctx, reactor);
  if (!caller) return reactor;
  controller_.Post([this, reactor, caller = std::move(*caller), need, fn = std::move(fn),
                    fill = std::move(fill), writes]() -> Controller::Done {
    Controller::Reply<T> reply = [reactor, fill, writes](absl::StatusOr<T> answer) {
      absl::Status s = answer.status();
      if (answer.ok()) fill(std::move(*answer));
      return [reactor, s, writes](const absl::Status& commit) {
        reactor->Finish(ToGrpc(s.ok() && writes ? commit : s));
      };
    };
    absl::StatusOr<Allowed> allowed = controller_.Allow(caller, need);
    if (!allowed.ok()) return reply(allowed.status());
    return fn(*allowed, std::move(reply));
  });
  return reactor;
}

grpc::ServerUnaryReactor* HpoServiceImpl::ValidateSweep(grpc::CallbackServerContext* ctx,
                                                        const v1::ValidateSweepRequest* req,
                                                        v1::ValidateSweepResponse* resp) {
  return RunReplying<v1::ValidateSweepResponse>(
      ctx, {Action::kUse},
      [this, req](const Allowed& allowed, Controller::Reply<v1::ValidateSweepResponse> reply) {
        return controller_.Validate(allowed, *req, std::move(reply));
      },
      [resp](v1::ValidateSweepResponse answer) { *resp = std::move(answer); }, false);
}

grpc::ServerUnaryReactor* HpoServiceImpl::PlanSweep(grpc::CallbackServerContext* ctx,
                                                    const v1::PlanSweepRequest* req,
                                                    v1::PlanSweepResponse* resp) {
  return RunReplying<v1::PlanSweepResponse>(
      ctx, {Action::kUse},
      [this, req](const Allowed& allowed, Controller::Reply<v1::PlanSweepResponse> reply) {
        return controller_.Plan(allowed, *req, std::move(reply));
      },
      [resp](v1::PlanSweepResponse answer) { *resp = std::move(answer); }, false);
}

grpc::ServerUnaryReactor* HpoServiceImpl::SubmitSweep(grpc::CallbackServerContext* ctx,
                                                      const v1::SubmitSweepRequest* req,
                                                      v1::SubmitSweepResponse* resp) {
  return RunReplying<v1::Sweep>(
      ctx, {Action::kSubmit},
      [this, req](const Allowed& allowed, Controller::Reply<v1::Sweep> reply) {
        return controller_.Submit(allowed, *req, std::move(reply));
      },
      [resp](v1::Sweep sweep) { *resp->mutable_sweep() = std::move(sweep); }, true);
}

grpc::ServerUnaryReactor* HpoServiceImpl::GetSweep(grpc::CallbackServerContext* ctx,
                                                   const v1::GetSweepRequest* req,
                                                   v1::GetSweepResponse* resp) {
  return Read(ctx, {Action::kView, req->sweep_id()}, [this, req, resp](const Allowed& allowed) {
    auto sweep = controller_.GetSweep(allowed, req->sweep_id());
    if (!sweep.ok()) return sweep.status();
    *resp->mutable_sweep() = std::move(*sweep);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* HpoServiceImpl::ListSweeps(grpc::CallbackServerContext* ctx,
                                                     const v1::ListSweepsRequest* req,
                                                     v1::ListSweepsResponse* resp) {
  return Read(ctx, {Action::kUse}, [this, req, resp](const Allowed& allowed) {
    auto sweeps = controller_.ListSweeps(allowed, req->active_only());
    if (!sweeps.ok()) return sweeps.status();
    for (auto& s : *sweeps) *resp->add_sweeps() = std::move(s);
    return absl::OkStatus();
  });
}

#define HPO_SWEEP_VERB(Rpc, Method)                                                             \
  grpc::ServerUnaryReactor* HpoServiceImpl::Rpc(                                                \
      grpc::CallbackServerContext* ctx, const v1::Rpc##Request* req, v1::Rpc##Response* resp) { \
    return Run(ctx, {Action::kOperate, req->sweep_id()},                                        \
               [this, req, resp](const Allowed& allowed) {                                      \
                 auto sweep = controller_.Method(allowed, req->sweep_id());                     \
                 if (!sweep.ok()) return sweep.status();                                        \
                 *resp->mutable_sweep() = std::move(*sweep);                                    \
                 return absl::OkStatus();                                                       \
               });                                                                              \
  }
HPO_SWEEP_VERB(CancelSweep, Cancel)
HPO_SWEEP_VERB(PauseSweep, Pause)
HPO_SWEEP_VERB(ResumeSweep, Resume)
#undef HPO_SWEEP_VERB

grpc::ServerUnaryReactor* HpoServiceImpl::AllowNode(grpc::CallbackServerContext* ctx,
                                                    const v1::AllowNodeRequest* req,
                                                    v1::AllowNodeResponse* resp) {
  return Run(ctx, {Action::kOperate, req->sweep_id()}, [this, req, resp](const Allowed& allowed) {
    auto sweep = controller_.AllowNode(allowed, req->sweep_id(), req->node());
    if (!sweep.ok()) return sweep.status();
    *resp->mutable_sweep() = std::move(*sweep);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* HpoServiceImpl::ExtendSweep(grpc::CallbackServerContext* ctx,
                                                      const v1::ExtendSweepRequest* req,
                                                      v1::ExtendSweepResponse* resp) {
  return Run(ctx, {Action::kOperate, req->sweep_id()}, [this, req, resp](const Allowed& allowed) {
    auto sweep = controller_.Extend(allowed, *req);
    if (!sweep.ok()) return sweep.status();
    *resp->mutable_sweep() = std::move(*sweep);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* HpoServiceImpl::Enqueue(grpc::CallbackServerContext* ctx,
                                                  const v1::EnqueueRequest* req,
                                                  v1::EnqueueResponse* resp) {
  return Run(ctx, {Action::kOperate, req->sweep_id()}, [this, req, resp](const Allowed& allowed) {
    auto sweep = controller_.Enqueue(allowed, *req);
    if (!sweep.ok()) return sweep.status();
    *resp->mutable_sweep() = std::move(*sweep);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* HpoServiceImpl::Ask(grpc::CallbackServerContext* ctx,
                                              const v1::AskRequest* req, v1::AskResponse* resp) {
  return Run(ctx, {Action::kOperate, req->sweep_id()}, [this, req, resp](const Allowed& allowed) {
    auto asked = controller_.Ask(allowed, req->sweep_id());
    if (!asked.ok()) return asked.status();
    *resp = std::move(*asked);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* HpoServiceImpl::Tell(grpc::CallbackServerContext* ctx,
                                               const v1::TellRequest* req, v1::TellResponse* resp) {
  return Run(ctx, {Action::kOperate, 0, req->trial_id()},
             [this, req, resp](const Allowed& allowed) {
               auto trial = controller_.Tell(allowed, *req);
               if (!trial.ok()) return trial.status();
               *resp->mutable_trial() = std::move(*trial);
               return absl::OkStatus();
             });
}

grpc::ServerUnaryReactor* HpoServiceImpl::RemoveSweep(grpc::CallbackServerContext* ctx,
                                                      const v1::RemoveSweepRequest* req,
                                                      v1::RemoveSweepResponse* resp) {
  // The rows go in one batch; once that is committed, the directories go on the files' thread
  // (a large sweep's checkpoints take a while), and then the call is answered.
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::optional<Caller> caller = Authorized(ctx, reactor);
  if (!caller) return reactor;
  controller_.Post([this, reactor, req, resp, caller = std::move(*caller)]() -> Controller::Done {
    absl::StatusOr<std::vector<std::string>> dirs =
        [&]() -> absl::StatusOr<std::vector<std::string>> {
      ASSIGN_OR_RETURN(Allowed allowed,
                       controller_.Allow(caller, {Action::kRemove, req->sweep_id()}));
      return controller_.Remove(allowed, req->sweep_id());
    }();
    return [this, reactor, resp, dirs = std::move(dirs)](const absl::Status& commit) {
      if (!dirs.ok() || !commit.ok()) {
        reactor->Finish(ToGrpc(dirs.ok() ? commit : dirs.status()));
        return;
      }
      for (const std::string& d : *dirs) resp->add_removed_dirs(d);
      files_.Remove(*dirs, [reactor](const absl::Status& s) { reactor->Finish(ToGrpc(s)); });
    };
  });
  return reactor;
}

grpc::ServerUnaryReactor* HpoServiceImpl::ListTrials(grpc::CallbackServerContext* ctx,
                                                     const v1::ListTrialsRequest* req,
                                                     v1::ListTrialsResponse* resp) {
  return Read(ctx, {Action::kView, req->sweep_id()}, [this, req, resp](const Allowed& allowed) {
    auto trials = controller_.ListTrials(allowed, *req);
    if (!trials.ok()) return trials.status();
    for (auto& t : *trials) *resp->add_trials() = std::move(t);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* HpoServiceImpl::GetTrial(grpc::CallbackServerContext* ctx,
                                                   const v1::GetTrialRequest* req,
                                                   v1::GetTrialResponse* resp) {
  return Read(ctx, {Action::kView, 0, req->trial_id()}, [this, req, resp](const Allowed& allowed) {
    auto trial = controller_.GetTrial(allowed, *req);
    if (!trial.ok()) return trial.status();
    *resp = std::move(*trial);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* HpoServiceImpl::TailTrialLog(grpc::CallbackServerContext* ctx,
                                                       const v1::TailTrialLogRequest* req,
                                                       v1::TailTrialLogResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::optional<Caller> caller = Authorized(ctx, reactor);
  if (!caller) return reactor;
  // The controller says where the log is; the file is read on the trial files' thread, so a
  // slow shared file system holds up this reply only.
  controller_.Post([this, reactor, req, resp, caller = std::move(*caller)]() -> Controller::Done {
    absl::StatusOr<Allowed> allowed =
        controller_.Allow(caller, {Action::kView, 0, req->trial_id()});
    absl::StatusOr<std::string> dir =
        allowed.ok() ? controller_.TrialDir(*allowed, req->trial_id()) : allowed.status();
    return [this, reactor, req, resp, dir = std::move(dir)](const absl::Status&) {
      if (!dir.ok()) {
        reactor->Finish(ToGrpc(dir.status()));
        return;
      }
      const layout::TrialDir trial_dir(*dir);
      std::string path = req->stream() == v1::TailTrialLogRequest::STREAM_STDERR
                             ? trial_dir.stderr_log()
                             : trial_dir.stdout_log();
      int64_t max =
          req->max_bytes() <= 0 ? 64 * 1024 : std::min<int64_t>(req->max_bytes(), 4 << 20);
      resp->set_path(path);
      files_.Tail(path, max, [reactor, resp](absl::StatusOr<TrialFiles::LogTail> tail) {
        if (!tail.ok()) {
          reactor->Finish(ToGrpc(tail.status()));
          return;
        }
        resp->set_data(std::move(tail->data));  // empty when the trial has not written yet
        resp->set_truncated(tail->truncated);
        reactor->Finish(grpc::Status::OK);
      });
    };
  });
  return reactor;
}

grpc::ServerUnaryReactor* HpoServiceImpl::DashboardLogin(grpc::CallbackServerContext* ctx,
                                                         const v1::DashboardLoginRequest*,
                                                         v1::DashboardLoginResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::optional<Caller> caller = Authorized(ctx, reactor);
  if (!caller) return reactor;
  if (absl::Status s = Authorize(*caller, Action::kUse); !s.ok()) {
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  if (!dashboard_login_) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 "this hpod serves no dashboard (it was started with "
                                 "--dashboard none)"));
    return reactor;
  }
  resp->set_url(dashboard_login_(*caller));
  resp->set_valid_seconds(300);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<v1::Event>* HpoServiceImpl::WatchSweep(grpc::CallbackServerContext* ctx,
                                                                const v1::WatchSweepRequest* req) {
  auto* reactor = new WatchReactor();
  std::optional<Caller> caller = tokens_.Find(BearerToken(*ctx));
  if (!caller) {
    reactor->End(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong token"));
    return reactor;
  }
  absl::StatusOr<Slots::Held> slot = watches_->Take(caller->user);
  if (!slot.ok()) {
    reactor->End(ToGrpc(slot.status()));
    return reactor;
  }
  reactor->Hold(std::move(*slot));
  int64_t sweep_id = req->sweep_id(), since = req->since_seq();
  std::shared_ptr<WatchSink> sink = reactor->sink();
  controller_.Post(
      [this, sweep_id, since, sink, caller = std::move(*caller)]() -> Controller::Done {
        absl::StatusOr<Allowed> allowed = controller_.Allow(caller, {Action::kView, sweep_id});
        absl::Status s =
            allowed.ok() ? controller_.Watch(*allowed, sweep_id, since, sink) : allowed.status();
        if (!s.ok()) sink->Close(s);
        return nullptr;
      });
  return reactor;
}

grpc::ServerUnaryReactor* ReportServiceImpl::Report(grpc::CallbackServerContext* ctx,
                                                    const v1::ReportRequest* req,
                                                    v1::ReportResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::string token = BearerToken(*ctx);
  auto received = std::chrono::steady_clock::now();
  controller_.Post(
      [this, ctx, reactor, req, resp, token = std::move(token), received]() -> Controller::Done {
        std::string refusal_proof;
        auto r = controller_.Report(*req, token, &refusal_proof);
        absl::Status s = r.status();
        if (r.ok()) *resp = std::move(*r);
        return [this, ctx, reactor, s, received, refusal_proof](const absl::Status& commit) {
          if (s.ok() && commit.ok()) controller_.telemetry().ObserveReport(SecondsSince(received));
          if (!s.ok() && !refusal_proof.empty()) {
            ctx->AddTrailingMetadata(kRefusalProofKey, refusal_proof);
          }
          reactor->Finish(ToGrpc(s.ok() ? commit : s));
        };
      });
  return reactor;
}

grpc::ServerBidiReactor<v1::ReportRequest, v1::ReportResponse>* ReportServiceImpl::ReportStream(
    grpc::CallbackServerContext* ctx) {
  return new ReportStreamReactor(ctx, controller_, BearerToken(*ctx));
}

}  // namespace hpo::server
