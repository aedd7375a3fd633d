#pragma once
// WorkQueue: one thread that runs jobs in the order given, off the thread that gives them (the
// controller's, which must not spend seconds on a plan's simulation). Its thread starts with the
// first job. A job runs to its end; the jobs still waiting when the queue is destroyed never run.
// A background queue's thread runs at the lowest priority (nice 19): whatever else the process
// does (the controller, every report) goes first.
//
// Thread safety: Run may be called from any thread.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace hpo {

class WorkQueue {
 public:
  enum class Priority { kNormal, kBackground };
  explicit WorkQueue(Priority priority = Priority::kNormal) : priority_(priority) {}
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Run(std::function<void()> job);

 private:
  void Loop();

  const Priority priority_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace hpo
