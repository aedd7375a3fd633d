// ShellQuote: what a word becomes on a /bin/sh command line, checked against the shell itself.
#include "common/shell_quote.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace hpo {
namespace {

// What /bin/sh makes of `line` as the arguments of printf '%s\n'.
std::string ShellSays(const std::string& words) {
  std::string cmd = "printf '%s\\n' " + words;
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

TEST(ShellQuote, LeavesSafeWordsAlone) {
  EXPECT_EQ(ShellQuote("train.py"), "train.py");
  EXPECT_EQ(ShellQuote("--lr=0.01"), "--lr=0.01");
  EXPECT_EQ(ShellQuote("/a/b:c,d@e%f+g"), "/a/b:c,d@e%f+g");
}

TEST(ShellQuote, QuotesEverythingElse) {
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("$HOME"), "'$HOME'");
}

TEST(ShellQuote, TheShellGetsBackExactlyTheWord) {
  for (std::string word : {"plain", "two words", "it's", "$(rm -rf /)", "`x`", "a\"b", "tab\there",
                           "*", "~", "semi;colon", "new\nline", "", "back\\slash", "'"}) {
    EXPECT_EQ(ShellSays(ShellQuote(word)), word + "\n") << word;
  }
}

}  // namespace
}  // namespace hpo
