#include "server/core/sweep.h"

#include <algorithm>

#include "hpo/v1/states.h"
#include "server/core/budget.h"
#include "server/core/objectives.h"
#include "server/core/usage.h"

namespace hpo::server {

bool Sweep::Final() const { return v1::IsFinal(rec.state); }

bool Sweep::MoreToCreate() const {
  if (budget_spent_) return false;
  return !retries_.empty() || !rec.queue.empty() ||
         (!exhausted_ && (plan.limit == 0 || Counted() < plan.limit));
}

std::vector<int> Sweep::ParetoRanks() const {
  return server::ParetoRanks(spec(), trials_.size(), [this](int64_t n) -> const TrialRecord& {
    return trials_[static_cast<size_t>(n)]->rec;
  });
}

// --- GPU time

int Sweep::TrialGpus(const TrialRecord& trial) const {
  backend::Resources r = spec().TrialResources(trial.params);
  return r.gpus * r.nodes;
}

double Sweep::SegmentGpuSeconds(const TrialRecord& trial, absl::Time start, absl::Time end) const {
  return std::max(0.0, absl::ToDoubleSeconds(end - start)) * TrialGpus(trial);
}

double Sweep::GpuSeconds(const TrialRecord& trial, absl::Time now) const {
  double total = trial.gpu_seconds;
  if (trial.state == v1::TRIAL_STATE_RUNNING && trial.segment_started_at) {
    total += SegmentGpuSeconds(trial, *trial.segment_started_at, now);
  }
  return total;
}

// --- Verbs: the sweep's own state

std::set<std::string> Sweep::QuarantinedNodes() const {
  std::set<std::string> out;
  for (const auto& [name, n] : rec.nodes) {
    if (n.quarantined) out.insert(name);
  }
  return out;
}

void Sweep::Pause(std::string message) {
  rec.state = v1::SWEEP_STATE_PAUSED;
  rec.message = std::move(message);
}

void Sweep::Resume(std::string message) {
  rec.state = v1::SWEEP_STATE_RUNNING;
  rec.message = std::move(message);
}

bool Sweep::BeginEnding(v1::SweepState state, std::string message, bool override) {
  if (Final() || (Ending() && !override)) return false;
  rec.ending = state;
  rec.message = std::move(message);
  retries_.clear();
  return true;
}

void Sweep::Finish(v1::SweepState state, std::string message, absl::Time at) {
  rec.state = state;
  rec.ending = v1::SWEEP_STATE_UNSPECIFIED;
  rec.message = std::move(message);
  rec.ended_at = at;
}

bool Sweep::Reopen(std::string message) {
  bool reopens = Final() || Ending();
  if (Final()) {
    rec.state = v1::SWEEP_STATE_RUNNING;
    rec.ended_at.reset();
  }
  rec.ending = v1::SWEEP_STATE_UNSPECIFIED;
  rec.message = std::move(message);
  return reopens;
}

void Sweep::Enqueue(std::vector<algorithms::Params> points) {
  for (auto& p : points) rec.queue.push_back(std::move(p));
}

void Sweep::NoteApplied(const std::string& key, const std::string& fingerprint) {
  if (key.empty()) return;
  constexpr size_t kKept = 64;  // retries come within minutes; a sweep is changed rarely
  rec.applied.emplace_back(key, fingerprint);
  if (rec.applied.size() > kKept) rec.applied.erase(rec.applied.begin(), rec.applied.end() - kKept);
}

// --- Verbs: its trials, counts and budgets

TrialRuntime& Sweep::Add(std::unique_ptr<TrialRuntime> trial) {
  TrialRuntime& t = *trial;
  const TrialRecord& r = t.rec;
  if (r.retry_of == 0 && r.origin == kEnqueued) ++enqueued_;
  if (r.retry_of == 0 && r.origin.empty()) ++sampled_;
  if (r.state == v1::TRIAL_STATE_FAILED && !r.infra_failure) ++failed_;
  if (!v1::IsFinal(r.state)) ++active_;
  history_.push_back({r.number, r.params, v1::IsFinal(r.state), r.objective, r.parent, r.lineage,
                      plan.keeps_curves ? &t.curve : nullptr});
  if (plan.keeps_curves && !plan.directions.empty()) history_.back().vectors = &t.vectors;
  objectives_.push_back(algorithms::ObjectiveColumn(history_.back()));
  trials_.push_back(std::move(trial));
  if (v1::IsFinal(r.state)) NoteFinished(t);
  return t;
}

algorithms::SuggestRequest Sweep::NextRequest() const {
  algorithms::SuggestRequest req;
  req.space = &spec().space;
  req.history = &history_;
  req.objectives = &objectives_;
  req.trial_number = sampled_;
  req.seed = spec().seed;
  req.direction = spec().objective.direction;
  if (!plan.directions.empty()) req.directions = &plan.directions;
  return req;
}

std::pair<std::string, std::string> Sweep::Choices() const {
  // A stored sweep that could not be planned again (it ended FAILED at start) has neither.
  return {plan.sampler ? plan.sampler->Choice(NextRequest()) : "",
          plan.stopper ? plan.stopper->Choice() : ""};
}

bool Sweep::ChoicesChanged() {
  std::pair<std::string, std::string> now = Choices();
  if (now == choices_) return false;
  choices_ = std::move(now);
  return true;
}

Sweep::Ended Sweep::TrialEnded(const TrialRuntime& trial) {
  const TrialRecord& r = trial.rec;
  Ended ended;
  --active_;
  pending_.erase(std::remove(pending_.begin(), pending_.end(), r.number), pending_.end());
  size_t n = static_cast<size_t>(r.number);
  algorithms::HistoryEntry& h = history_[n];
  h.finished = true;
  h.objective = r.objective;
  objectives_[n] = algorithms::ObjectiveColumn(h);
  NoteFinished(trial);
  if (r.state == v1::TRIAL_STATE_LOST && r.attempt <= spec().max_retries && !Ending() && !Final()) {
    retries_.push_back(r.number);
    ended.retried = true;
  }
  if (r.state == v1::TRIAL_STATE_FAILED && !r.infra_failure) {
    ++failed_;
    int64_t max_failed = spec().budget.max_failed;
    ended.max_failed_hit = max_failed > 0 && failed_ >= max_failed;
  }
  return ended;
}

void Sweep::NoteFinished(const TrialRuntime& trial) {
  NoteScores(trial);
  UpdateBest(trial);
  const TrialRecord& r = trial.rec;
  if (r.state == v1::TRIAL_STATE_COMPLETED && r.segment == 1 && r.started_at && r.ended_at) {
    longest_completed_ = std::max(longest_completed_, *r.ended_at - *r.started_at);
  }
}

void Sweep::NoteScores(const TrialRuntime& trial) {
  algorithms::HistoryEntry& h = history_[static_cast<size_t>(trial.rec.number)];
  h.stopped = trial.rec.state == v1::TRIAL_STATE_STOPPED;
  if (!spec().Pareto()) return;
  Scores scores = ScoresOf(spec(), trial.rec.last_metrics);
  h.values = std::move(scores.values);
  h.violation = scores.violation;
  front_ = UpdatedFront(spec(), front_, trial.rec, [this](int64_t n) -> const TrialRecord& {
    return trials_[static_cast<size_t>(n)]->rec;
  });
  // One objective under constraints: the best is the front's (its members tie).
  if (spec().objectives.size() == 1) best_ = front_.empty() ? -1 : front_[0];
}

void Sweep::UpdateBest(const TrialRuntime& trial) {
  if (spec().Pareto()) return;  // the front instead (NoteScores)
  const TrialRecord& r = trial.rec;
  if (!r.objective || r.origin == kWarmStart ||
      (r.state != v1::TRIAL_STATE_COMPLETED && r.state != v1::TRIAL_STATE_STOPPED)) {
    return;
  }
  if (best_ < 0 ||
      IsBetter(*r.objective, *this->trial(best_).rec.objective, spec().objective.direction)) {
    best_ = r.number;
  }
}

std::optional<int64_t> Sweep::TakeRetry() {
  if (retries_.empty()) return std::nullopt;
  int64_t number = retries_.front();
  retries_.pop_front();
  return number;
}

std::optional<algorithms::Params> Sweep::TakeQueued() {
  if (rec.queue.empty()) return std::nullopt;
  algorithms::Params params = std::move(rec.queue.front());
  rec.queue.erase(rec.queue.begin());
  return params;
}

void Sweep::QueueRetry(int64_t number) { retries_.push_back(number); }

void Sweep::DropRetries() { retries_.clear(); }

void Sweep::Wait(int64_t number, bool first) {
  if (first) {
    pending_.push_front(number);
  } else {
    pending_.push_back(number);
  }
}

std::pair<int64_t, int64_t> Sweep::RequestDirsUntil(int64_t until) {
  int64_t from = std::max(dirs_requested_, static_cast<int64_t>(trials_.size()));
  if (until <= from) {
    dirs_requested_ = from;
    return {from, from};
  }
  dirs_requested_ = until;
  return {from, until};
}

void Sweep::DirMadeAhead(int64_t number, absl::Status status) {
  if (!Final()) dirs_made_[number] = std::move(status);
}

std::optional<absl::Status> Sweep::TakeDirMadeAhead(int64_t number) {
  auto made = dirs_made_.find(number);
  if (made == dirs_made_.end()) return std::nullopt;
  absl::Status status = std::move(made->second);
  dirs_made_.erase(made);
  return status;
}

std::optional<std::string> Sweep::CheckHourBudgets(absl::Time now) {
  const Budget& budget = spec().budget;
  if ((!budget.gpu_hours && !budget.node_hours) || budget_spent_) return std::nullopt;
  budget_spent_ = BudgetReached(budget, MeasureUsage(*this, now));
  if (budget_spent_) retries_.clear();
  return budget_spent_;
}

void Sweep::ChangeBudget(const BudgetChange& change) {
  rec.budget_change = change;
  ApplyBudgetChange(plan, change);
  budget_spent_.reset();
}

bool Sweep::NoteAllocation(const AllocationRecord& allocation) {
  auto [it, added] = allocations_.try_emplace(allocation.id, allocation);
  if (!added) {
    if (it->second.ended_at) return false;  // an allocation that ended stays so
    it->second = allocation;
  }
  return true;
}

}  // namespace hpo::server
