// The gRPC server as hpod configures it: oversized messages are refused by the transport, and
// wrong tokens are refused before anything reaches the controller's store.
#include <stdlib.h>

#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "server/controller.h"
#include "server/hpo_service.h"
#include "server/sqlite_store.h"
#include "slurm_backend/simulated_backend.h"

namespace hpo::server {
namespace {

class GrpcLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hpo-grpc-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    store_ = std::move(*SqliteStore::Open(root_ + "/hpod.db"));
    backend_ = std::make_unique<backend::SimulatedBackend>(SystemClock::Get(), 0, 4,
                                                           [](const backend::LaunchSpec&) { return backend::SimulatedFate{}; });
    Controller::Options o;
    o.data_dir = DataDir(root_);
    controller_ = std::make_unique<Controller>(o, *store_, *backend_, SystemClock::Get());
    ASSERT_TRUE(controller_->Recover().ok());
    controller_->Start();
    hpo_ = std::make_unique<HpoServiceImpl>(*controller_, "user-token");
    report_ = std::make_unique<ReportServiceImpl>(*controller_);
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(builder);
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(hpo_.get());
    builder.RegisterService(report_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    server_->Shutdown();
    controller_->Shutdown();
  }
  std::string root_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<backend::SimulatedBackend> backend_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<HpoServiceImpl> hpo_;
  std::unique_ptr<ReportServiceImpl> report_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(GrpcLimitsTest, OversizedMessageIsRefused) {
  auto stub = v1::HpoService::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer user-token");
  v1::SubmitSweepRequest req;
  req.set_spec_yaml(std::string(kMaxMessageBytes + 1024, '#'));
  v1::SubmitSweepResponse resp;
  grpc::Status s = stub->SubmitSweep(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_TRUE(store_->LoadSweeps()->empty());
}

TEST_F(GrpcLimitsTest, WrongUserTokenIsUnauthenticated) {
  auto stub = v1::HpoService::NewStub(channel_);
  for (const char* token : {"", "Bearer nope"}) {
    grpc::ClientContext ctx;
    if (*token) ctx.AddMetadata("authorization", token);
    v1::ListSweepsResponse resp;
    grpc::Status s = stub->ListSweeps(&ctx, v1::ListSweepsRequest(), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer user-token");
  v1::ListSweepsResponse resp;
  EXPECT_TRUE(stub->ListSweeps(&ctx, v1::ListSweepsRequest(), &resp).ok());
}

TEST_F(GrpcLimitsTest, ReportStreamRefusesAWrongTokenAndEnds) {
  auto stub = v1::ReportService::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer wrong");
  auto stream = stub->ReportStream(&ctx);
  v1::ReportRequest req;
  req.set_trial_id(1);
  (*req.mutable_metrics())["loss"] = 1;
  ASSERT_TRUE(stream->Write(req));
  v1::ReportResponse resp;
  EXPECT_FALSE(stream->Read(&resp));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace hpo::server
