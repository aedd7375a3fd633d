#include "common/report_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/layout.h"

namespace hpo {
namespace {

absl::Status Unavailable(const std::string& what, const std::string& path) {
  return absl::UnavailableError(
      absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(errno)));
}

bool ParseLine(absl::string_view line, JournalEntry& e) {
  std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (fields.size() < 4) return false;
  if (!absl::SimpleAtoi(fields[0], &e.id) || e.id == 0) return false;
  if (fields[1] != "-") {
    int64_t step = 0;
    if (!absl::SimpleAtoi(fields[1], &step)) return false;
    e.step = step;
  }
  // Seconds and microseconds apart, so that the time read is the time written.
  absl::string_view whole = fields[2], fraction;
  if (size_t dot = whole.find('.'); dot != absl::string_view::npos) {
    fraction = whole.substr(dot + 1, 6);
    whole = whole.substr(0, dot);
  }
  int64_t seconds = 0, micros = 0;
  if (!absl::SimpleAtoi(whole, &seconds) || seconds < 0 ||
      (!fraction.empty() && !absl::SimpleAtoi(fraction, &micros)) || micros < 0) {
    return false;
  }
  for (size_t i = fraction.size(); i < 6; ++i) micros *= 10;
  e.time = absl::FromUnixSeconds(seconds) + absl::Microseconds(micros);
  for (size_t i = 3; i < fields.size(); ++i) {
    size_t eq = fields[i].find('=');
    double value = 0;
    if (eq == 0 || eq == absl::string_view::npos ||
        !absl::SimpleAtod(fields[i].substr(eq + 1), &value)) {
      return false;
    }
    e.metrics[std::string(fields[i].substr(0, eq))] = value;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> FormatJournalLine(const JournalEntry& entry) {
  int64_t micros = absl::ToUnixMicros(entry.time);
  std::string line =
      absl::StrCat(entry.id, " ", entry.step ? absl::StrCat(*entry.step) : "-", " ",
                   micros / 1'000'000, ".", absl::StrFormat("%06d", micros % 1'000'000));
  for (const auto& [name, value] : entry.metrics) {
    if (name.empty() || name.find_first_of(" \t\n\r=") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric name '", name, "' is empty or holds a blank or '='"));
    }
    absl::StrAppend(&line, " ", name, "=", absl::StrFormat("%.17g", value));
  }
  line.push_back('\n');
  return line;
}

std::vector<JournalEntry> ParseJournal(absl::string_view text, int64_t from, int* malformed) {
  std::vector<JournalEntry> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == absl::string_view::npos) break;  // a line still being written
    JournalEntry e;
    if (ParseLine(text.substr(pos, nl - pos), e)) {
      e.end = from + static_cast<int64_t>(nl + 1);
      out.push_back(std::move(e));
    } else if (malformed != nullptr) {
      ++*malformed;
    }
    pos = nl + 1;
  }
  return out;
}

ReportJournal::ReportJournal(std::string trial_dir) {
  layout::TrialDir dir(std::move(trial_dir));
  path_ = dir.report_journal();
  cursor_path_ = dir.report_cursor();
}

absl::Status ReportJournal::Append(JournalEntry& entry) {
  absl::StatusOr<std::string> line = FormatJournalLine(entry);
  if (!line.ok()) return line.status();
  int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable("open", path_);
  ssize_t n = ::write(fd, line->data(), line->size());
  off_t end = ::lseek(fd, 0, SEEK_CUR);
  absl::Status s = absl::OkStatus();
  if (n != static_cast<ssize_t>(line->size()) || end < 0) s = Unavailable("append to", path_);
  ::close(fd);
  if (s.ok()) entry.end = end;
  return s;
}

absl::StatusOr<std::vector<JournalEntry>> ReportJournal::Unsent() const {
  int64_t from = ReadCursor().sent;
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::vector<JournalEntry>{};
    return Unavailable("open", path_);
  }
  std::string text;
  char buf[65536];
  ssize_t n = 0;
  if (::lseek(fd, from, SEEK_SET) == from) {
    while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  }
  absl::Status s = n < 0 ? Unavailable("read", path_) : absl::OkStatus();
  ::close(fd);
  if (!s.ok()) return s;
  return ParseJournal(text, from);
}

JournalCursor ReportJournal::ReadCursor() const {
  JournalCursor c;
  absl::StatusOr<std::string> text = ReadFile(cursor_path_);
  if (!text.ok()) return c;
  std::vector<absl::string_view> f =
      absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  int64_t sent = 0, retry_ms = 0, backoff_ms = 0;
  if (f.size() != 3 || !absl::SimpleAtoi(f[0], &sent) || !absl::SimpleAtoi(f[1], &retry_ms) ||
      !absl::SimpleAtoi(f[2], &backoff_ms) || sent < 0) {
    return c;
  }
  c.sent = sent;
  if (backoff_ms > 0) {
    c.retry_after = absl::FromUnixMillis(retry_ms);
    c.backoff = absl::Milliseconds(backoff_ms);
  }
  return c;
}

absl::Status ReportJournal::WriteCursor(const JournalCursor& cursor) const {
  int64_t retry_ms =
      cursor.backoff > absl::ZeroDuration() ? absl::ToUnixMillis(cursor.retry_after) : 0;
  return WriteFileAtomic(cursor_path_,
                         absl::StrCat(cursor.sent, " ", retry_ms, " ",
                                      absl::ToInt64Milliseconds(cursor.backoff), "\n"),
                         0644, /*sync=*/false);
}

}  // namespace hpo
