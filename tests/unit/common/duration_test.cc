#include "common/duration.h"

#include "gtest/gtest.h"

namespace hpo {
namespace {

TEST(ParseDuration, AcceptsUnitsAndBareSeconds) {
  EXPECT_EQ(*ParseDuration("90"), absl::Seconds(90));
  EXPECT_EQ(*ParseDuration("90s"), absl::Seconds(90));
  EXPECT_EQ(*ParseDuration("15m"), absl::Minutes(15));
  EXPECT_EQ(*ParseDuration("2h"), absl::Hours(2));
  EXPECT_EQ(*ParseDuration("1d"), absl::Hours(24));
  EXPECT_EQ(*ParseDuration("1h30m"), absl::Minutes(90));
  EXPECT_EQ(*ParseDuration("500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseDuration(" 1.5s "), absl::Milliseconds(1500));
}

TEST(ParseDuration, RefusesGarbageWithTheText) {
  for (const char* bad : {"", "abc", "-5", "10x", "h", "1e30"}) {
    auto d = ParseDuration(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(d.status()));
    EXPECT_NE(d.status().message().find(bad), std::string::npos);
  }
}

TEST(HumanDuration, IsShort) {
  EXPECT_EQ(HumanDuration(absl::Milliseconds(350)), "350ms");
  EXPECT_EQ(HumanDuration(absl::Milliseconds(4200)), "4.2s");
  EXPECT_EQ(HumanDuration(absl::Seconds(125)), "2m05s");
  EXPECT_EQ(HumanDuration(absl::Seconds(3723)), "1h02m03s");
}

}  // namespace
}  // namespace hpo
