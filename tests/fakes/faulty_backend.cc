#include "tests/fakes/faulty_backend.h"

#include "absl/strings/str_cat.h"

namespace hpo::fakes {

absl::Status FaultyBackend::Injected(Verb verb, const char* name) {
  auto it = faults_.find(verb);
  if (it == faults_.end() || it->second.times <= 0) return absl::OkStatus();
  absl::StatusCode code = it->second.code;
  if (--it->second.times == 0) faults_.erase(it);
  ++failed_;
  return absl::Status(code, absl::StrCat("injected fault: ", name));
}

absl::Status FaultyBackend::Launch(const backend::LaunchSpec& spec) {
  if (absl::Status s = Injected(Verb::kLaunch, "Launch"); !s.ok()) return s;
  return inner_.Launch(spec);
}

absl::Status FaultyBackend::Stop(int64_t trial_id, absl::Duration grace) {
  if (absl::Status s = Injected(Verb::kStop, "Stop"); !s.ok()) return s;
  return inner_.Stop(trial_id, grace);
}

absl::Status FaultyBackend::Adopt(const backend::LaunchSpec& spec, const std::string& backend_id,
                                  const std::string& gpus) {
  if (absl::Status s = Injected(Verb::kAdopt, "Adopt"); !s.ok()) return s;
  return inner_.Adopt(spec, backend_id, gpus);
}

}  // namespace hpo::fakes
