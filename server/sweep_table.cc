#include "server/sweep_table.h"

#include <algorithm>
#include <limits>

#include "hpo/v1/states.h"
#include "server/objectives.h"

namespace hpo::server {

bool SweepRuntime::Final() const { return v1::IsFinal(rec.state); }

int SweepRuntime::TrialGpus(const TrialRecord& trial) const {
  backend::Resources r = spec().TrialResources(trial.params);
  return r.gpus * r.nodes;
}

double SweepRuntime::GpuSeconds(const TrialRecord& trial, absl::Time now) const {
  double total = trial.gpu_seconds;
  if (!v1::IsFinal(trial.state) && trial.state == v1::TRIAL_STATE_RUNNING &&
      trial.segment_started_at) {
    total += absl::ToDoubleSeconds(now - *trial.segment_started_at) * TrialGpus(trial);
  }
  return total;
}

bool SweepRuntime::MoreToCreate() const {
  if (budget_spent) return false;
  return !retries.empty() || !rec.queue.empty() ||
         (!exhausted && (plan.limit == 0 || Counted() < plan.limit));
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

void SweepTable::RemoveSweep(int64_t id) {
  auto it = sweeps_.find(id);
  if (it == sweeps_.end()) return;
  for (const auto& t : it->second->trials) trials_by_id_.erase(t->rec.id);
  sweeps_.erase(it);
}

TrialRuntime& SweepTable::AddTrial(SweepRuntime& sweep, std::unique_ptr<TrialRuntime> trial) {
  TrialRuntime& t = *trial;
  const TrialRecord& rec = t.rec;
  trials_by_id_[rec.id] = {&sweep, &t};
  sweep.history.push_back({rec.number, rec.params, v1::IsFinal(rec.state), rec.objective,
                           rec.parent, rec.lineage, sweep.plan.keeps_curves ? &t.curve : nullptr});
  if (sweep.plan.keeps_curves && !sweep.plan.directions.empty()) {
    sweep.history.back().vectors = &t.vectors;
  }
  sweep.objectives.push_back(algorithms::ObjectiveColumn(sweep.history.back()));
  sweep.trials.push_back(std::move(trial));
  if (v1::IsFinal(rec.state)) {
    NoteScores(sweep, t);
    NoteRunTime(sweep, rec);
  }
  return t;
}

void SweepTable::NoteRunTime(SweepRuntime& sweep, const TrialRecord& rec) {
  if (rec.state != v1::TRIAL_STATE_COMPLETED || rec.segment != 1 || !rec.started_at ||
      !rec.ended_at) {
    return;
  }
  sweep.longest_completed = std::max(sweep.longest_completed, *rec.ended_at - *rec.started_at);
}

void SweepTable::MarkFinished(SweepRuntime& sweep, const TrialRuntime& trial) {
  size_t n = static_cast<size_t>(trial.rec.number);
  if (n >= sweep.history.size()) return;
  algorithms::HistoryEntry& h = sweep.history[n];
  h.finished = true;
  h.objective = trial.rec.objective;
  sweep.objectives[n] = algorithms::ObjectiveColumn(h);
  NoteScores(sweep, trial);
  NoteRunTime(sweep, trial.rec);
}

void SweepTable::NoteScores(SweepRuntime& sweep, const TrialRuntime& trial) {
  algorithms::HistoryEntry& h = sweep.history[static_cast<size_t>(trial.rec.number)];
  h.stopped = trial.rec.state == v1::TRIAL_STATE_STOPPED;
  if (!sweep.spec().Pareto()) return;
  Scores scores = ScoresOf(sweep.spec(), trial.rec.last_metrics);
  h.values = std::move(scores.values);
  h.violation = scores.violation;
  UpdateFront(sweep, trial);
  // One objective under constraints: the best is the front's (its members tie).
  if (sweep.spec().objectives.size() == 1) sweep.best = sweep.front.empty() ? -1 : sweep.front[0];
}

bool SweepTable::AllEnded() const {
  for (const auto& [id, sweep] : sweeps_) {
    if (!sweep->Final()) return false;
  }
  return true;
}

}  // namespace hpo::server
