// Recovery: the controller's state rebuilt from the store when hpod starts (Controller::Recover),
// and a sweep's runtime built from its stored record.

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/controller.h"
#include "spdlog/spdlog.h"

namespace hpo::server {

absl::StatusOr<std::unique_ptr<Controller::SweepRt>> Controller::BuildSweep(SweepRecord rec) const {
  auto sweep = std::make_unique<SweepRt>();
  ParseResult parsed = ParseSweepSpec(rec.spec_yaml, rec.source, rec.base_dir);
  if (!parsed.spec) {
    return absl::InvalidArgumentError(absl::StrCat("the sweep's spec no longer validates: ",
                                                   parsed.errors.front()));
  }
  sweep->spec = std::move(*parsed.spec);
  auto sampler = algorithms::MakeSampler(sweep->spec.algorithm, sweep->spec.space);
  if (!sampler.ok()) return sampler.status();
  auto stopper = algorithms::MakeStopper(sweep->spec.early_stopping);
  if (!stopper.ok()) return stopper.status();
  sweep->sampler = std::move(*sampler);
  sweep->stopper = std::move(*stopper);
  sweep->stopper_is_none = sweep->stopper->Name() == "none";
  sweep->limit = sweep->spec.TrialLimit(*sweep->sampler);
  sweep->rec = std::move(rec);
  return sweep;
}

absl::Status Controller::Recover() {
  ASSIGN_OR_RETURN(std::vector<SweepRecord> records, store_.LoadSweeps());
  RETURN_IF_ERROR(store_.Begin());
  RETURN_IF_ERROR(store_.FlushReportLog());
  int lost = 0, readopted = 0;
  for (SweepRecord& rec : records) {
    int64_t id = rec.id;
    auto built = BuildSweep(rec);
    std::unique_ptr<SweepRt> sweep;
    if (built.ok()) {
      sweep = std::move(*built);
    } else {
      sweep = std::make_unique<SweepRt>();
      sweep->rec = rec;
      if (!IsFinal(rec.state)) {
        sweep->rec.state = v1::SWEEP_STATE_FAILED;
        sweep->rec.message = std::string(built.status().message());
        sweep->rec.ended_at = clock_.Now();
        RETURN_IF_ERROR(store_.UpdateSweep(sweep->rec));
      }
    }
    absl::StatusOr<std::vector<TrialRecord>> trials = store_.LoadTrials(id);
    if (!trials.ok()) {
      store_.Rollback();
      return trials.status();
    }
    SweepRt& s = *sweep;
    for (TrialRecord& t : *trials) {
      auto rt = std::make_unique<TrialRt>();
      rt->rec = std::move(t);
      if (rt->rec.retry_of == 0) ++s.sampled;
      if (rt->rec.state == v1::TRIAL_STATE_FAILED && !rt->rec.infra_failure) ++s.failed;
      trials_by_id_[rt->rec.id] = {&s, rt.get()};
      s.history.push_back({rt->rec.number, rt->rec.params, IsFinal(rt->rec.state), rt->rec.objective,
                           rt->rec.parent, rt->rec.lineage, s.stopper_is_none ? nullptr : &rt->curve});
      s.objectives.push_back(algorithms::ObjectiveColumn(s.history.back()));
      s.trials.push_back(std::move(rt));
    }
    sweeps_[id] = std::move(sweep);
    // LOST trials whose retry was not created yet are retried now (the retry queue lives in
    // memory only).
    std::set<int64_t> retried;
    for (auto& t : s.trials) {
      if (t->rec.retry_of != 0) retried.insert(t->rec.retry_of);
    }
    for (auto& t : s.trials) {
      if (t->rec.state == v1::TRIAL_STATE_LOST && !retried.count(t->rec.id) && !s.Final() &&
          s.rec.ending == v1::SWEEP_STATE_UNSPECIFIED && t->rec.attempt <= s.spec.max_retries) {
        s.retries.push_back(t->rec.number);
      }
    }
    // An incremental stopper gets its records back: every stored point, trial by trial.
    auto replay = [&s](const TrialRt& t) {
      if (s.stopper == nullptr || !s.stopper->Incremental()) return;
      for (size_t i = 1; i <= t.curve.size(); ++i) {
        (void)s.stopper->Observe({t.rec.number, {t.curve.data(), i}, false}, s.spec.objective.direction);
      }
    };
    for (auto& t : s.trials) {
      bool final = IsFinal(t->rec.state);
      if (final) UpdateBest(s, *t);
      if (final && (s.stopper_is_none || s.Final())) continue;
      // Early stopping compares curves: every trial's comes back from its reports. A trial that
      // ran when the daemon stopped has all its reports in the store, while its row may lag
      // behind by one progress interval: the row is rebuilt from them too.
      ASSIGN_OR_RETURN(std::vector<ReportRecord> reports, store_.LoadReports(t->rec.id));
      for (const ReportRecord& r : reports) {
        auto it = r.metrics.find(s.spec.objective.metric);
        if (it != r.metrics.end() && !s.stopper_is_none) t->curve.emplace_back(r.step, it->second);
      }
      replay(*t);
      if (final) continue;
      if (!reports.empty()) t->last_report = reports.back();
      t->rec.report_count = static_cast<int64_t>(reports.size());
      for (const ReportRecord& r : reports) {
        t->rec.step = r.step;
        for (const auto& [k, v] : r.metrics) t->rec.last_metrics[k] = v;
        auto it = r.metrics.find(s.spec.objective.metric);
        if (it != r.metrics.end()) {
          bool better = !t->rec.objective || IsBetter(it->second, *t->rec.objective, s.spec.objective.direction);
          if (!s.spec.objective.use_best || better) t->rec.objective = it->second;
        }
      }
      // The trial may still run (it outlives the daemon), or have ended while hpod was away:
      // the backend looks for it. A trial that was only waiting to start waits again.
      ++s.active;  // EndTrial takes it back
      absl::Status adopted = backend_.Adopt(MakeLaunchSpec(s, *t), t->rec.backend_id, t->rec.gpus);
      if (adopted.ok()) {
        ++readopted;
        continue;
      }
      if (t->rec.state == v1::TRIAL_STATE_PENDING && absl::IsNotFound(adopted)) {
        s.pending.push_back(t->rec.number);
        continue;
      }
      backend_.Reclaim(t->rec.id, t->rec.backend_id);
      t->rec.infra_failure = true;
      EndTrial(s, *t, v1::TRIAL_STATE_LOST,
               absl::StrCat("hpod restarted while the trial ran, and ", adopted.message()));
      ++lost;
    }
    // A sweep that was ending when the daemon stopped still ends: its re-adopted trials are
    // stopped again (the earlier request lived in memory only).
    if (s.rec.ending != v1::SWEEP_STATE_UNSPECIFIED && !s.Final()) {
      v1::SweepState ending = s.rec.ending;
      std::string message = s.rec.message;
      s.rec.ending = v1::SWEEP_STATE_UNSPECIFIED;
      BeginEnding(s, ending, message);
    }
  }
  absl::Status commit = store_.Commit();
  if (!commit.ok()) return commit;
  for (auto& [sweep_id, event] : unpublished_) committed_seq_ = std::max(committed_seq_, event.seq());
  unpublished_.clear();
  spdlog::info("recovered {} sweep(s): {} trial(s) re-adopted, {} LOST and retried per policy",
               sweeps_.size(), readopted, lost);
  return absl::OkStatus();
}

}  // namespace hpo::server
