#pragma once
// FaultPlan: which calls of a fake fail, with which code, how many more times — the part that
// FaultyStore and FaultyBackend share.

#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace hpo::fakes {

template <typename Call>
class FaultPlan {
 public:
  // The next `times` calls of `call` fail with `code`.
  void Fail(Call call, absl::StatusCode code, int times) { faults_[call] = {code, times}; }
  void Clear() { faults_.clear(); }
  int failed() const { return failed_; }  // injected failures so far
  // The injected error for this call of `call` (named `name` in the message), or OK.
  absl::Status Next(Call call, const char* name) {
    auto it = faults_.find(call);
    if (it == faults_.end() || it->second.times <= 0) return absl::OkStatus();
    absl::StatusCode code = it->second.code;
    if (--it->second.times == 0) faults_.erase(it);
    ++failed_;
    return absl::Status(code, absl::StrCat("injected fault: ", name));
  }

 private:
  struct Fault {
    absl::StatusCode code;
    int times;
  };
  std::map<Call, Fault> faults_;
  int failed_ = 0;
};

}  // namespace hpo::fakes
