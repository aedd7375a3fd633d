#pragma once
// Whether a process group still has members other than the caller: hpo-shim waits for the rest of
// a trial's group after a signal.
//
// Header-only, libc alone: hpo-shim is a static program that links nothing else.

#include <dirent.h>
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hpo {

// Whether a process other than `self`, and not a zombie, is in process group `group` (read from
// /proc; false when /proc cannot be read).
inline bool ProcessGroupHasOthers(pid_t group, pid_t self) {
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return false;
  bool found = false;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self) continue;
    char path[64], buf[512];
    std::snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    // "pid (comm) state ppid pgrp ...": comm may hold anything, so parse after its last ')'.
    const char* rest = std::strrchr(buf, ')');
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (rest == nullptr || std::sscanf(rest + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3)
      continue;
    if (pgrp == group && state != 'Z' && state != 'X') {
      found = true;
      break;
    }
  }
  ::closedir(d);
  return found;
}

}  // namespace hpo
