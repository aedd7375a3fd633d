#pragma once
// The daemon's records as the public proto messages, and a change request's fingerprint.

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backend/backend.h"
#include "google/protobuf/timestamp.pb.h"
#include "hpo/v1/hpo.pb.h"
#include "server/store/store.h"

namespace hpo::server {

google::protobuf::Timestamp ToProto(absl::Time t);
v1::ParamValue ToProto(const algorithms::ParamValue& v);
v1::Trial ToProto(const TrialRecord& rec);
// What took a trial (an infrastructure interruption), as the API names it.
v1::Interruption ToProto(backend::Interruption i);
// A change request's fingerprint, its request_id left out: equal values give equal text (a
// retried request is told apart from another one under the same key).
std::string ChangeFingerprint(const google::protobuf::Message& request);

}  // namespace hpo::server
