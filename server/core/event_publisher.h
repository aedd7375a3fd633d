#pragma once
// EventPublisher: every sweep's event log, and the watchers that follow it (`hpo watch`, the
// Python client, WatchSweep).
//
// Each state change and each coalesced progress save is one event, stored in the current
// batch's transaction with a sequence number the store assigns. Events reach live watchers only
// once their batch committed (Committed), in sequence order; a watcher that joins replays the
// committed events after its `since_seq` from the store, then follows live, until its sweep's
// final state event (then it is closed with OK). Events of a batch whose commit failed stay
// queued: the store keeps and commits them later, and they are published then.
//
// Thread safety: the controller's thread only. Sinks are called on it and must not block.
// Errors: Subscribe returns INTERNAL for a corrupt stored event, UNAVAILABLE when the store
// cannot be read.

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "hpo/v1/hpo.pb.h"
#include "server/store/store.h"

namespace hpo::server {

// Receives one sweep's events (the gRPC watch stream). Called on the controller's thread;
// implementations must not block.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void Push(const v1::Event& event) = 0;
  // No more events: the sweep ended (OK) or the sink fell behind.
  virtual void Close(const absl::Status& status) = 0;
  // True once the client went away; the publisher then forgets the sink.
  virtual bool Gone() const = 0;
};

class EventPublisher {
 public:
  explicit EventPublisher(Store& store) : store_(store) {}

  // Stores `event` (its seq is set here) for publication after the batch commits.
  void Emit(int64_t sweep_id, int64_t trial_id, v1::Event event);
  // The batch's commit: OK publishes everything queued; a failure keeps it queued.
  void Committed(const absl::Status& commit);
  // Replays the committed events of `sweep_id` after `since_seq` (none when it is negative) to
  // `sink`, then closes it when `ended`, or keeps it to follow live.
  [[nodiscard]] absl::Status Subscribe(int64_t sweep_id, int64_t since_seq,
                                       std::shared_ptr<EventSink> sink, bool ended);

 private:
  Store& store_;
  std::vector<std::pair<int64_t, v1::Event>> queued_;  // (sweep, event) not yet committed
  std::map<int64_t, std::vector<std::shared_ptr<EventSink>>> sinks_;  // by sweep
};

}  // namespace hpo::server
