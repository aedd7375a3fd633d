#pragma once
// Row and Binder: the one way the store reads a result row and fills a statement's parameters,
// column after column in the order the SQL names them, with the store's conventions: a time is
// Unix seconds (REAL) and an absent one NULL, text and blobs are bound by copy.
//
// Private to the store (server/store); nothing outside it sees SQLite.

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "common/clock.h"

namespace hpo::server::sqlite {

inline absl::Time FromUnix(double seconds) { return absl::UnixEpoch() + absl::Seconds(seconds); }

class Row {
 public:
  explicit Row(sqlite3_stmt* st) : st_(st) {}
  int64_t Int64() { return sqlite3_column_int64(st_, col_++); }
  int Int() { return sqlite3_column_int(st_, col_++); }
  bool Bool() { return Int() != 0; }
  double Real() { return sqlite3_column_double(st_, col_++); }
  std::optional<double> OptReal() {
    if (sqlite3_column_type(st_, col_) == SQLITE_NULL) {
      ++col_;
      return std::nullopt;
    }
    return Real();
  }
  std::string Text() {
    const unsigned char* p = sqlite3_column_text(st_, col_++);
    return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p));
  }
  std::string Blob() {
    const void* p = sqlite3_column_blob(st_, col_);
    auto n = static_cast<size_t>(sqlite3_column_bytes(st_, col_++));
    return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), n);
  }
  absl::Time Time() { return FromUnix(Real()); }
  std::optional<absl::Time> OptTime() {
    std::optional<double> s = OptReal();
    return s ? std::optional<absl::Time>(FromUnix(*s)) : std::nullopt;
  }

 private:
  sqlite3_stmt* st_;
  int col_ = 0;
};

class Binder {
 public:
  explicit Binder(sqlite3_stmt* st) : st_(st) {}
  Binder& Int64(int64_t v) {
    sqlite3_bind_int64(st_, idx_++, v);
    return *this;
  }
  Binder& Int(int v) {
    sqlite3_bind_int(st_, idx_++, v);
    return *this;
  }
  Binder& Bool(bool v) { return Int(v ? 1 : 0); }
  Binder& Real(double v) {
    sqlite3_bind_double(st_, idx_++, v);
    return *this;
  }
  Binder& OptReal(const std::optional<double>& v) {
    if (v) return Real(*v);
    sqlite3_bind_null(st_, idx_++);
    return *this;
  }
  Binder& Text(const std::string& s) {
    sqlite3_bind_text(st_, idx_++, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Binder& Blob(const std::string& s) {
    sqlite3_bind_blob(st_, idx_++, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Binder& Time(absl::Time t) { return Real(UnixSeconds(t)); }
  Binder& OptTime(const std::optional<absl::Time>& t) {
    return OptReal(t ? std::optional<double>(UnixSeconds(*t)) : std::nullopt);
  }

 private:
  sqlite3_stmt* st_;
  int idx_ = 1;
};

}  // namespace hpo::server::sqlite
