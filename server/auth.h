#pragma once
// Who may call hpod's API, and on which sweeps.
//
// Every call carries a bearer token. The daemon's owner has the token in DATA_DIR/token (made
// at first start, mode 0600) and may see and act on every sweep. Other users of a shared daemon
// get a token each, kept by the owner as DATA_DIR/users/NAME.token (`hpo user add NAME`); a
// user sees and acts on only the sweeps that user submitted. Trial tokens are separate: each
// only reports for its own trial (ReportIntake).
//
// Thread safety: TokenTable is thread-safe.

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace hpo::server {

struct Caller {
  std::string user;
  bool admin = false;  // the daemon's owner
};

class TokenTable {
 public:
  // `users_dir` may be empty (owner only) or not exist yet.
  TokenTable(std::string owner, std::string owner_token, std::string users_dir,
             const Clock& clock = SystemClock::Get());
  // The caller `token` belongs to, or nullopt. users_dir is read again every second, and on an
  // unknown token (at most ten times a second), so adding or removing a user needs no restart.
  std::optional<Caller> Find(absl::string_view token);

 private:
  void ScanLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const std::string owner_, owner_token_, users_dir_;
  const Clock& clock_;
  std::mutex mu_;
  std::map<std::string, std::string> users_ ABSL_GUARDED_BY(mu_);  // token -> user
  absl::Time scanned_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// OK when `caller` may see and act on a sweep owned by `owner`; PERMISSION_DENIED otherwise.
[[nodiscard]] absl::Status CheckOwner(const Caller& caller, const std::string& owner,
                                      int64_t sweep_id);

// The name of the user this process runs as.
std::string ProcessUserName();

}  // namespace hpo::server
