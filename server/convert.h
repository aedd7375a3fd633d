#pragma once
// Conversions between the daemon's records and the public proto messages, and from
// absl::Status to grpc::Status (the one place that mapping lives).

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/support/status.h"
#include "hpo/v1/hpo.pb.h"
#include "server/store.h"

namespace hpo::server {

google::protobuf::Timestamp ToProto(absl::Time t);
v1::ParamValue ToProto(const algorithms::ParamValue& v);
v1::Trial ToProto(const TrialRecord& rec);
std::string ParamsToJsonText(const algorithms::Params& params);
grpc::Status ToGrpc(const absl::Status& s);
// A change request's fingerprint, its request_id left out: equal values give equal text (a
// retried request is told apart from another one under the same key).
std::string ChangeFingerprint(const google::protobuf::Message& request);

}  // namespace hpo::server
