#include "backend/router.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hpo::backend {

void Router::Add(std::unique_ptr<Backend> backend) {
  unavailable_.erase(backend->Name());
  backends_.push_back(std::move(backend));
}

void Router::AddUnavailable(const std::string& name, const std::string& why) {
  unavailable_[name] = why;
}

Backend* Router::Find(const std::string& name) const {
  for (const auto& b : backends_) {
    if (b->Name() == name) return b.get();
  }
  return nullptr;
}

std::vector<std::string> Router::Names() const {
  std::vector<std::string> names;
  for (const auto& b : backends_) names.push_back(b->Name());
  return names;
}

absl::StatusOr<std::string> Router::Resolve(const Placement& p) const {
  std::string name = p.backend.empty() ? default_ : p.backend;
  if (Find(name) != nullptr) return name;
  if (auto it = unavailable_.find(name); it != unavailable_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("the sweep runs on ", name,
                                                   ", but this hpod has no ", name,
                                                   " backend: ", it->second, "; nothing was run"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the sweep runs on ", name, ", but this hpod serves only ", absl::StrJoin(Names(), " and ")));
}

absl::StatusOr<Backend*> Router::Route(const Placement& p) const {
  absl::StatusOr<std::string> name = Resolve(p);
  if (!name.ok()) return name.status();
  return Find(*name);
}

absl::Status Router::CheckFits(const Resources& r, const Placement& p) {
  absl::StatusOr<Backend*> b = Route(p);
  if (!b.ok()) return b.status();
  return (*b)->CheckFits(r, p);
}

void Router::Vet(int64_t sweep_id, const Resources& r, const Placement& p, bool starts_now,
                 Vetted done) {
  absl::StatusOr<Backend*> b = Route(p);
  if (!b.ok()) return done(b.status());
  (*b)->Vet(sweep_id, r, p, starts_now, std::move(done));
}

void Router::ExpectedStart(const Resources& r, const Placement& p, Started done) {
  absl::StatusOr<Backend*> b = Route(p);
  if (!b.ok()) return done(b.status());
  (*b)->ExpectedStart(r, p, std::move(done));
}

bool Router::CanLaunch(int64_t sweep_id, const Resources& r, const Placement& p) {
  absl::StatusOr<Backend*> b = Route(p);
  return b.ok() && (*b)->CanLaunch(sweep_id, r, p);
}

int Router::Running() const {
  int n = 0;
  for (const auto& b : backends_) n += b->Running();
  return n;
}

std::string Router::Describe() const {
  std::vector<std::string> parts;
  for (const auto& b : backends_) {
    parts.push_back(
        absl::StrCat(b->Name(), b->Name() == default_ ? " (default)" : "", ": ", b->Describe()));
  }
  for (const auto& [name, why] : unavailable_)
    parts.push_back(absl::StrCat("no ", name, ": ", why));
  return absl::StrJoin(parts, "; ");
}

absl::Status Router::Launch(const LaunchSpec& spec) {
  absl::StatusOr<Backend*> b = Route(spec.placement);
  if (!b.ok()) return b.status();
  absl::Status s = (*b)->Launch(spec);
  if (s.ok()) trials_[spec.trial_id] = *b;
  return s;
}

absl::Status Router::Stop(int64_t trial_id, absl::Duration grace) {
  auto it = trials_.find(trial_id);
  if (it == trials_.end()) return absl::NotFoundError(absl::StrCat("no trial ", trial_id));
  return it->second->Stop(trial_id, grace);
}

absl::Status Router::SendSignal(int64_t trial_id, int signal) {
  auto it = trials_.find(trial_id);
  if (it == trials_.end()) return absl::NotFoundError(absl::StrCat("no trial ", trial_id));
  return it->second->SendSignal(trial_id, signal);
}

int Router::FreeGpus() const {
  int n = 0;
  for (const auto& b : backends_) n += b->FreeGpus();
  return n;
}

void Router::Act() {
  for (const auto& b : backends_) b->Act();
}

std::vector<BackendEvent> Router::Poll() {
  std::vector<BackendEvent> events;
  for (const auto& b : backends_) {
    for (BackendEvent& e : b->Poll()) {
      if (e.kind == BackendEvent::Kind::kExited || e.kind == BackendEvent::Kind::kLost ||
          e.kind == BackendEvent::Kind::kLaunchFailed) {
        trials_.erase(e.trial_id);
      }
      events.push_back(std::move(e));
    }
  }
  return events;
}

absl::Status Router::Adopt(const LaunchSpec& spec, const std::string& backend_id,
                           const std::string& gpus) {
  absl::StatusOr<Backend*> b = Route(spec.placement);
  if (!b.ok()) return absl::UnavailableError(b.status().message());
  absl::Status s = (*b)->Adopt(spec, backend_id, gpus);
  if (s.ok()) trials_[spec.trial_id] = *b;
  return s;
}

void Router::Reclaim(int64_t trial_id, const std::string& backend_id) {
  Backend* b = nullptr;
  if (auto it = trials_.find(trial_id); it != trials_.end()) {
    b = it->second;
    trials_.erase(it);
  } else {
    for (const auto& candidate : backends_) {
      if (absl::StartsWith(backend_id, candidate->Name() + ":")) b = candidate.get();
    }
  }
  if (b != nullptr) b->Reclaim(trial_id, backend_id);
}

void Router::AdoptAllocation(const AllocationUsage& allocation) {
  for (const auto& b : backends_) {
    if (absl::StartsWith(allocation.id, b->Name() + ":")) b->AdoptAllocation(allocation);
  }
}

void Router::Detach() {
  for (const auto& b : backends_) b->Detach();
  trials_.clear();
}

void Router::SweepEnded(int64_t sweep_id) {
  for (const auto& b : backends_) b->SweepEnded(sweep_id);
}

void Router::SweepReopened(int64_t sweep_id) {
  for (const auto& b : backends_) b->SweepReopened(sweep_id);
}

std::vector<std::string> Router::NodesOf(const std::string& backend_id) const {
  for (const auto& b : backends_) {
    if (absl::StartsWith(backend_id, b->Name() + ":")) return b->NodesOf(backend_id);
  }
  return {};
}

std::optional<absl::Time> Router::InTouchSince(const std::string& backend_id,
                                               absl::Time now) const {
  for (const auto& b : backends_) {
    if (absl::StartsWith(backend_id, b->Name() + ":")) return b->InTouchSince(backend_id, now);
  }
  return absl::InfinitePast();
}

void Router::ExcludeNodes(int64_t sweep_id, const std::set<std::string>& nodes) {
  for (const auto& b : backends_) b->ExcludeNodes(sweep_id, nodes);
}

void Router::SetWakeup(std::function<void()> wake) {
  for (const auto& b : backends_) b->SetWakeup(wake);
}

}  // namespace hpo::backend
