#pragma once
// DataDir: where one daemon keeps everything, shared by hpod and hpo so they find each other.
// The file names are those of common/layout.h.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/layout.h"

namespace hpo {

class DataDir {
 public:
  // From $HPO_DATA_DIR, else $HOME/.hpo. Does not touch the file system.
  static DataDir FromEnvironment();
  explicit DataDir(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  std::string db_path() const { return File(layout::kDatabase); }
  std::string socket_path() const { return File(layout::kSocket); }
  std::string endpoint_path() const { return File(layout::kEndpoint); }
  std::string tcp_port_path() const { return File(layout::kTcpPort); }
  std::string config_path() const { return File(layout::kConfig); }
  std::string tls_ca_path() const { return File(layout::kTlsCa); }
  std::string tls_dir() const { return File(layout::kTlsDir); }
  std::string daemon_job_script_path() const { return File(layout::kDaemonJobScript); }
  std::string dashboard_path() const { return File(layout::kDashboard); }
  std::string dashboard_port_path() const { return File(layout::kDashboardPort); }
  std::string token_path() const { return File(layout::kToken); }
  // Other users' tokens for a shared daemon: users/NAME.token (server/auth/auth.h).
  std::string users_dir() const { return File(layout::kUsersDir); }
  std::string user_token_path(const std::string& user) const {
    return users_dir() + "/" + user + layout::kUserTokenSuffix;
  }
  std::string user_access_path(const std::string& user) const {
    return users_dir() + "/" + user + layout::kUserAccessSuffix;
  }
  std::string pid_path() const { return File(layout::kDaemonPid); }
  std::string lock_path() const { return File(layout::kDaemonLock); }
  std::string log_path() const { return File(layout::kDaemonLog); }
  std::string instance_path() const { return File(layout::kInstance); }
  std::string agents_dir() const { return File(layout::kAgentsDir); }
  // Sweep and trial directories: <root>/sweeps unless set_sweeps_root moved them (hpod
  // --sweeps-dir: trials' logs and checkpoints on a file system the compute nodes share, while
  // the database stays on a local disk).
  void set_sweeps_root(std::string dir) { sweeps_root_ = std::move(dir); }
  std::string sweeps_root() const {
    return sweeps_root_.empty() ? File(layout::kSweepsDir) : sweeps_root_;
  }
  std::string sweep_dir(int64_t sweep_id) const;
  std::string trial_dir(int64_t sweep_id, int64_t trial_number) const;

  // gRPC target for the Unix socket ("unix:/abs/path/hpod.sock").
  std::string socket_target() const { return "unix:" + socket_path(); }

  // Creates the root with mode 0700 (and tightens an existing one).
  [[nodiscard]] absl::Status Create() const;

  // Reads the user token; FAILED_PRECONDITION with a hint when missing.
  [[nodiscard]] absl::StatusOr<std::string> ReadToken() const;
  // Reads the token, creating it (mode 0600) on first use.
  [[nodiscard]] absl::StatusOr<std::string> ReadOrCreateToken() const;
  // This data directory's id: 16 hex digits drawn at random the first time and kept in
  // `instance`, so that it stays the same across restarts, moves and renames of the directory.
  [[nodiscard]] absl::StatusOr<std::string> ReadOrCreateInstanceId() const;

 private:
  std::string File(const char* name) const { return root_ + "/" + name; }
  std::string root_;
  std::string sweeps_root_;
};

}  // namespace hpo
