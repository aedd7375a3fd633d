#include "server/core/convert.h"

#include <memory>

#include "absl/strings/str_format.h"
#include "common/fingerprint.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace hpo::server {

google::protobuf::Timestamp ToProto(absl::Time t) {
  google::protobuf::Timestamp out;
  int64_t nanos = absl::ToUnixNanos(t);
  out.set_seconds(nanos / 1'000'000'000);
  out.set_nanos(static_cast<int32_t>(nanos % 1'000'000'000));
  return out;
}

v1::ParamValue ToProto(const algorithms::ParamValue& v) {
  v1::ParamValue out;
  if (auto* i = std::get_if<int64_t>(&v))
    out.set_int_value(*i);
  else if (auto* d = std::get_if<double>(&v))
    out.set_float_value(*d);
  else if (auto* s = std::get_if<std::string>(&v))
    out.set_string_value(*s);
  else if (auto* b = std::get_if<bool>(&v))
    out.set_bool_value(*b);
  return out;
}

v1::Trial ToProto(const TrialRecord& rec) {
  v1::Trial out;
  out.set_id(rec.id);
  out.set_sweep_id(rec.sweep_id);
  out.set_number(rec.number);
  out.set_state(rec.state);
  for (const auto& [k, v] : rec.params) (*out.mutable_params())[k] = ToProto(v);
  out.set_step(rec.step);
  for (const auto& [k, v] : rec.last_metrics) (*out.mutable_last_metrics())[k] = v;
  out.set_has_objective(rec.objective.has_value());
  if (rec.objective) out.set_objective(*rec.objective);
  *out.mutable_created_at() = ToProto(rec.created_at);
  if (rec.started_at) *out.mutable_started_at() = ToProto(*rec.started_at);
  if (rec.ended_at) *out.mutable_ended_at() = ToProto(*rec.ended_at);
  out.set_exit_code(rec.exit_code);
  out.set_term_signal(rec.term_signal);
  out.set_message(rec.message);
  out.set_backend_id(rec.backend_id);
  out.set_trial_dir(rec.trial_dir);
  out.set_attempt(rec.attempt);
  out.set_retry_of(rec.retry_of);
  out.set_report_count(rec.report_count);
  out.set_gpus(rec.gpus);
  out.set_parent(rec.parent);
  out.set_lineage(rec.lineage);
  out.set_stop_state(rec.stop_state);
  out.set_interruption(rec.interruption);
  out.set_segment(rec.segment);
  out.set_origin(rec.origin);
  out.set_gpu_seconds(rec.gpu_seconds);
  if (rec.segment_started_at) *out.mutable_segment_started_at() = ToProto(*rec.segment_started_at);
  for (const SegmentRecord& seg : rec.segments) {
    v1::Segment& s = *out.add_segments();
    s.set_number(seg.number);
    *s.mutable_started_at() = ToProto(seg.started_at);
    *s.mutable_ended_at() = ToProto(seg.ended_at);
    s.set_backend_id(seg.backend_id);
    s.set_gpus(seg.gpus);
    s.set_gpu_seconds(seg.gpu_seconds);
    s.set_interruption(seg.interruption);
    s.set_message(seg.message);
  }
  return out;
}

v1::Interruption ToProto(backend::Interruption i) {
  switch (i) {
    case backend::Interruption::kTimeLimit:
      return v1::INTERRUPTION_TIME_LIMIT;
    case backend::Interruption::kPreempted:
      return v1::INTERRUPTION_PREEMPTED;
    case backend::Interruption::kNodeFailure:
      return v1::INTERRUPTION_NODE_FAILURE;
    case backend::Interruption::kCanceledOutside:
      return v1::INTERRUPTION_CANCELED_OUTSIDE;
    case backend::Interruption::kVanished:
      return v1::INTERRUPTION_VANISHED;
    case backend::Interruption::kNone:
      break;
  }
  return v1::INTERRUPTION_UNSPECIFIED;
}

std::string ChangeFingerprint(const google::protobuf::Message& request) {
  std::unique_ptr<google::protobuf::Message> copy(request.New());
  copy->CopyFrom(request);
  if (const auto* key = copy->GetDescriptor()->FindFieldByName("request_id")) {
    copy->GetReflection()->ClearField(copy.get(), key);
  }
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    copy->SerializeToCodedStream(&out);
  }
  return absl::StrFormat("%016x", Fingerprint64(bytes));
}

}  // namespace hpo::server
