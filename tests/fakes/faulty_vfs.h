#pragma once
// FaultyVfs: an SQLite VFS over the default one that refuses writes and syncs with SQLITE_FULL
// while told the disk is full, so that the store's handling of a full disk runs against real
// SQLite (SqliteStore::Options::vfs = FaultyVfs::kName). Thread-safe.

#include <atomic>

namespace hpo::fakes {

class FaultyVfs {
 public:
  static constexpr char kName[] = "hpo-faulty";
  // Registers the VFS (once) and returns it.
  static FaultyVfs& Get();

  void set_full(bool full) { full_ = full; }
  int refused() const { return refused_; }  // writes and syncs refused so far

  // For the VFS's methods.
  bool Refuse() {
    if (!full_) return false;
    ++refused_;
    return true;
  }

 private:
  FaultyVfs() = default;
  std::atomic<bool> full_{false};
  std::atomic<int> refused_{0};
};

}  // namespace hpo::fakes
