#pragma once
// BackendWrapper: a Backend that forwards every call to another one (LevelDB's EnvWrapper). A
// backend that changes one verb of another (a fault-injecting fake, a tracing layer) derives
// from it and overrides that verb alone; a verb added to Backend is forwarded here once.
//
// Thread safety: that of the wrapped backend.

#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace hpo::backend {

class BackendWrapper : public Backend {
 public:
  explicit BackendWrapper(Backend& inner) : inner_(inner) {}
  Backend& inner() const { return inner_; }

  // Capacity.
  [[nodiscard]] absl::Status CheckFits(const Resources& r, const Placement& p) override {
    return inner_.CheckFits(r, p);
  }
  bool CanLaunch(int64_t sweep_id, const Resources& r, const Placement& p) override {
    return inner_.CanLaunch(sweep_id, r, p);
  }
  void Vet(int64_t sweep_id, const Resources& r, const Placement& p, bool starts_now,
           Vetted done) override {
    inner_.Vet(sweep_id, r, p, starts_now, std::move(done));
  }
  void ExpectedStart(const Resources& r, const Placement& p, Started done) override {
    inner_.ExpectedStart(r, p, std::move(done));
  }
  int Running() const override { return inner_.Running(); }
  int FreeGpus() const override { return inner_.FreeGpus(); }
  std::string Describe() const override { return inner_.Describe(); }

  // Verbs.
  std::string Name() const override { return inner_.Name(); }
  [[nodiscard]] absl::StatusOr<std::string> Resolve(const Placement& p) const override {
    return inner_.Resolve(p);
  }
  [[nodiscard]] absl::Status Launch(const LaunchSpec& spec) override { return inner_.Launch(spec); }
  [[nodiscard]] absl::Status Stop(int64_t trial_id, absl::Duration grace) override {
    return inner_.Stop(trial_id, grace);
  }
  [[nodiscard]] absl::Status SendSignal(int64_t trial_id, int signal) override {
    return inner_.SendSignal(trial_id, signal);
  }
  void Act() override { inner_.Act(); }
  std::vector<BackendEvent> Poll() override { return inner_.Poll(); }
  [[nodiscard]] absl::Status Adopt(const LaunchSpec& spec, const std::string& backend_id,
                                   const std::string& gpus) override {
    return inner_.Adopt(spec, backend_id, gpus);
  }
  void AdoptAllocation(const AllocationUsage& allocation) override {
    inner_.AdoptAllocation(allocation);
  }
  void Reclaim(int64_t trial_id, const std::string& backend_id) override {
    inner_.Reclaim(trial_id, backend_id);
  }
  void Detach() override { inner_.Detach(); }
  void SweepEnded(int64_t sweep_id) override { inner_.SweepEnded(sweep_id); }
  void SweepReopened(int64_t sweep_id) override { inner_.SweepReopened(sweep_id); }
  std::vector<std::string> NodesOf(const std::string& backend_id) const override {
    return inner_.NodesOf(backend_id);
  }
  std::optional<absl::Time> InTouchSince(const std::string& backend_id,
                                         absl::Time now) const override {
    return inner_.InTouchSince(backend_id, now);
  }
  void ExcludeNodes(int64_t sweep_id, const std::set<std::string>& nodes) override {
    inner_.ExcludeNodes(sweep_id, nodes);
  }
  void SetWakeup(std::function<void()> wake) override { inner_.SetWakeup(std::move(wake)); }

 private:
  Backend& inner_;
};

}  // namespace hpo::backend
