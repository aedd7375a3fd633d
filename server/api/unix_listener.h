#pragma once
// UnixListener: hpod's Unix socket, accepted here rather than by gRPC so that every connection's
// peer credentials (SO_PEERCRED) are checked first: a connection from any uid but the allowed
// one (the daemon's own) is closed at once and logged, before gRPC reads a byte. The socket file
// is created mode 0600 inside the 0700 data directory as well, so the kernel normally refuses
// other users earlier still; the check holds even where those modes were loosened (or for root,
// whom modes do not stop).
//
// Thread safety: Start and the destructor from one thread; accepting runs on a thread of its own.

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "grpcpp/server_builder.h"

namespace hpo::server {

class UnixListener {
 public:
  // Binds and listens on `path` (an old socket file there is replaced).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<UnixListener>> Bind(const std::string& path);
  ~UnixListener();
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;

  // Hands every connection from `allowed_uid` to `acceptor` (whose server must be started).
  void Start(std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor,
             uid_t allowed_uid);
  int refused() const { return refused_.load(); }

 private:
  UnixListener(int fd, int stop_fd, std::string path)
      : fd_(fd), stop_fd_(stop_fd), path_(std::move(path)) {}
  void Loop(uid_t allowed_uid);
  int fd_, stop_fd_;
  std::string path_;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::atomic<int> refused_{0};
  std::thread thread_;
};

}  // namespace hpo::server
