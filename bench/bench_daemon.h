#pragma once
// BenchDaemon: a real hpod (the one next to the benchmark's binary) on a fresh data directory
// under /tmp, for benchmarks that measure hpod through its API. Header-only; used by
// report_bench and suggest_bench.

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/data_dir.h"
#include "common/files.h"

namespace hpo::bench {

class BenchDaemon {
 public:
  // Starts hpod with `args` (on top of --data-dir and --log-file) on /tmp/hpo-bench-<name>-<pid>
  // and waits until it says where it listens. False (and `error()` says why) when it did not.
  bool Start(const std::string& name, const std::vector<std::string>& args) {
    data_ =
        std::filesystem::temp_directory_path() / absl::StrCat("hpo-bench-", name, "-", ::getpid());
    std::filesystem::create_directories(data_);
    ::setenv("HPO_DATA_DIR", data_.c_str(), 1);
    std::string hpod =
        (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "hpod").string();
    std::vector<std::string> argv = {hpod, "--data-dir=" + data_,
                                     "--log-file=" + data_ + "/hpod.log"};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<char*> av;
      for (auto& a : argv) av.push_back(a.data());
      av.push_back(nullptr);
      ::execv(av[0], av.data());
      ::_exit(127);
    }
    DataDir dir(data_);
    for (int i = 0; i < 200 && !std::filesystem::exists(dir.endpoint_path()); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    absl::StatusOr<std::string> endpoint = ReadFile(dir.endpoint_path());
    if (!endpoint.ok()) {
      error_ = "hpod did not start; see " + data_ + "/hpod.log";
      return false;
    }
    endpoint_ = std::string(absl::StripAsciiWhitespace(*endpoint));
    // The CA its TCP address proves itself with (none with --insecure-listen).
    tls_ca_pem_ = ReadFile(dir.tls_ca_path()).value_or("");
    return true;
  }
  // SIGTERM, then waits for it.
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  // Stops it and removes its data directory.
  ~BenchDaemon() {
    Stop();
    if (!data_.empty()) std::filesystem::remove_all(data_);
  }

  DataDir dir() const { return DataDir(data_); }
  const std::string& data() const { return data_; }
  const std::string& endpoint() const { return endpoint_; }
  const std::string& tls_ca_pem() const { return tls_ca_pem_; }
  pid_t pid() const { return pid_; }
  const std::string& error() const { return error_; }

 private:
  std::string data_, endpoint_, tls_ca_pem_, error_;
  pid_t pid_ = 0;
};

}  // namespace hpo::bench
