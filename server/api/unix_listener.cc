#include "server/api/unix_listener.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace hpo::server {

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Bind(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("the socket path ", path, " is too long"));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  ::unlink(path.c_str());
  mode_t old = ::umask(0177);  // the socket file is born 0600
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::umask(old);
  if (rc != 0 || ::listen(fd, 512) != 0) {
    int err = errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", path, ": ", std::strerror(err)));
  }
  int stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  return std::unique_ptr<UnixListener>(new UnixListener(fd, stop_fd, path));
}

UnixListener::~UnixListener() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    ssize_t ignored = ::write(stop_fd_, &one, sizeof(one));
    (void)ignored;
    thread_.join();
  }
  ::close(fd_);
  ::close(stop_fd_);
  ::unlink(path_.c_str());
}

void UnixListener::Start(std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor,
                         uid_t allowed_uid) {
  acceptor_ = std::move(acceptor);
  thread_ = std::thread([this, allowed_uid] { Loop(allowed_uid); });
}

void UnixListener::Loop(uid_t allowed_uid) {
  while (true) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("unix socket: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    while (true) {
      int conn =
          ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);  // gRPC wants it so
      if (conn < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
          spdlog::warn("unix socket: accept: {}", std::strerror(errno));
        }
        break;
      }
      ucred peer{};
      socklen_t len = sizeof(peer);
      if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 ||
          peer.uid != allowed_uid) {
        ++refused_;
        spdlog::warn(
            "unix socket: refused a connection from uid {} pid {} (only uid {} may connect)",
            peer.uid, peer.pid, allowed_uid);
        ::close(conn);
        continue;
      }
      grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters p;
      p.listener_fd = fd_;
      p.fd = conn;
      acceptor_->HandleNewConnection(&p);
    }
  }
}

}  // namespace hpo::server
