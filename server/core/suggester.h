#pragma once
// Suggester: the sampler's proposals, made off the controller's thread.
//
// A model-based sampler takes milliseconds per proposal (TPE about one at 100,000 trials, the GP
// tens), and a sweep that opens many places at once asks for many. Made on the controller's
// thread, that time would delay every report waiting behind it. So in the daemon the proposals
// are made on a thread of their own, from a copy of each sweep's history that the suggester's
// thread keeps (HistoryMirror): at each request the controller sends only what changed since the
// last one (SweepSuggestions::Updates: the new trials, the ones that ended, and the new points of
// running trials' curves), so a request costs the controller the size of the change, not of the
// history.
//
// A request asks for several proposals at once (the places the sweep has free). Each one is
// made as the controller would have made it: the proposals of the same request before it count
// as running trials (the history the sampler sees holds them, unfinished), so that W proposals
// at once are diverse. Each comes back as soon as it is made (Poll) and the controller is woken.
// A sweep has at most one request under way; it asks again once the proposals it got became
// trials, so no proposal is made from a history that lacks one the sweep still holds.
//
// A sampler that does not read the history (random, grid) is sent none of it.
//
// Without a thread (tests in virtual time, the search benchmarks), Ask makes the proposal at
// once on the calling thread, from the sweep's own history and without a copy: one per
// request, exactly what the sampler would propose with the history as it is, so a run in
// virtual time is reproducible.
//
// Thread safety: Ask, Poll and the SweepSuggestions are the controller's thread's; the wakeup
// runs on the suggester's thread. Samplers are pure (sampler.h), so one may be asked from this
// thread while the controller reads its Choice.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "algorithms/sampler.h"
#include "common/work_queue.h"

namespace hpo::server {

// One trial's entry as the controller sends it: whole (new, or ended since), or, for a trial
// still running, only the points its curve gained (a running trial's curve and vectors only
// grow, as reports add points; one found shorter than sent is sent whole).
struct HistoryUpdate {
  algorithms::HistoryEntry entry;  // its curve and vectors pointers null: they travel below
  bool params_known = false;       // sent before: `entry.params` is empty, the copy keeps its own
  size_t curve_from = 0;           // `curve` continues the copy's curve from this point on
  std::vector<std::pair<int64_t, double>> curve;
  size_t vectors_from = 0;
  std::vector<double> vectors;
};

// The suggester thread's copy of one sweep's history, and what the sampler needs besides.
class HistoryMirror {
 public:
  HistoryMirror(const algorithms::SuggestRequest& like, bool curves, bool vectors);
  // Brings the copy up to date; the proposals added since the last call are dropped first
  // (their trials, if they were made, are among the updates).
  void Apply(std::vector<HistoryUpdate> updates);
  // A request for trial `trial_number` over the copy.
  algorithms::SuggestRequest Request(int64_t trial_number) const;
  // A proposal just made counts as a running trial for the next ones.
  void AddProposal(const algorithms::Params& params, const algorithms::SuggestOutput& output);
  const std::vector<algorithms::HistoryEntry>& history() const { return history_; }

  std::atomic<bool> cancelled{false};  // the sweep ended or is gone: make no more

 private:
  algorithms::SearchSpace space_;
  uint64_t seed_;
  algorithms::Direction direction_;
  std::vector<algorithms::Direction> directions_;
  bool keeps_curves_, keeps_vectors_;
  std::vector<algorithms::HistoryEntry> history_;
  std::vector<double> objectives_;
  // Curves and vectors by number; a deque keeps their addresses as it grows.
  std::deque<std::vector<std::pair<int64_t, double>>> curves_;
  std::deque<std::vector<double>> vectors_;
  size_t trials_ = 0;  // entries of real trials; those past it are proposals
  static const std::vector<std::pair<int64_t, double>> kNoCurve;
  static const std::vector<double> kNoVectors;
};

// A proposal, in the order made.
struct Suggestion {
  absl::StatusOr<std::optional<algorithms::Params>> params;
  algorithms::SuggestOutput output;
};

// A sweep's side: what of its history the suggester's copy has, the request under way, and
// the proposals that came back and wait for their trials. The controller's thread only.
class SweepSuggestions {
 public:
  SweepSuggestions() = default;
  ~SweepSuggestions();  // a request under way makes nothing more
  SweepSuggestions(const SweepSuggestions&) = delete;
  SweepSuggestions& operator=(const SweepSuggestions&) = delete;

  // The changes to `history` since the last call (the first: all of it).
  std::vector<HistoryUpdate> Updates(const std::vector<algorithms::HistoryEntry>& history);
  // The next proposal that came back, if one did.
  std::optional<Suggestion> Take();
  bool asking() const { return asking_; }
  size_t waiting() const { return ready_.size(); }
  // The sweep ended: what is under way stops, what came back is dropped; a later request
  // starts from the whole history again.
  void Cancel();

 private:
  friend class Suggester;
  struct Unsettled {
    int64_t number;
    size_t curve, vectors;  // points sent
  };
  std::shared_ptr<HistoryMirror> mirror_;
  size_t sent_ = 0;                   // entries sent
  std::vector<Unsettled> unsettled_;  // sent while not finished
  bool asking_ = false;
  std::deque<Suggestion> ready_;
};

class Suggester {
 public:
  // threaded: proposals are made on a thread of this suggester's; otherwise at once in Ask.
  explicit Suggester(bool threaded);
  ~Suggester();  // what is under way stops after its current proposal
  Suggester(const Suggester&) = delete;
  Suggester& operator=(const Suggester&) = delete;

  bool threaded() const { return threaded_; }
  // Whether requests are being made on the suggester's thread (any thread).
  bool Busy() const { return jobs_ > 0; }
  // Asks for `count` proposals (one without a thread) for sweep `sweep_id`, whose history and
  // settings `now` holds (its trial_number: the first proposal's), from `sampler`.
  void Ask(int64_t sweep_id, SweepSuggestions& sweep,
           std::shared_ptr<const algorithms::Sampler> sampler, bool keeps_curves,
           const algorithms::SuggestRequest& now, int count);
  // What came back since the last call: each proposal goes to its sweep's SweepSuggestions
  // (found by id through `find`; null when the sweep is gone).
  void Poll(const std::function<SweepSuggestions*(int64_t sweep_id)>& find);
  // Called from the suggester's thread when Poll has news.
  void SetWakeup(std::function<void()> wake);

 private:
  struct Made {
    int64_t sweep_id;
    std::shared_ptr<HistoryMirror> mirror;  // whose request
    std::optional<Suggestion> suggestion;   // none: the request was given up
    bool last;                              // the request's last
  };
  void Make(int64_t sweep_id, const std::shared_ptr<HistoryMirror>& mirror,
            std::vector<HistoryUpdate> updates,
            const std::shared_ptr<const algorithms::Sampler>& sampler, int64_t first, int count);

  const bool threaded_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> jobs_{0};  // requests given to the thread and not done
  std::mutex mu_;
  std::vector<Made> made_ ABSL_GUARDED_BY(mu_);
  std::function<void()> wake_ ABSL_GUARDED_BY(mu_);
  // Last: it joins before the rest goes. At the lowest priority: on a busy host, reports and
  // the controller's batches go first, and new trials wait a little.
  WorkQueue queue_{WorkQueue::Priority::kBackground};
};

}  // namespace hpo::server
