#pragma once
// ReportJournal: a trial's reports, kept in its directory as the trial makes them, so that a
// report never waits for hpod and is never lost while hpod is away.
//
// `hpo report`, `hpo exec` and the Python helper append each report to the journal
// (reports.journal) before they hand it to hpod, and move the cursor (reports.sent) past it once
// hpod has stored it. What lies past the cursor is sent again, in order, when hpod answers; when
// the trial ends first, hpod reads it from the journal itself. Every report carries an id of its
// own, so hpod stores each exactly once whichever way it arrives.
//
// The journal is text, one report per line, readable by any language:
//     <id> <step or -> <unix time> <metric>=<value> ...
// Metric names never hold blanks or '=' (hpod's rule for names is stricter still); values are
// written with 17 significant digits. A line is read only once its newline is there, so a
// writer killed midway leaves nothing half read. The cursor is one line,
// "<offset> <retry after, unix ms> <backoff ms>": the byte offset just past the last report
// hpod acknowledged, and when the reporter should next try after hpod did not answer.
//
// Thread safety: none; one process reports for a trial at a time (rank 0 of a multi-node trial).
// Errors: UNAVAILABLE with the path when a file cannot be read or written.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hpo {

struct JournalEntry {
  int64_t id = 0;               // the report's id (never 0)
  std::optional<int64_t> step;  // absent: the trial's last step + 1, as hpod sees it
  std::map<std::string, double> metrics;
  absl::Time time;  // when the trial made the report
  int64_t end = 0;  // the byte offset just past its line
};

// One journal line, with its newline. INVALID_ARGUMENT for a metric name that the format
// cannot hold (empty, or with a blank or '=').
[[nodiscard]] absl::StatusOr<std::string> FormatJournalLine(const JournalEntry& entry);

// The entries of `text` (a journal read from byte offset `from`), each with its `end` counted
// from the journal's start. Lines that do not parse are skipped and counted in `*malformed`.
std::vector<JournalEntry> ParseJournal(absl::string_view text, int64_t from,
                                       int* malformed = nullptr);

struct JournalCursor {
  int64_t sent = 0;                               // hpod has stored everything before this
  absl::Time retry_after = absl::InfinitePast();  // hpod did not answer: try again after this
  absl::Duration backoff = absl::ZeroDuration();  // the wait after the last miss; 0: none
};

class ReportJournal {
 public:
  explicit ReportJournal(std::string trial_dir);

  const std::string& path() const { return path_; }
  // Appends `entry` (one write) and sets its `end`.
  [[nodiscard]] absl::Status Append(JournalEntry& entry);
  // The entries past the cursor, oldest first. A missing journal has none.
  [[nodiscard]] absl::StatusOr<std::vector<JournalEntry>> Unsent() const;
  // The cursor as written last; the start when there is none (or it does not parse).
  JournalCursor ReadCursor() const;
  [[nodiscard]] absl::Status WriteCursor(const JournalCursor& cursor) const;

 private:
  std::string path_;
  std::string cursor_path_;
};

}  // namespace hpo
