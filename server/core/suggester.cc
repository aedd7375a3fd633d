#include "server/core/suggester.h"

#include <algorithm>

namespace hpo::server {

const std::vector<std::pair<int64_t, double>> HistoryMirror::kNoCurve;
const std::vector<double> HistoryMirror::kNoVectors;

HistoryMirror::HistoryMirror(const algorithms::SuggestRequest& like, bool curves, bool vectors)
    : space_(*like.space),
      seed_(like.seed),
      direction_(like.direction),
      directions_(like.directions != nullptr ? *like.directions
                                             : std::vector<algorithms::Direction>{}),
      keeps_curves_(curves),
      keeps_vectors_(vectors) {}

void HistoryMirror::Apply(std::vector<HistoryUpdate> updates) {
  history_.resize(trials_);
  objectives_.resize(trials_);
  for (HistoryUpdate& u : updates) {
    size_t n = static_cast<size_t>(u.entry.number);
    if (n >= history_.size()) {  // a new trial: numbers come in order
      history_.resize(n + 1);
      objectives_.resize(n + 1);
      if (keeps_curves_) curves_.resize(n + 1);
      if (keeps_vectors_) vectors_.resize(n + 1);
    }
    algorithms::HistoryEntry& h = history_[n];
    if (u.params_known) u.entry.params = std::move(h.params);
    h = std::move(u.entry);
    if (keeps_curves_) {
      auto& curve = curves_[n];
      curve.resize(std::min(curve.size(), u.curve_from));
      curve.insert(curve.end(), u.curve.begin(), u.curve.end());
      h.curve = &curve;
    }
    if (keeps_vectors_) {
      auto& vectors = vectors_[n];
      vectors.resize(std::min(vectors.size(), u.vectors_from));
      vectors.insert(vectors.end(), u.vectors.begin(), u.vectors.end());
      h.vectors = &vectors;
    }
    objectives_[n] = algorithms::ObjectiveColumn(h);
  }
  trials_ = history_.size();
}

algorithms::SuggestRequest HistoryMirror::Request(int64_t trial_number) const {
  algorithms::SuggestRequest req;
  req.space = &space_;
  req.history = &history_;
  req.objectives = &objectives_;
  req.trial_number = trial_number;
  req.seed = seed_;
  req.direction = direction_;
  if (!directions_.empty()) req.directions = &directions_;
  return req;
}

void HistoryMirror::AddProposal(const algorithms::Params& params,
                                const algorithms::SuggestOutput& output) {
  algorithms::HistoryEntry h;
  h.number = static_cast<int64_t>(history_.size());
  h.params = params;
  h.parent = output.parent;
  h.lineage = output.lineage;
  if (keeps_curves_) h.curve = &kNoCurve;
  if (keeps_vectors_) h.vectors = &kNoVectors;
  history_.push_back(std::move(h));
  objectives_.push_back(algorithms::ObjectiveColumn(history_.back()));
}

// ---------------------------------------------------------------------------------------------

SweepSuggestions::~SweepSuggestions() { Cancel(); }

void SweepSuggestions::Cancel() {
  // A sweep that runs again (a larger budget) starts a new copy.
  if (mirror_) mirror_->cancelled = true;
  mirror_.reset();
  sent_ = 0;
  unsettled_.clear();
  asking_ = false;
  ready_.clear();
}

std::vector<HistoryUpdate> SweepSuggestions::Updates(
    const std::vector<algorithms::HistoryEntry>& history) {
  std::vector<HistoryUpdate> updates;
  auto add = [&](const algorithms::HistoryEntry& h, size_t curve_from, size_t vectors_from,
                 bool params_known) {
    HistoryUpdate& u = updates.emplace_back();
    u.params_known = params_known;
    algorithms::HistoryEntry& e = u.entry;
    e.number = h.number;
    if (!params_known) e.params = h.params;  // a trial's parameters never change
    e.finished = h.finished;
    e.objective = h.objective;
    e.parent = h.parent;
    e.lineage = h.lineage;
    e.values = h.values;
    e.violation = h.violation;
    e.stopped = h.stopped;
    if (h.curve != nullptr) {
      u.curve_from = curve_from <= h.curve->size() ? curve_from : 0;
      u.curve.assign(h.curve->begin() + static_cast<ptrdiff_t>(u.curve_from), h.curve->end());
    }
    if (h.vectors != nullptr) {
      u.vectors_from = vectors_from <= h.vectors->size() ? vectors_from : 0;
      u.vectors.assign(h.vectors->begin() + static_cast<ptrdiff_t>(u.vectors_from),
                       h.vectors->end());
    }
  };
  auto size_of = [](const auto* v) { return v != nullptr ? v->size() : 0; };
  // Running trials sent before: whole once they ended, their curves' new points until then.
  std::vector<Unsettled> still;
  for (const Unsettled& u : unsettled_) {
    const algorithms::HistoryEntry& h = history[static_cast<size_t>(u.number)];
    size_t curve = size_of(h.curve), vectors = size_of(h.vectors);
    if (h.finished) {
      add(h, u.curve, u.vectors, true);
      continue;
    }
    if (curve != u.curve || vectors != u.vectors) add(h, u.curve, u.vectors, true);
    still.push_back({u.number, curve, vectors});
  }
  for (; sent_ < history.size(); ++sent_) {
    const algorithms::HistoryEntry& h = history[sent_];
    add(h, 0, 0, false);
    if (!h.finished) still.push_back({h.number, size_of(h.curve), size_of(h.vectors)});
  }
  unsettled_ = std::move(still);
  return updates;
}

std::optional<Suggestion> SweepSuggestions::Take() {
  if (ready_.empty()) return std::nullopt;
  Suggestion s = std::move(ready_.front());
  ready_.pop_front();
  return s;
}

// ---------------------------------------------------------------------------------------------

Suggester::Suggester(bool threaded) : threaded_(threaded) {}

Suggester::~Suggester() { stopping_ = true; }

void Suggester::SetWakeup(std::function<void()> wake) {
  std::lock_guard lock(mu_);
  wake_ = std::move(wake);
}

void Suggester::Ask(int64_t sweep_id, SweepSuggestions& sweep,
                    std::shared_ptr<const algorithms::Sampler> sampler, bool keeps_curves,
                    const algorithms::SuggestRequest& now, int count) {
  if (!threaded_) {  // at once, from the sweep's own history
    Suggestion& s = sweep.ready_.emplace_back();
    algorithms::SuggestRequest req = now;
    req.output = &s.output;
    s.params = sampler->Suggest(req);
    return;
  }
  if (!sweep.mirror_) {  // the sweep keeps each point's vectors when it ranks by Pareto
    sweep.mirror_ =
        std::make_shared<HistoryMirror>(now, keeps_curves, keeps_curves && now.MultiObjective());
  }
  sweep.asking_ = true;
  std::vector<HistoryUpdate> updates;
  if (sampler->ReadsHistory()) updates = sweep.Updates(*now.history);
  ++jobs_;
  queue_.Run([this, sweep_id, mirror = sweep.mirror_, updates = std::move(updates),
              sampler = std::move(sampler), first = now.trial_number, count]() mutable {
    Make(sweep_id, mirror, std::move(updates), sampler, first, count);
    --jobs_;
  });
}

void Suggester::Make(int64_t sweep_id, const std::shared_ptr<HistoryMirror>& mirror,
                     std::vector<HistoryUpdate> updates,
                     const std::shared_ptr<const algorithms::Sampler>& sampler, int64_t first,
                     int count) {
  mirror->Apply(std::move(updates));
  for (int k = 0; k < count; ++k) {
    Made made{sweep_id, mirror, std::nullopt, false};
    bool stop = stopping_ || mirror->cancelled;
    if (!stop) {
      Suggestion& s = made.suggestion.emplace();
      algorithms::SuggestRequest req = mirror->Request(first + k);
      req.output = &s.output;
      s.params = sampler->Suggest(req);
      stop = !s.params.ok() || !s.params->has_value();
      if (!stop) mirror->AddProposal(**s.params, s.output);
    }
    made.last = stop || k + 1 == count;
    std::function<void()> wake;
    {
      std::lock_guard lock(mu_);
      made_.push_back(std::move(made));
      wake = wake_;
    }
    if (wake) wake();
    if (stop) return;
  }
}

void Suggester::Poll(const std::function<SweepSuggestions*(int64_t sweep_id)>& find) {
  std::vector<Made> made;
  {
    std::lock_guard lock(mu_);
    made.swap(made_);
  }
  for (Made& m : made) {
    SweepSuggestions* sweep = find(m.sweep_id);
    if (sweep == nullptr || sweep->mirror_ != m.mirror) continue;  // gone, or another's
    if (m.last) sweep->asking_ = false;
    if (m.suggestion) sweep->ready_.push_back(std::move(*m.suggestion));
  }
}

}  // namespace hpo::server
