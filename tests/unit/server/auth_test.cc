// The token table and its decisions: who a token belongs to, users added and removed without a
// restart, and who may act on which sweep.
#include "server/auth.h"

#include <filesystem>

#include "common/files.h"
#include "gtest/gtest.h"

namespace hpo::server {
namespace {

class TokenTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = std::filesystem::temp_directory_path() / "hpo-auth-XXXXXX";
    users_ = std::string(::mkdtemp(tmpl.data())) + "/users";
  }
  void TearDown() override {
    std::filesystem::remove_all(std::filesystem::path(users_).parent_path());
  }
  void AddUser(const std::string& name, const std::string& token) {
    ASSERT_TRUE(MakeDirs(users_, 0700).ok());
    ASSERT_TRUE(WriteFileAtomic(users_ + "/" + name + ".token", token + "\n", 0600).ok());
  }
  std::string users_;
  FakeClock clock_;
};

constexpr char kOwner[] = "owner-token-0123456789abcdef";
constexpr char kBob[] = "bob-token-0123456789abcdef";

TEST_F(TokenTableTest, TheOwnerIsAdminAndNothingElseIsSomebody) {
  TokenTable table("alice", kOwner, users_, clock_);  // users_ does not exist yet
  auto owner = table.Find(kOwner);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->user, "alice");
  EXPECT_TRUE(owner->admin);
  EXPECT_FALSE(table.Find("").has_value());
  EXPECT_FALSE(table.Find("owner-token-0123456789abcdeX").has_value());
  EXPECT_FALSE(table.Find(std::string(kOwner) + "x").has_value());
}

TEST_F(TokenTableTest, UsersComeAndGoWithoutARestart) {
  TokenTable table("alice", kOwner, users_, clock_);
  EXPECT_FALSE(table.Find(kBob).has_value());
  AddUser("bob", kBob);
  EXPECT_FALSE(table.Find(kBob).has_value())
      << "an unknown token rescans at most ten times a second";
  clock_.Advance(absl::Milliseconds(100));
  auto bob = table.Find(kBob);
  ASSERT_TRUE(bob.has_value());
  EXPECT_EQ(bob->user, "bob");
  EXPECT_FALSE(bob->admin);
  AddUser("short", "tiny");  // too short to be a token: ignored
  std::filesystem::remove(users_ + "/bob.token");
  EXPECT_TRUE(table.Find(kBob).has_value()) << "known tokens are rescanned once a second";
  clock_.Advance(absl::Seconds(1));
  EXPECT_FALSE(table.Find(kBob).has_value());
  EXPECT_FALSE(table.Find("tiny").has_value());
}

TEST(CheckOwner, UsersActOnTheirOwnSweepsAndTheOwnerOnAll) {
  Caller owner{"alice", true}, bob{"bob", false};
  EXPECT_TRUE(CheckOwner(owner, "bob", 1).ok());
  EXPECT_TRUE(CheckOwner(bob, "bob", 1).ok());
  absl::Status denied = CheckOwner(bob, "carol", 7);
  EXPECT_TRUE(absl::IsPermissionDenied(denied));
  EXPECT_NE(denied.message().find("sweep 7"), std::string::npos);
  EXPECT_TRUE(absl::IsPermissionDenied(CheckOwner(bob, "", 2))) << "the owner's own sweeps";
}

}  // namespace
}  // namespace hpo::server
