#pragma once
// Who may call hpod, and what each caller may do: the one gate that every front door (gRPC, the
// dashboard's pages and API, /metrics) passes through.
//
// The trust model. A sweep's command runs as the daemon's Unix user, so whoever chooses a
// command has a shell as that user. Only the daemon's owner (the token in DATA_DIR/token, made
// at first start, mode 0600) submits sweeps, forks them and warm-starts from them, and removes
// them. Other users of a shared daemon get a token each (DATA_DIR/users/NAME.token, mode 0600,
// `hpo user add NAME`) and a role, kept beside it in NAME.access:
//   viewer    list, show, trials, watch, export, plots, logs, the dashboard
//   operator  a viewer's calls plus pause, resume, cancel, extend, enqueue, ask and tell, none of
//             which runs a command the caller chose
//   metrics   /metrics and nothing else (a Prometheus scraper's token)
// A viewer's or operator's role holds on every sweep of the daemon or only on named ones
// (`--sweeps`, `hpo share`); a sweep a user submitted before roles existed stays theirs to
// operate. Trial tokens are separate: each only reports for its own trial (ReportIntake).
//
// Thread safety: TokenTable is thread-safe; the rest are plain functions and values.

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/access_file.h"
#include "common/clock.h"

namespace hpo::server {

// A user's role on a sweep, weakest first.
enum class Role { kNone, kViewer, kOperator };

// What a call does, for the gate.
enum class Action {
  kUse,      // a call about no sweep: validate a file, list sweeps, a dashboard login
  kView,     // read a sweep or trial: show, trials, watch, logs, the dashboard's views
  kOperate,  // pause, resume, cancel, extend, enqueue, ask, tell
  kSubmit,   // submit, fork, warm start: a command of the caller's choosing runs
  kRemove,   // remove a sweep and its trial directories
  kMetrics,  // /metrics
};

struct Caller {
  enum class Kind { kOwner, kUser, kMetrics };
  std::string user;
  Kind kind = Kind::kUser;
  Role role = Role::kNone;         // on every sweep
  std::map<int64_t, Role> sweeps;  // on named sweeps (the stronger of the two counts)
  std::string token;               // the credential it was found by
  // The most GPU-hours it may add to any one sweep's budget (`hpo user add
  // --max-extend-gpu-hours`), over all its extends of that sweep; nullopt: no cap.
  std::optional<double> max_extend_gpu_hours;

  bool owner() const { return kind == Kind::kOwner; }
  static Caller Owner(std::string user) {
    Caller c;
    c.user = std::move(user);
    c.kind = Kind::kOwner;
    return c;
  }
};

// What a call needs: an action, on a sweep (sweep_id) or a trial's sweep (trial_id), or on none.
struct Need {
  Action action;
  int64_t sweep_id = 0;
  int64_t trial_id = 0;
};

// The sweep a call is about, as the gate needs it.
struct SweepRef {
  int64_t id = 0;
  std::string owner;  // SweepRecord::owner: who submitted it
};

// The caller's role on `sweep`.
Role RoleOn(const Caller& caller, const SweepRef& sweep);

// OK when `caller` may do `action` (on `sweep`, for kView and kOperate); PERMISSION_DENIED
// saying why otherwise.
[[nodiscard]] absl::Status Authorize(const Caller& caller, Action action,
                                     const SweepRef* sweep = nullptr);

class TokenTable {
 public:
  // `users_dir` may be empty (owner only) or not exist yet. With `owner_token_path`, the owner's
  // token is read from that file again whenever users are, so rotating it needs no restart.
  TokenTable(std::string owner, std::string owner_token, std::string users_dir,
             const Clock& clock = SystemClock::Get(), std::string owner_token_path = "");
  // The caller `token` belongs to, with its role, or nullopt. The users directory is read again
  // when it changed (a user added, removed, rotated or given another role: every file is
  // replaced by a rename), every second in any case, and on an unknown token (at most ten
  // times a second).
  std::optional<Caller> Find(absl::string_view token);

 private:
  void ScanLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ChangedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const std::string owner_, users_dir_, owner_token_path_;
  const Clock& clock_;
  std::mutex mu_;
  std::string owner_token_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Caller> users_ ABSL_GUARDED_BY(mu_);  // token -> caller
  absl::Time scanned_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t dir_mtime_ns_ ABSL_GUARDED_BY(mu_) = -1;
};

// The name of the user this process runs as.
std::string ProcessUserName();

}  // namespace hpo::server
