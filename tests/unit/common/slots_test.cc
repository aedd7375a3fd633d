// Slots: each user may hold so many at once, and all users together so many; a slot comes back
// when its last handle goes, even after the Slots' owner dropped it.
#include "common/slots.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hpo {
namespace {

using ::testing::HasSubstr;

TEST(SlotsTest, EachUserHasSoManyAndAllTogetherSoMany) {
  std::shared_ptr<Slots> slots = Slots::Make("open streams", 2, 3);
  absl::StatusOr<Slots::Held> a1 = slots->Take("alice"), a2 = slots->Take("alice");
  ASSERT_TRUE(a1.ok() && a2.ok());
  absl::StatusOr<Slots::Held> a3 = slots->Take("alice");
  ASSERT_TRUE(absl::IsResourceExhausted(a3.status()));
  EXPECT_THAT(a3.status().message(), HasSubstr("alice has 2 open streams, the most one user"));
  absl::StatusOr<Slots::Held> b1 = slots->Take("bob");
  ASSERT_TRUE(b1.ok()) << "another user is not held back by alice's";
  absl::StatusOr<Slots::Held> c1 = slots->Take("carol");
  ASSERT_TRUE(absl::IsResourceExhausted(c1.status()));
  EXPECT_THAT(c1.status().message(), HasSubstr("this hpod has 3 open streams of all its users"));
  EXPECT_EQ(slots->held("carol"), 0);
  a1->reset();
  EXPECT_EQ(slots->held("alice"), 1);
  EXPECT_TRUE(slots->Take("carol").ok()) << "a slot given back is free again";
  EXPECT_EQ(slots->held(), 2) << "carol's handle went at once";
}

TEST(SlotsTest, AHandleOutlivesItsSlots) {
  Slots::Held held;
  {
    std::shared_ptr<Slots> slots = Slots::Make("plans", 1, 1);
    held = *slots->Take("alice");
  }
  held.reset();  // no crash: the Slots are gone
  SUCCEED();
}

}  // namespace
}  // namespace hpo
