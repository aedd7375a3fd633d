// The gRPC server as hpod configures it: health checking and reflection answer standard clients,
// oversized messages are refused by the transport, wrong tokens change nothing.
#include <stdlib.h>

#include <future>

#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/api/hpo_service.h"
#include "server/core/controller.h"
#include "tests/fakes/test_daemon.h"

namespace hpo::server {
namespace {

class GrpcServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fakes::TestDaemon::Options o;
    o.gpus = 0;
    o.slots = 4;
    daemon_ = std::make_unique<fakes::TestDaemon>(o);
    daemon_->controller().Start();
    hpo_ = std::make_unique<HpoServiceImpl>(daemon_->controller(), daemon_->files(), tokens_);
    report_ = std::make_unique<ReportServiceImpl>(daemon_->controller());
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(builder);
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(hpo_.get());
    builder.RegisterService(report_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    server_->Shutdown();
    daemon_->controller().Shutdown();
  }
  std::unique_ptr<fakes::TestDaemon> daemon_;
  TokenTable tokens_{ProcessUserName(), "user-token", ""};
  std::unique_ptr<HpoServiceImpl> hpo_;
  std::unique_ptr<ReportServiceImpl> report_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(GrpcServerTest, OversizedMessageIsRefused) {
  auto stub = v1::HpoService::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer user-token");
  v1::SubmitSweepRequest req;
  req.set_spec_yaml(std::string(kMaxMessageBytes + 1024, '#'));
  v1::SubmitSweepResponse resp;
  grpc::Status s = stub->SubmitSweep(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_TRUE(daemon_->sqlite().LoadSweeps()->empty());
}

TEST_F(GrpcServerTest, WrongUserTokenIsUnauthenticated) {
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

TEST_F(GrpcServerTest, ReportStreamRefusesAWrongTokenAndEnds) {
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

// Calls `method` with raw protobuf bytes, as a client that has none of our generated code would.
grpc::Status RawCall(std::shared_ptr<grpc::Channel> channel, const std::string& method,
                     const std::string& request, std::string* response) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  grpc::Slice slice(request);
  grpc::ByteBuffer req(&slice, 1), resp;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp,
                 [&](grpc::Status s) { done.set_value(s); });
  grpc::Status s = done.get_future().get();
  std::vector<grpc::Slice> slices;
  if (s.ok() && resp.Dump(&slices).ok()) {
    for (auto& sl : slices) response->append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  }
  return s;
}

TEST_F(GrpcServerTest, HealthServiceAnswersServing) {
  std::string resp;
  // grpc.health.v1.HealthCheckRequest{} is empty; the response {status: SERVING} is 08 01.
  grpc::Status s = RawCall(channel_, "/grpc.health.v1.Health/Check", "", &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp, std::string("\x08\x01", 2));
}

TEST_F(GrpcServerTest, ReflectionListsOurServices) {
  grpc::GenericStub stub(channel_);
  grpc::ClientContext ctx;
  grpc::CompletionQueue cq;
  auto call =
      stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  // ServerReflectionRequest{list_services: "*"}: field 7, length-delimited.
  std::string req_bytes = std::string("\x3a\x01*", 3);
  grpc::Slice slice(req_bytes);
  grpc::ByteBuffer req(&slice, 1), resp;
  call->Write(req, reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  call->Read(&resp, reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(resp.Dump(&slices).ok());
  std::string bytes;
  for (auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  EXPECT_NE(bytes.find("hpo.v1.HpoService"), std::string::npos);
  EXPECT_NE(bytes.find("hpo.v1.ReportService"), std::string::npos);
  EXPECT_NE(bytes.find("grpc.health.v1.Health"), std::string::npos);
  call->WritesDone(reinterpret_cast<void*>(4));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_TRUE(status.ok()) << status.error_message();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

}  // namespace
}  // namespace hpo::server
