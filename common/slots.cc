#include "common/slots.h"

#include "absl/strings/str_cat.h"

namespace hpo {

std::shared_ptr<Slots> Slots::Make(std::string what, int per_user, int total) {
  return std::shared_ptr<Slots>(new Slots(std::move(what), per_user, total));
}

absl::StatusOr<Slots::Held> Slots::Take(const std::string& user) {
  {
    std::lock_guard lock(mu_);
    int& mine = by_user_[user];
    if (mine >= per_user_) {
      if (mine == 0) by_user_.erase(user);
      return absl::ResourceExhaustedError(
          absl::StrCat(user, " has ", mine, " ", what_, ", the most one user may have at once ",
                       "on this hpod; close one (or wait for one to end) and try again"));
    }
    if (held_ >= total_) {
      if (mine == 0) by_user_.erase(user);
      return absl::ResourceExhaustedError(absl::StrCat("this hpod has ", held_, " ", what_,
                                                       " of all its users, the most it "
                                                       "serves at once; try again when one ends"));
    }
    ++mine;
    ++held_;
  }
  // The slot goes back when the last copy of the handle does, even after this Slots' owner
  // dropped its reference.
  std::weak_ptr<Slots> self = weak_from_this();
  return Held(new std::string(user), [self](void* p) {
    std::unique_ptr<std::string> held(static_cast<std::string*>(p));
    if (std::shared_ptr<Slots> s = self.lock()) s->Give(*held);
  });
}

void Slots::Give(const std::string& user) {
  std::lock_guard lock(mu_);
  auto it = by_user_.find(user);
  if (it == by_user_.end()) return;
  if (--it->second <= 0) by_user_.erase(it);
  --held_;
}

int Slots::held(const std::string& user) const {
  std::lock_guard lock(mu_);
  auto it = by_user_.find(user);
  return it == by_user_.end() ? 0 : it->second;
}

int Slots::held() const {
  std::lock_guard lock(mu_);
  return held_;
}

}  // namespace hpo
