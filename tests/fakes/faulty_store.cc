#include "tests/fakes/faulty_store.h"

namespace hpo::fakes {

absl::Status FaultyStore::Begin() {
  if (absl::Status s = faults_.Next(Call::kBegin, "Begin"); !s.ok()) return s;
  if (kept_open_) return absl::OkStatus();  // the kept writes' transaction goes on
  return inner().Begin();
}

absl::Status FaultyStore::Commit() {
  if (absl::Status s = faults_.Next(Call::kCommit, "Commit"); !s.ok()) {
    kept_open_ = true;
    health_ = absl::UnavailableError(s.message());
    return s;
  }
  absl::Status s = inner().Commit();
  if (s.ok()) {
    kept_open_ = false;
    health_ = absl::OkStatus();
  }
  return s;
}

void FaultyStore::Rollback() {
  kept_open_ = false;
  inner().Rollback();
}

absl::Status FaultyStore::Health() const {
  if (!health_.ok()) return health_;
  return inner().Health();
}

absl::StatusOr<int64_t> FaultyStore::InsertSweep(const server::SweepRecord& sweep) {
  if (absl::Status s = faults_.Next(Call::kInsertSweep, "InsertSweep"); !s.ok()) return s;
  return inner().InsertSweep(sweep);
}

absl::Status FaultyStore::DeleteSweep(int64_t sweep_id) {
  if (absl::Status s = faults_.Next(Call::kDeleteSweep, "DeleteSweep"); !s.ok()) return s;
  return inner().DeleteSweep(sweep_id);
}

absl::Status FaultyStore::UpdateSweep(const server::SweepRecord& sweep) {
  if (absl::Status s = faults_.Next(Call::kUpdateSweep, "UpdateSweep"); !s.ok()) return s;
  return inner().UpdateSweep(sweep);
}

absl::StatusOr<int64_t> FaultyStore::InsertTrial(const server::TrialRecord& trial) {
  if (absl::Status s = faults_.Next(Call::kInsertTrial, "InsertTrial"); !s.ok()) return s;
  return inner().InsertTrial(trial);
}

absl::Status FaultyStore::UpdateTrial(const server::TrialRecord& trial) {
  if (absl::Status s = faults_.Next(Call::kUpdateTrial, "UpdateTrial"); !s.ok()) return s;
  return inner().UpdateTrial(trial);
}

absl::Status FaultyStore::InsertReport(const server::ReportRecord& report) {
  if (absl::Status s = faults_.Next(Call::kInsertReport, "InsertReport"); !s.ok()) return s;
  return inner().InsertReport(report);
}

absl::StatusOr<int64_t> FaultyStore::InsertEvent(const server::EventRecord& event) {
  if (absl::Status s = faults_.Next(Call::kInsertEvent, "InsertEvent"); !s.ok()) return s;
  return inner().InsertEvent(event);
}

absl::Status FaultyStore::WriteAllocation(const server::AllocationRecord& allocation) {
  if (absl::Status s = faults_.Next(Call::kWriteAllocation, "WriteAllocation"); !s.ok()) return s;
  return inner().WriteAllocation(allocation);
}

absl::StatusOr<std::vector<server::SweepRecord>> FaultyStore::LoadSweeps() {
  if (absl::Status s = faults_.Next(Call::kLoadSweeps, "LoadSweeps"); !s.ok()) return s;
  return inner().LoadSweeps();
}

absl::StatusOr<std::vector<server::TrialRecord>> FaultyStore::LoadTrials(int64_t sweep_id) {
  if (absl::Status s = faults_.Next(Call::kLoadTrials, "LoadTrials"); !s.ok()) return s;
  return inner().LoadTrials(sweep_id);
}

absl::StatusOr<std::vector<server::ReportRecord>> FaultyStore::LoadReports(int64_t trial_id) {
  if (absl::Status s = faults_.Next(Call::kLoadReports, "LoadReports"); !s.ok()) return s;
  return inner().LoadReports(trial_id);
}

absl::StatusOr<std::vector<server::AllocationRecord>> FaultyStore::LoadAllocations(
    int64_t sweep_id) {
  if (absl::Status s = faults_.Next(Call::kLoadAllocations, "LoadAllocations"); !s.ok()) return s;
  return inner().LoadAllocations(sweep_id);
}

absl::StatusOr<std::vector<server::EventRecord>> FaultyStore::LoadEvents(int64_t sweep_id,
                                                                         int64_t after_seq,
                                                                         int limit) {
  if (absl::Status s = faults_.Next(Call::kLoadEvents, "LoadEvents"); !s.ok()) return s;
  return inner().LoadEvents(sweep_id, after_seq, limit);
}

}  // namespace hpo::fakes
