#pragma once
// absl::Status to grpc::Status: the one place that mapping lives. Codes keep their numbers (the
// two enums agree) and the message is kept whole.

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace hpo::server {

grpc::Status ToGrpc(const absl::Status& s);

}  // namespace hpo::server
