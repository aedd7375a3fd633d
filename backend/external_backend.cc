#include "backend/external_backend.h"

#include "absl/strings/str_cat.h"

namespace hpo::backend {

std::string ExternalBackend::Describe() const {
  return absl::StrCat(trials_.size(), " trial(s) run by others");
}

absl::Status ExternalBackend::Launch(const LaunchSpec& spec) {
  trials_.insert(spec.trial_id);
  BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kStarted, spec.trial_id, clock_.Now());
  e.backend_id = "external";
  events_.push_back(std::move(e));
  return absl::OkStatus();
}

absl::Status ExternalBackend::Stop(int64_t trial_id, absl::Duration) {
  if (trials_.erase(trial_id) == 0) {
    return absl::NotFoundError(absl::StrCat("no external trial ", trial_id));
  }
  BackendEvent e = BackendEvent::Of(BackendEvent::Kind::kExited, trial_id, clock_.Now());
  e.exit_code = -1;
  e.stop_requested = true;
  e.message = "stopped by hpod (its launcher hears it in the reply to its next report)";
  events_.push_back(std::move(e));
  return absl::OkStatus();
}

std::vector<BackendEvent> ExternalBackend::Poll() {
  std::vector<BackendEvent> out;
  out.swap(events_);
  return out;
}

absl::Status ExternalBackend::Adopt(const LaunchSpec& spec, const std::string&,
                                    const std::string&) {
  return Launch(spec);
}

}  // namespace hpo::backend
