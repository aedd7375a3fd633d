#include "server/core/event_publisher.h"

#include <algorithm>
#include <cstdint>
#include <future>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "hpo/v1/states.h"
#include "spdlog/spdlog.h"

namespace hpo::server {
namespace {

constexpr int kReplayPage = 1000;
// Events a second that the replays off the controller's thread send, all together: many watchers
// reopened from a long sweep's start (their replays taken page by page, in turn) then cannot
// take the cores that reports need, and one replay alone of 100,000 events takes 5 s.
constexpr double kReplayRate = 20'000;

// One page of the stored events of `sweep_id` after *after (then the last one sent) and before
// `before`, to `sink`: how many were read (fewer than kReplayPage: there are no more), or -1 when
// one at or past `before` was reached.
absl::StatusOr<int> ReplayPage(Store& from, int64_t sweep_id, int64_t* after, int64_t before,
                               EventSink& sink) {
  ASSIGN_OR_RETURN(std::vector<EventRecord> page, from.LoadEvents(sweep_id, *after, kReplayPage));
  for (const EventRecord& rec : page) {
    if (rec.seq >= before) return -1;
    v1::Event e;
    if (!e.ParseFromString(rec.payload)) {
      return absl::InternalError(
          absl::StrCat("event ", rec.seq, " of sweep ", sweep_id, " is corrupt"));
    }
    e.set_seq(rec.seq);
    sink.Push(e);
    *after = rec.seq;
  }
  return static_cast<int>(page.size());
}

}  // namespace

// A watcher's sink while its replay runs on the publisher's thread. The live events published
// meanwhile wait here; once the replay has caught up they go on, and from then on live ones go
// straight through, each once (the replay's connection may already have read an event that was
// then also published live).
class EventPublisher::CatchingUp final : public EventSink {
 public:
  CatchingUp(std::shared_ptr<EventSink> sink, bool close_after)
      : sink_(std::move(sink)),
        close_(close_after ? std::optional(absl::OkStatus()) : std::nullopt) {}

  // The controller's thread.
  void Push(const v1::Event& event) override {
    std::lock_guard lock(mu_);
    if (!caught_up_) {
      held_.push_back(event);
    } else if (!closed_ && event.seq() > last_seq_) {
      last_seq_ = event.seq();
      sink_->Push(event);
    }
  }
  void Close(const absl::Status& status) override {
    std::lock_guard lock(mu_);
    if (!caught_up_) {
      if (!close_) close_ = status;
    } else if (!closed_) {
      closed_ = true;
      sink_->Close(status);
    }
  }
  bool Gone() const override {
    std::lock_guard lock(mu_);
    return closed_ || sink_->Gone();
  }

  // The publisher's thread: the sink the replay goes to, and its end (everything up to
  // `last_seq` sent, or the replay `failed`).
  EventSink& target() { return *sink_; }
  void CaughtUp(int64_t last_seq, const absl::Status& failed) {
    std::lock_guard lock(mu_);
    caught_up_ = true;
    last_seq_ = last_seq;
    if (!failed.ok()) close_ = failed;
    for (const v1::Event& e : failed.ok() ? held_ : std::vector<v1::Event>()) {
      if (e.seq() <= last_seq_) continue;
      last_seq_ = e.seq();
      sink_->Push(e);
    }
    held_.clear();
    if (close_) {
      closed_ = true;
      sink_->Close(*close_);
    }
  }

 private:
  const std::shared_ptr<EventSink> sink_;
  mutable std::mutex mu_;
  bool caught_up_ = false;  // guarded by mu_, as the rest
  bool closed_ = false;
  int64_t last_seq_ = -1;
  std::vector<v1::Event> held_;
  std::optional<absl::Status> close_;
};

EventPublisher::EventPublisher(Store& store)
    : store_(store), replays_(WorkQueue::Priority::kBackground) {}

// replays_ ends first (the last member): a replay still running finishes, the waiting ones never
// start.
EventPublisher::~EventPublisher() = default;

void EventPublisher::Emit(int64_t sweep_id, int64_t trial_id, v1::Event event) {
  EventRecord rec;
  rec.sweep_id = sweep_id;
  rec.trial_id = trial_id;
  rec.payload = event.SerializeAsString();
  absl::StatusOr<int64_t> seq = store_.InsertEvent(rec);
  if (!seq.ok()) {
    spdlog::error("sweep {}: cannot store an event: {}", sweep_id, seq.status().ToString());
    return;
  }
  event.set_seq(*seq);
  queued_.emplace_back(sweep_id, std::move(event));
}

void EventPublisher::Committed(const absl::Status& commit) {
  if (!commit.ok()) return;  // the store commits them later; they go out then
  for (auto& [sweep_id, event] : queued_) {
    auto it = sinks_.find(sweep_id);
    if (it == sinks_.end()) continue;
    std::vector<std::shared_ptr<EventSink>>& sinks = it->second;
    for (auto& sink : sinks) {
      if (!sink->Gone()) sink->Push(event);
    }
    if (event.kind() == v1::EVENT_KIND_SWEEP_STATE && v1::IsFinal(event.sweep().state())) {
      for (auto& sink : sinks) sink->Close(absl::OkStatus());
      sinks_.erase(it);
    } else {
      sinks.erase(std::remove_if(sinks.begin(), sinks.end(), [](auto& s) { return s->Gone(); }),
                  sinks.end());
    }
  }
  queued_.clear();
}

absl::Status EventPublisher::Replay(Store& from, int64_t sweep_id, int64_t* after, int64_t before,
                                    EventSink& sink) {
  while (!sink.Gone()) {
    ASSIGN_OR_RETURN(int read, ReplayPage(from, sweep_id, after, before, sink));
    if (read < kReplayPage) break;
  }
  return absl::OkStatus();
}

void EventPublisher::WaitForReplays() {
  while (replaying_ > 0) {
    std::promise<void> turn;
    replays_.Run([&turn] { turn.set_value(); });
    turn.get_future().wait();
  }
}

void EventPublisher::ReplayThere(int64_t sweep_id, int64_t after,
                                 std::shared_ptr<CatchingUp> sink) {
  absl::Time start = absl::Now();
  absl::StatusOr<int> read =
      sink->target().Gone() ? 0 : ReplayPage(*reader_, sweep_id, &after, INT64_MAX, sink->target());
  if (read.ok() && *read == kReplayPage) {
    // Its pace: kReplayRate events a second, for all replays together.
    absl::SleepFor(absl::Seconds(static_cast<double>(*read) / kReplayRate) - (absl::Now() - start));
    // The rest after the replays waiting now: each gets a page in turn.
    replays_.Run([this, sweep_id, after, sink] { ReplayThere(sweep_id, after, sink); });
    return;
  }
  sink->CaughtUp(after, read.status());
  --replaying_;
}

absl::Status EventPublisher::Subscribe(int64_t sweep_id, int64_t since_seq,
                                       std::shared_ptr<EventSink> sink, bool ended) {
  // A sweep whose end is still queued closes its watchers once that is published.
  bool end_queued = std::any_of(queued_.begin(), queued_.end(),
                                [&](const auto& q) { return q.first == sweep_id; });
  bool close_after = ended && !end_queued;
  if (since_seq >= 0 && !reader_tried_) {
    reader_tried_ = true;
    absl::StatusOr<std::unique_ptr<Store>> reader = store_.OpenReader();
    if (reader.ok()) {
      reader_ = std::move(*reader);
    } else if (!absl::IsUnimplemented(reader.status())) {
      spdlog::warn("watches replay on the controller's thread: {}", reader.status().ToString());
    }
  }
  if (since_seq >= 0 && reader_ != nullptr) {
    auto catching = std::make_shared<CatchingUp>(std::move(sink), close_after);
    if (!close_after) sinks_[sweep_id].push_back(catching);
    ++replaying_;
    replays_.Run(
        [this, sweep_id, since_seq, catching] { ReplayThere(sweep_id, since_seq, catching); });
    return absl::OkStatus();
  }
  // Here. Events at or past the first queued one are not committed yet: they go out live.
  int64_t after = since_seq;
  if (since_seq >= 0) {
    int64_t first_queued = queued_.empty() ? INT64_MAX : queued_.front().second.seq();
    RETURN_IF_ERROR(Replay(store_, sweep_id, &after, first_queued, *sink));
  }
  if (close_after) {
    sink->Close(absl::OkStatus());
  } else {
    sinks_[sweep_id].push_back(std::move(sink));
  }
  return absl::OkStatus();
}

}  // namespace hpo::server
