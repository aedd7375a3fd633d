#include "server/core/event_publisher.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "hpo/v1/states.h"
#include "spdlog/spdlog.h"

namespace hpo::server {
namespace {

constexpr int kReplayPage = 1000;

}  // namespace

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

absl::Status EventPublisher::Subscribe(int64_t sweep_id, int64_t since_seq,
                                       std::shared_ptr<EventSink> sink, bool ended) {
  // Events at or past the first queued one are not committed yet: they go out live.
  int64_t first_queued = queued_.empty() ? INT64_MAX : queued_.front().second.seq();
  int64_t after = since_seq;
  bool caught_up = since_seq < 0;  // only what comes from now on
  while (!caught_up) {
    ASSIGN_OR_RETURN(std::vector<EventRecord> page,
                     store_.LoadEvents(sweep_id, after, kReplayPage));
    for (const EventRecord& rec : page) {
      if (rec.seq >= first_queued) {
        caught_up = true;
        break;
      }
      v1::Event e;
      if (!e.ParseFromString(rec.payload)) {
        return absl::InternalError(
            absl::StrCat("event ", rec.seq, " of sweep ", sweep_id, " is corrupt"));
      }
      e.set_seq(rec.seq);
      sink->Push(e);
      after = rec.seq;
    }
    if (static_cast<int>(page.size()) < kReplayPage) caught_up = true;
  }
  // A sweep whose end is still queued closes its watchers once that is published.
  bool end_queued = std::any_of(queued_.begin(), queued_.end(),
                                [&](const auto& q) { return q.first == sweep_id; });
  if (ended && !end_queued) {
    sink->Close(absl::OkStatus());
  } else {
    sinks_[sweep_id].push_back(std::move(sink));
  }
  return absl::OkStatus();
}

}  // namespace hpo::server
