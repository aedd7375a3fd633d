#include "server/sweep_table.h"

#include <limits>

#include "hpo/v1/states.h"

namespace hpo::server {

bool SweepRuntime::Final() const { return v1::IsFinal(rec.state); }

bool SweepRuntime::MoreToCreate() const {
  return !retries.empty() || (!exhausted && (plan.limit == 0 || sampled < plan.limit));
}

SweepRuntime* SweepTable::FindSweep(int64_t id) const {
  auto it = sweeps_.find(id);
  return it == sweeps_.end() ? nullptr : it->second.get();
}

std::pair<SweepRuntime*, TrialRuntime*> SweepTable::FindTrial(int64_t id) const {
  auto it = trials_by_id_.find(id);
  if (it == trials_by_id_.end()) return {nullptr, nullptr};
  return it->second;
}

SweepRuntime& SweepTable::AddSweep(std::unique_ptr<SweepRuntime> sweep) {
  SweepRuntime& s = *sweep;
  sweeps_[s.rec.id] = std::move(sweep);
  return s;
}

TrialRuntime& SweepTable::AddTrial(SweepRuntime& sweep, std::unique_ptr<TrialRuntime> trial) {
  TrialRuntime& t = *trial;
  const TrialRecord& rec = t.rec;
  trials_by_id_[rec.id] = {&sweep, &t};
  sweep.history.push_back({rec.number, rec.params, v1::IsFinal(rec.state), rec.objective,
                           rec.parent, rec.lineage, sweep.plan.keeps_curves ? &t.curve : nullptr});
  sweep.objectives.push_back(algorithms::ObjectiveColumn(sweep.history.back()));
  sweep.trials.push_back(std::move(trial));
  return t;
}

void SweepTable::MarkFinished(SweepRuntime& sweep, const TrialRuntime& trial) {
  size_t n = static_cast<size_t>(trial.rec.number);
  if (n >= sweep.history.size()) return;
  algorithms::HistoryEntry& h = sweep.history[n];
  h.finished = true;
  h.objective = trial.rec.objective;
  sweep.objectives[n] = algorithms::ObjectiveColumn(h);
}

bool SweepTable::AllEnded() const {
  for (const auto& [id, sweep] : sweeps_) {
    if (!sweep->Final()) return false;
  }
  return true;
}

}  // namespace hpo::server
