#pragma once
// Router: one Backend made of several (local, Slurm), so that one hpod serves sweeps on each at
// once. Every trial goes to the backend its placement names (the sweep's `backend:`), or to the
// default one when it names none; a backend that is not available (Slurm not configured, or
// slurmctld not answering when hpod started) refuses the trial with the reason, never hands it
// to another.
//
// The trials' ids say which backend holds them: those launched or adopted here are remembered
// until they end; a trial to reclaim is found by its backend id's prefix ("local:", "slurm:").
//
// Thread safety: as Backend (controller thread only, except SetWakeup).

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"

namespace hpo::backend {

class Router final : public Backend {
 public:
  // `default_name`: the backend of trials whose placement names none.
  explicit Router(std::string default_name) : default_(std::move(default_name)) {}

  // A backend trials may go to, under its Name().
  void Add(std::unique_ptr<Backend> backend);
  // A backend that is not there, and why ("no slurm.conf found ..."): trials asking for it are
  // refused with this reason.
  void AddUnavailable(const std::string& name, const std::string& why);

  // Capacity.
  [[nodiscard]] absl::Status CheckFits(const Resources& r, const Placement& p) override;
  bool CanLaunch(int64_t sweep_id, const Resources& r, const Placement& p) override;
  void Vet(int64_t sweep_id, const Resources& r, const Placement& p, bool starts_now,
           Vetted done) override;
  void ExpectedStart(const Resources& r, const Placement& p, Started done) override;
  int Running() const override;
  int FreeGpus() const override;
  std::string Describe() const override;

  // Lifecycle.
  std::string Name() const override { return default_; }
  [[nodiscard]] absl::StatusOr<std::string> Resolve(const Placement& p) const override;
  [[nodiscard]] absl::Status Launch(const LaunchSpec& spec) override;
  [[nodiscard]] absl::Status Stop(int64_t trial_id, absl::Duration grace) override;
  [[nodiscard]] absl::Status SendSignal(int64_t trial_id, int signal) override;
  void Act() override;
  std::vector<BackendEvent> Poll() override;
  [[nodiscard]] absl::Status Adopt(const LaunchSpec& spec, const std::string& backend_id,
                                   const std::string& gpus) override;
  void Reclaim(int64_t trial_id, const std::string& backend_id) override;
  // To the backend its id names ("slurm:...").
  void AdoptAllocation(const AllocationUsage& allocation) override;
  void Detach() override;
  void SweepEnded(int64_t sweep_id) override;
  void SweepReopened(int64_t sweep_id) override;
  // To the backend its id names.
  std::vector<std::string> NodesOf(const std::string& backend_id) const override;
  std::optional<absl::Time> InTouchSince(const std::string& backend_id,
                                         absl::Time now) const override;
  void ExcludeNodes(int64_t sweep_id, const std::set<std::string>& nodes) override;
  void SetWakeup(std::function<void()> wake) override;

  // The backend named so, or null when it is not there.
  Backend* Find(const std::string& name) const;

 private:
  // The backend for `p`, or INVALID_ARGUMENT saying why there is none.
  [[nodiscard]] absl::StatusOr<Backend*> Route(const Placement& p) const;
  std::vector<std::string> Names() const;

  std::string default_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::map<std::string, std::string> unavailable_;  // name -> why
  std::unordered_map<int64_t, Backend*> trials_;    // launched or adopted, not ended yet
};

}  // namespace hpo::backend
