#pragma once
// EventPublisher: every sweep's event log, and the watchers that follow it (`hpo watch`, the
// Python client, WatchSweep, the dashboard's event streams).
//
// Each state change and each coalesced progress save is one event, stored in the current
// batch's transaction with a sequence number the store assigns. Events reach live watchers only
// once their batch committed (Committed), in sequence order; a watcher that joins replays the
// committed events after its `since_seq` from the store, then follows live, until its sweep's
// final state event (then it is closed with OK). Events of a batch whose commit failed stay
// queued: the store keeps and commits them later, and they are published then.
//
// A replay runs off the controller's thread when the store has a second connection to read it
// with (Store::OpenReader): on the publisher's own thread, at a low priority, page by page with
// the replays waiting taking turns, at most 20,000 events a second in all. Live events that come
// meanwhile wait for the replay to catch up, so the watcher gets every event once, in order. (Many
// watchers reopened from the start of a long sweep then cannot take the cores that reports need.)
// A store held by its one connection (a network file system) is replayed on the controller's
// thread, at once.
//
// Thread safety: the controller's thread only. Sinks are called on it, and during their replay on
// the publisher's thread, never on both at once; they must not block.
// Errors: a corrupt stored event or a store that cannot be read ends the watcher's replay: with
// the replay on the controller's thread, Subscribe returns it (INTERNAL, UNAVAILABLE); off it,
// the sink is closed with it.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/work_queue.h"
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
  explicit EventPublisher(Store& store);
  ~EventPublisher();

  // Stores `event` (its seq is set here) for publication after the batch commits.
  void Emit(int64_t sweep_id, int64_t trial_id, v1::Event event);
  // The batch's commit: OK publishes everything queued; a failure keeps it queued.
  void Committed(const absl::Status& commit);
  // Replays the committed events of `sweep_id` after `since_seq` (none when it is negative) to
  // `sink`, then closes it when `ended`, or keeps it to follow live.
  [[nodiscard]] absl::Status Subscribe(int64_t sweep_id, int64_t since_seq,
                                       std::shared_ptr<EventSink> sink, bool ended);
  // Returns once every replay asked for so far has ended. Any thread but the publisher's.
  void WaitForReplays();

 private:
  class CatchingUp;  // a sink whose replay runs on replays_

  // The stored events of `sweep_id` after `after` from `from`, to `sink`, before `before`; the
  // seq of the last one sent in *after.
  static absl::Status Replay(Store& from, int64_t sweep_id, int64_t* after, int64_t before,
                             EventSink& sink);
  // On replays_: a page of `sink`'s replay after `after`, and the next page queued after the
  // replays waiting now; once the replay caught up, the live events that waited.
  void ReplayThere(int64_t sweep_id, int64_t after, std::shared_ptr<CatchingUp> sink);

  Store& store_;
  std::vector<std::pair<int64_t, v1::Event>> queued_;  // (sweep, event) not yet committed
  std::map<int64_t, std::vector<std::shared_ptr<EventSink>>> sinks_;  // by sweep
  // The store's second connection, opened at the first replay (null when there is none), used
  // only on replays_' thread, which is destroyed first.
  bool reader_tried_ = false;
  std::unique_ptr<Store> reader_;
  std::atomic<int> replaying_{0};  // replays asked for that have not caught up
  WorkQueue replays_;
};

}  // namespace hpo::server
