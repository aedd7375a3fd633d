#pragma once
// Slots: how many of one costly thing (an open event stream, a plan being computed) each user may
// hold at once, and all users together, so that no caller of a shared hpod can take what the
// others need. A slot is held by the object Take returns and given back when the last copy of it
// goes.
//
// Thread safety: every method may be called from any thread.

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"

namespace hpo {

class Slots : public std::enable_shared_from_this<Slots> {
 public:
  // `what` names one slot's use in the refusal ("open event streams").
  static std::shared_ptr<Slots> Make(std::string what, int per_user, int total);

  using Held = std::shared_ptr<void>;
  // A slot for `user`; RESOURCE_EXHAUSTED saying whose limit was reached, and what to do, when
  // `user` holds per_user already or all users together hold total.
  absl::StatusOr<Held> Take(const std::string& user);

  int held(const std::string& user) const;
  int held() const;
  int per_user() const { return per_user_; }
  int total() const { return total_; }

 private:
  Slots(std::string what, int per_user, int total)
      : what_(std::move(what)), per_user_(per_user), total_(total) {}
  void Give(const std::string& user);

  const std::string what_;
  const int per_user_, total_;
  mutable std::mutex mu_;
  std::map<std::string, int> by_user_;
  int held_ = 0;
};

}  // namespace hpo
