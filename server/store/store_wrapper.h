#pragma once
// StoreWrapper: a Store that forwards every call to another one (LevelDB's EnvWrapper). A store
// that changes some calls of another (a fault-injecting fake) derives from it and overrides
// those alone; a call added to Store is forwarded here once.
//
// Thread safety: that of the wrapped store.

#include <memory>
#include <vector>

#include "server/store/store.h"

namespace hpo::server {

class StoreWrapper : public Store {
 public:
  explicit StoreWrapper(Store& inner) : inner_(inner) {}
  Store& inner() const { return inner_; }

  [[nodiscard]] absl::Status Begin() override { return inner_.Begin(); }
  [[nodiscard]] absl::Status Commit() override { return inner_.Commit(); }
  void Rollback() override { inner_.Rollback(); }
  [[nodiscard]] absl::Status Health() const override { return inner_.Health(); }
  [[nodiscard]] absl::StatusOr<int64_t> InsertSweep(const SweepRecord& sweep) override {
    return inner_.InsertSweep(sweep);
  }
  [[nodiscard]] absl::Status UpdateSweep(const SweepRecord& sweep) override {
    return inner_.UpdateSweep(sweep);
  }
  [[nodiscard]] absl::Status DeleteSweep(int64_t sweep_id) override {
    return inner_.DeleteSweep(sweep_id);
  }
  [[nodiscard]] absl::StatusOr<int64_t> InsertTrial(const TrialRecord& trial) override {
    return inner_.InsertTrial(trial);
  }
  [[nodiscard]] absl::Status UpdateTrial(const TrialRecord& trial) override {
    return inner_.UpdateTrial(trial);
  }
  [[nodiscard]] absl::Status InsertReport(const ReportRecord& report) override {
    return inner_.InsertReport(report);
  }
  [[nodiscard]] absl::StatusOr<int64_t> InsertEvent(const EventRecord& event) override {
    return inner_.InsertEvent(event);
  }
  [[nodiscard]] absl::Status WriteAllocation(const AllocationRecord& allocation) override {
    return inner_.WriteAllocation(allocation);
  }
  [[nodiscard]] absl::StatusOr<std::vector<SweepRecord>> LoadSweeps() override {
    return inner_.LoadSweeps();
  }
  [[nodiscard]] absl::StatusOr<std::vector<TrialRecord>> LoadTrials(int64_t sweep_id) override {
    return inner_.LoadTrials(sweep_id);
  }
  [[nodiscard]] absl::StatusOr<std::vector<ReportRecord>> LoadReports(int64_t trial_id) override {
    return inner_.LoadReports(trial_id);
  }
  [[nodiscard]] absl::StatusOr<std::vector<EventRecord>> LoadTrialEvents(int64_t trial_id,
                                                                         int limit) override {
    return inner_.LoadTrialEvents(trial_id, limit);
  }
  [[nodiscard]] absl::StatusOr<std::vector<AllocationRecord>> LoadAllocations(
      int64_t sweep_id) override {
    return inner_.LoadAllocations(sweep_id);
  }
  [[nodiscard]] absl::StatusOr<std::vector<EventRecord>> LoadEvents(int64_t sweep_id,
                                                                    int64_t after_seq,
                                                                    int limit) override {
    return inner_.LoadEvents(sweep_id, after_seq, limit);
  }
  int SchemaVersion() const override { return inner_.SchemaVersion(); }
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Store>> OpenReader() const override {
    return inner_.OpenReader();
  }

 private:
  Store& inner_;
};

}  // namespace hpo::server
