#pragma once
// ReportIntake: a trial's report, from the request to the reply. It checks the trial's token
// and the report (metric names, finite values, the step's range), recognizes a client's retry
// of a report that is stored already, stores the report, applies it to the trial's record,
// tells the stopper the new point and answers continue or stop (early stopping, or the sweep's
// goal reached). Reports a trial kept in its journal while hpod was away come in late, through
// the report call when hpod answers again, or through Late when the trial ended first.
//
// Threads: the controller's thread only (inside a batch; the reply is sent after its commit).
// Errors: UNAUTHENTICATED (unknown trial or wrong token: the caller cannot tell which),
// FAILED_PRECONDITION (the trial ended), INVALID_ARGUMENT (a bad report; nothing stored),
// UNAVAILABLE (the store cannot be written now; the client retries).

#include <map>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "common/report_journal.h"
#include "hpo/v1/hpo.pb.h"
#include "server/core/sweep_table.h"
#include "server/core/trial_lifecycle.h"
#include "server/spec/sweep_spec.h"
#include "server/store/store.h"

namespace hpo::server {

// A resumed segment (segment > 1) that reports a step the trial had reached already (`reached`)
// repeats work done since its last checkpoint: the report is stored, but the trial's curve,
// objective and early stopping keep the values first reported.
inline bool RepeatsEarlierStep(int segment, int64_t step, std::optional<int64_t> reached) {
  return segment > 1 && reached && step <= *reached;
}

// Applies one stored report to a trial's record: its step, report count, last metrics and
// objective (the objective metric's last value, or its best with `use: best`). Returns the
// objective metric's value when the report has it and does not repeat an earlier step. The
// report path and recovery both use it.
std::optional<double> ApplyReport(const ReportRecord& report, const Objective& objective,
                                  TrialRecord& rec);

// The trial's curve as a stopper reads it (with its points' scores when ranked by Pareto).
algorithms::Curve CurveOf(const TrialRuntime& trial);

// Ranked by Pareto, with curves: the trial's scores at `step` (its last metrics as of the report
// at `at`, and what hpod measured of it by then) as its curve's next point. False when the curve
// is at or past `step` already (a resumed segment repeating work), or an objective has no value
// yet.
bool AppendScores(const Sweep& sweep, TrialRuntime& trial, int64_t step, absl::Time at);

class ReportIntake {
 public:
  ReportIntake(SweepTable& table, Store& store, TrialLifecycle& lifecycle, const Clock& clock)
      : table_(table), store_(store), lifecycle_(lifecycle), clock_(clock) {}

  // A report from a trial that proves its token (`req.proof`) or, from an older client, sends it
  // (`token`, "" for none). The answer to a proven report carries hpod's proof; so does a refusal
  // of one (after the proof checked), in `refusal_proof` (ReportRefusalProof).
  [[nodiscard]] absl::StatusOr<v1::ReportResponse> Report(const v1::ReportRequest& req,
                                                          absl::string_view token,
                                                          std::string* refusal_proof = nullptr);
  // Reports a trial left in its journal that hpod had not heard (TrialLifecycle::LateReports),
  // read when its command ended or, `running`, while it runs silent: each one hpod has not
  // stored yet (by its id) is stored and applied as if it had come in time; a stop it would
  // decide applies to a trial that runs, and comes too late for one that ended. A report that
  // fails the checks is skipped and logged.
  void Late(Sweep& sweep, TrialRuntime& trial, const std::vector<JournalEntry>& entries,
            bool running);

 private:
  // The report of a trial whose token checked: stored and answered, or refused.
  [[nodiscard]] absl::StatusOr<v1::ReportResponse> Accept(Sweep& sweep, TrialRuntime& trial,
                                                          const v1::ReportRequest& req);
  // Stores a checked report of a trial that has not ended, applies it and judges it (with
  // `may_stop`, a stop the stopper decides is requested).
  [[nodiscard]] absl::Status Take(Sweep& sweep, TrialRuntime& trial, const v1::ReportRequest& req,
                                  bool may_stop);
  // Checks what can be checked without state; INVALID_ARGUMENT naming the trial otherwise.
  [[nodiscard]] static absl::Status Validate(const v1::ReportRequest& req, int64_t trial_id);
  // The proof a report made with `token` carries (common/proofs.h).
  static std::string ProofOf(const v1::ReportRequest& req, absl::string_view token);
  // True when `report` repeats the trial's last stored one (a client's retry).
  static bool IsRetry(const TrialRuntime& trial, const v1::ReportRequest& req);
  // A report older than the trial's last (a backlog a sender delivers after hpod took the same
  // reports from the journal) whose id is past the recent ones: the step it was stored under,
  // when the store has it. The ids of one trial are read once and kept while its late reports
  // come (late_).
  std::optional<int64_t> StoredEarlier(const TrialRuntime& trial, const v1::ReportRequest& req);
  struct LateIds {
    int64_t trial_id = 0;
    std::map<int64_t, int64_t> steps;  // report id -> step
  };
  LateIds late_;
  // The stopper and the goal, once the report brought a point of the objective metric.
  void Judge(Sweep& sweep, TrialRuntime& trial, int64_t step, double value, bool may_stop);

  SweepTable& table_;
  Store& store_;
  TrialLifecycle& lifecycle_;
  const Clock& clock_;
};

}  // namespace hpo::server
