#pragma once
// SweepTable: the controller's memory of every sweep (sweep.h) and trial, by id.
//
// Owned by the Controller; its parts (trial lifecycle, report intake, recovery, views) read
// it and change the sweeps through their verbs, on the controller's thread only. No I/O.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/core/sweep.h"

namespace hpo::server {

class SweepTable {
 public:
  Sweep* FindSweep(int64_t id) const;
  std::pair<Sweep*, TrialRuntime*> FindTrial(int64_t id) const;
  Sweep& AddSweep(std::unique_ptr<Sweep> sweep);
  // Forgets the sweep and its trials (`hpo rm`).
  void RemoveSweep(int64_t id);
  // Appends a trial to its sweep (Sweep::Add: its record's number is the next one) and finds
  // it by id from then on.
  TrialRuntime& AddTrial(Sweep& sweep, std::unique_ptr<TrialRuntime> trial);
  const std::map<int64_t, std::unique_ptr<Sweep>>& sweeps() const { return sweeps_; }
  // True when no sweep is RUNNING or PAUSED.
  bool AllEnded() const;

 private:
  std::map<int64_t, std::unique_ptr<Sweep>> sweeps_;
  std::unordered_map<int64_t, std::pair<Sweep*, TrialRuntime*>> trials_by_id_;
};

}  // namespace hpo::server
