#include "common/report_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "common/files.h"
#include "gtest/gtest.h"

namespace hpo {
namespace {

class ReportJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hpo-journal-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void AppendRaw(const std::string& text) {
    int fd = ::open((dir_ + "/reports.journal").c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fd);
  }
  static JournalEntry Entry(int64_t id, std::optional<int64_t> step, double loss) {
    JournalEntry e;
    e.id = id;
    e.step = step;
    e.metrics = {{"loss", loss}, {"val/acc", 0.1}};
    e.time = absl::FromUnixMillis(1'700'000'000'250);
    return e;
  }
  std::string dir_;
};

TEST_F(ReportJournalTest, WhatIsAppendedIsReadBackExactlyAndInOrder) {
  ReportJournal journal(dir_);
  JournalEntry a = Entry(7, 3, 1.0 / 3.0);
  JournalEntry b = Entry(9, std::nullopt, 1e-300);
  ASSERT_TRUE(journal.Append(a).ok());
  ASSERT_TRUE(journal.Append(b).ok());
  EXPECT_GT(a.end, 0);
  EXPECT_GT(b.end, a.end);
  auto unsent = journal.Unsent();
  ASSERT_TRUE(unsent.ok()) << unsent.status();
  ASSERT_EQ(unsent->size(), 2u);
  const JournalEntry& r = (*unsent)[0];
  EXPECT_EQ(r.id, 7);
  EXPECT_EQ(r.step, 3);
  EXPECT_EQ(r.metrics.at("loss"), 1.0 / 3.0);  // every bit of the double
  EXPECT_EQ(r.metrics.at("val/acc"), 0.1);
  EXPECT_EQ(r.time, a.time);
  EXPECT_EQ(r.end, a.end);
  EXPECT_FALSE((*unsent)[1].step.has_value());
  EXPECT_EQ((*unsent)[1].metrics.at("loss"), 1e-300);
}

TEST_F(ReportJournalTest, TheCursorHidesWhatHpodHasAndKeepsTheWaitAfterAMiss) {
  ReportJournal journal(dir_);
  EXPECT_EQ(journal.ReadCursor().sent, 0);  // none yet
  JournalEntry a = Entry(1, 1, 0.5), b = Entry(2, 2, 0.4);
  ASSERT_TRUE(journal.Append(a).ok());
  ASSERT_TRUE(journal.Append(b).ok());
  JournalCursor c;
  c.sent = a.end;
  c.backoff = absl::Seconds(4);
  c.retry_after = absl::FromUnixMillis(1'700'000'004'000);
  ASSERT_TRUE(journal.WriteCursor(c).ok());
  JournalCursor read = journal.ReadCursor();
  EXPECT_EQ(read.sent, a.end);
  EXPECT_EQ(read.backoff, absl::Seconds(4));
  EXPECT_EQ(read.retry_after, c.retry_after);
  auto unsent = journal.Unsent();
  ASSERT_TRUE(unsent.ok());
  ASSERT_EQ(unsent->size(), 1u);
  EXPECT_EQ((*unsent)[0].id, 2);
  EXPECT_EQ((*unsent)[0].end, b.end);
  // A cursor that does not parse is the start: everything is sent again (hpod knows the ids).
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/reports.sent", "garbage\n").ok());
  EXPECT_EQ(journal.ReadCursor().sent, 0);
  EXPECT_EQ(journal.Unsent()->size(), 2u);
}

TEST_F(ReportJournalTest, AHalfWrittenLineWaitsAndBadLinesAreSkipped) {
  ReportJournal journal(dir_);
  AppendRaw("5 1 1700000000.000000 loss=0.5\n");
  AppendRaw("not a report\n");
  AppendRaw("0 2 1700000000.000000 loss=0.5\n");  // id 0: none
  AppendRaw("6 - 1700000000.000000 loss\n");      // no value
  AppendRaw("8 3 1700000001.000000 loss=0.25\n");
  AppendRaw("9 4 1700000001.0000");  // the writer is still at it
  int malformed = 0;
  auto text = ReadFile(journal.path());
  ASSERT_TRUE(text.ok());
  std::vector<JournalEntry> entries = ParseJournal(*text, 0, &malformed);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].id, 5);
  EXPECT_EQ(entries[1].id, 8);
  EXPECT_EQ(entries[1].metrics.at("loss"), 0.25);
  EXPECT_EQ(malformed, 3);
  AppendRaw("00000 loss=0.125\n");
  EXPECT_EQ(journal.Unsent()->size(), 3u);  // its line is whole now
  EXPECT_EQ(journal.Unsent()->back().step, 4);
}

TEST_F(ReportJournalTest, ANameTheFormatCannotHoldIsRefused) {
  ReportJournal journal(dir_);
  JournalEntry e = Entry(1, 1, 0.5);
  e.metrics = {{"a b", 1.0}};
  EXPECT_TRUE(absl::IsInvalidArgument(journal.Append(e)));
  e.metrics = {{"a=b", 1.0}};
  EXPECT_TRUE(absl::IsInvalidArgument(journal.Append(e)));
  EXPECT_FALSE(std::filesystem::exists(journal.path()));  // nothing written
  ReportJournal nowhere("/nonexistent/trial");
  e.metrics = {{"loss", 1.0}};
  EXPECT_TRUE(absl::IsUnavailable(nowhere.Append(e)));
  EXPECT_TRUE(nowhere.Unsent()->empty());  // no journal: nothing waits
}

}  // namespace
}  // namespace hpo
