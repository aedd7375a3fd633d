#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace hpo {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path, int err) {
  std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  if (err == ENOSPC || err == EROFS || err == EIO || err == EDQUOT)
    return absl::UnavailableError(msg);
  return absl::InternalError(msg);
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError("cannot read", path, errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

mode_t ProcessUmask() {
  // Read, not set: umask(2) would change it for every thread meanwhile.
  static const mode_t bits = [] {
    absl::StatusOr<std::string> status = ReadFile("/proc/self/status");
    if (status.ok()) {
      size_t at = status->find("\nUmask:");
      unsigned long value = 0;
      if (at != std::string::npos && std::sscanf(status->c_str() + at + 7, "%lo", &value) == 1) {
        return static_cast<mode_t>(value & 0777);
      }
    }
    return static_cast<mode_t>(022);
  }();
  return bits;
}

absl::Status WriteFileAtomic(const std::string& path, const std::string& data, int mode,
                             bool sync) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoError("cannot create", tmp, errno);
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoError("cannot write", tmp, err);
    }
    off += static_cast<size_t>(n);
  }
  // The mode asked for, as the umask leaves it (also for a leftover .tmp of another mode).
  if (::fchmod(fd, static_cast<mode_t>(mode) & ~ProcessUmask()) != 0 ||
      (sync && ::fsync(fd) != 0)) {
    int err = errno;
    ::close(fd);
    return ErrnoError("cannot sync", tmp, err);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoError("cannot rename to", path, errno);
  return absl::OkStatus();
}

absl::Status MakeDirs(const std::string& path, int mode) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      cur = path.substr(0, i);
      if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) {
        return ErrnoError("cannot create directory", cur, errno);
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TailFile(const std::string& path, int64_t max_bytes, bool* truncated) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path, errno);
  struct stat st {};
  ::fstat(fd, &st);
  int64_t size = st.st_size;
  int64_t start = size > max_bytes ? size - max_bytes : 0;
  if (truncated) *truncated = start > 0;
  std::string out(static_cast<size_t>(size - start), '\0');
  ssize_t n = ::pread(fd, out.data(), out.size(), start);
  ::close(fd);
  if (n < 0) return ErrnoError("cannot read", path, errno);
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string DirName(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

std::string AbsolutePath(const std::string& path, const std::string& base) {
  std::filesystem::path p(path);
  if (p.is_absolute()) return p.lexically_normal().string();
  std::filesystem::path b =
      base.empty() ? std::filesystem::current_path() : std::filesystem::path(AbsolutePath(base));
  return (b / p).lexically_normal().string();
}

std::string ExecutableDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

}  // namespace hpo
