#pragma once
// FaultyStore: a pass-through Store (StoreWrapper) that fails a chosen call with a chosen code, a
// chosen number of times (LevelDB's fault-injection env, for the store).
//
// A failed write takes nothing. A failed Commit behaves as the Store contract says a failed
// commit does: the transaction's writes are kept (the inner store's transaction stays open),
// Health() is UNAVAILABLE with the injected message, and the next Commit that is not failed
// commits them together with that batch's writes.

#include "server/store/store_wrapper.h"
#include "tests/fakes/fault_plan.h"

namespace hpo::fakes {

class FaultyStore final : public server::StoreWrapper {
 public:
  enum class Call {
    kBegin,
    kCommit,
    kInsertSweep,
    kUpdateSweep,
    kDeleteSweep,
    kInsertTrial,
    kUpdateTrial,
    kInsertReport,
    kInsertEvent,
    kWriteAllocation,
    kLoadSweeps,
    kLoadTrials,
    kLoadReports,
    kLoadEvents,
    kLoadAllocations,
  };
  explicit FaultyStore(server::Store& inner) : StoreWrapper(inner) {}

  // The next `times` calls of `call` fail with `code` (and a message naming the call).
  void Fail(Call call, absl::StatusCode code, int times = 1) { faults_.Fail(call, code, times); }
  int failed() const { return faults_.failed(); }  // injected failures so far

  [[nodiscard]] absl::Status Begin() override;
  [[nodiscard]] absl::Status Commit() override;
  void Rollback() override;
  [[nodiscard]] absl::Status Health() const override;
  [[nodiscard]] absl::StatusOr<int64_t> InsertSweep(const server::SweepRecord& sweep) override;
  [[nodiscard]] absl::Status UpdateSweep(const server::SweepRecord& sweep) override;
  [[nodiscard]] absl::Status DeleteSweep(int64_t sweep_id) override;
  [[nodiscard]] absl::StatusOr<int64_t> InsertTrial(const server::TrialRecord& trial) override;
  [[nodiscard]] absl::Status UpdateTrial(const server::TrialRecord& trial) override;
  [[nodiscard]] absl::Status InsertReport(const server::ReportRecord& report) override;
  [[nodiscard]] absl::StatusOr<int64_t> InsertEvent(const server::EventRecord& event) override;
  [[nodiscard]] absl::Status WriteAllocation(const server::AllocationRecord& allocation) override;
  [[nodiscard]] absl::StatusOr<std::vector<server::SweepRecord>> LoadSweeps() override;
  [[nodiscard]] absl::StatusOr<std::vector<server::TrialRecord>> LoadTrials(
      int64_t sweep_id) override;
  [[nodiscard]] absl::StatusOr<std::vector<server::ReportRecord>> LoadReports(
      int64_t trial_id) override;
  [[nodiscard]] absl::StatusOr<std::vector<server::AllocationRecord>> LoadAllocations(
      int64_t sweep_id) override;
  [[nodiscard]] absl::StatusOr<std::vector<server::EventRecord>> LoadEvents(int64_t sweep_id,
                                                                            int64_t after_seq,
                                                                            int limit) override;

 private:
  // The injected error for `call`, or OK.
  [[nodiscard]] absl::Status Injected(Call call, const char* name);

  FaultPlan<Call> faults_;
  bool kept_open_ = false;  // a failed Commit left the inner transaction open
  absl::Status health_;
};

}  // namespace hpo::fakes
