#include "server/core/sweep_table.h"

#include "hpo/v1/states.h"

namespace hpo::server {

Sweep* SweepTable::FindSweep(int64_t id) const {
  auto it = sweeps_.find(id);
  return it == sweeps_.end() ? nullptr : it->second.get();
}

std::pair<Sweep*, TrialRuntime*> SweepTable::FindTrial(int64_t id) const {
  auto it = trials_by_id_.find(id);
  if (it == trials_by_id_.end()) return {nullptr, nullptr};
  return it->second;
}

Sweep& SweepTable::AddSweep(std::unique_ptr<Sweep> sweep) {
  Sweep& s = *sweep;
  sweeps_[s.rec.id] = std::move(sweep);
  return s;
}

void SweepTable::RemoveSweep(int64_t id) {
  auto it = sweeps_.find(id);
  if (it == sweeps_.end()) return;
  for (const auto& t : it->second->trials()) trials_by_id_.erase(t->rec.id);
  sweeps_.erase(it);
}

TrialRuntime& SweepTable::AddTrial(Sweep& sweep, std::unique_ptr<TrialRuntime> trial) {
  TrialRuntime& t = sweep.Add(std::move(trial));
  trials_by_id_[t.rec.id] = {&sweep, &t};
  return t;
}

bool SweepTable::AllEnded() const {
  for (const auto& [id, sweep] : sweeps_) {
    if (!sweep->Final()) return false;
  }
  return true;
}

}  // namespace hpo::server
