#pragma once
// DataDir: where one daemon keeps everything, shared by hpod and hpo so they find each other.
//
//   $HPO_DATA_DIR (default ~/.hpo)   mode 0700
//     hpod.db        the SQLite store (WAL)
//     hpod.sock      the Unix socket for local clients
//     endpoint       the TCP address trials and remote clients use ("127.0.0.1:PORT")
//     token          the owner's token, mode 0600
//     users/NAME.token  tokens of other users of a shared daemon, mode 0600
//     hpod.pid       pid of the running daemon
//     hpod.log       the daemon's log when started in the background
//     sweeps/<sweep>/trials/<number>/   a trial's directory (stdout.log, stderr.log, ...)

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace hpo {

class DataDir {
 public:
  // From $HPO_DATA_DIR, else $HOME/.hpo. Does not touch the file system.
  static DataDir FromEnvironment();
  explicit DataDir(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  std::string db_path() const { return root_ + "/hpod.db"; }
  std::string socket_path() const { return root_ + "/hpod.sock"; }
  std::string endpoint_path() const { return root_ + "/endpoint"; }
  std::string token_path() const { return root_ + "/token"; }
  // Other users' tokens for a shared daemon: users/NAME.token (server/auth.h).
  std::string users_dir() const { return root_ + "/users"; }
  std::string pid_path() const { return root_ + "/hpod.pid"; }
  std::string log_path() const { return root_ + "/hpod.log"; }
  // Sweep and trial directories: <root>/sweeps unless set_sweeps_root moved them (hpod
  // --sweeps-dir: trials' logs and checkpoints on a file system the compute nodes share, while
  // the database stays on a local disk).
  void set_sweeps_root(std::string dir) { sweeps_root_ = std::move(dir); }
  std::string sweeps_root() const { return sweeps_root_.empty() ? root_ + "/sweeps" : sweeps_root_; }
  std::string sweep_dir(int64_t sweep_id) const;
  std::string trial_dir(int64_t sweep_id, int64_t trial_number) const;

  // gRPC target for the Unix socket ("unix:/abs/path/hpod.sock").
  std::string socket_target() const { return "unix:" + socket_path(); }

  // Creates the root with mode 0700 (and tightens an existing one).
  absl::Status Create() const;

  // Reads the user token; FAILED_PRECONDITION with a hint when missing.
  absl::StatusOr<std::string> ReadToken() const;
  // Reads the token, creating it (mode 0600) on first use.
  absl::StatusOr<std::string> ReadOrCreateToken() const;

 private:
  std::string root_;
  std::string sweeps_root_;
};

}  // namespace hpo
