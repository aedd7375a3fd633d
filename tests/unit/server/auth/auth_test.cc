// The token table and the gate: who a token belongs to and with which role, users added,
// removed, rotated and given roles without a restart, and what each role may do on which sweep.
#include "server/auth/auth.h"

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
  void SetAccess(const std::string& name, const std::string& text) {
    ASSERT_TRUE(WriteFileAtomic(users_ + "/" + name + ".access", text, 0600).ok());
  }
  std::string users_;
  FakeClock clock_;
};

constexpr char kOwner[] = "owner-token-0123456789abcdef";
constexpr char kBob[] = "bob-token-0123456789abcdef";

TEST_F(TokenTableTest, TheOwnerIsTheOwnerAndNothingElseIsSomebody) {
  TokenTable table("alice", kOwner, users_, clock_);  // users_ does not exist yet
  auto owner = table.Find(kOwner);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->user, "alice");
  EXPECT_TRUE(owner->owner());
  EXPECT_EQ(owner->token, kOwner);
  EXPECT_FALSE(table.Find("").has_value());
  EXPECT_FALSE(table.Find("owner-token-0123456789abcdeX").has_value());
  EXPECT_FALSE(table.Find(std::string(kOwner) + "x").has_value());
}

TEST_F(TokenTableTest, UsersComeGoAndChangeRoleAtOnce) {
  TokenTable table("alice", kOwner, users_, clock_);
  EXPECT_FALSE(table.Find(kBob).has_value());
  AddUser("bob", kBob);
  auto bob = table.Find(kBob);  // the directory changed: read again, no waiting
  ASSERT_TRUE(bob.has_value());
  EXPECT_EQ(bob->user, "bob");
  EXPECT_FALSE(bob->owner());
  EXPECT_EQ(bob->role, Role::kNone) << "a token without an access file has no role";
  SetAccess("bob", "role viewer\nsweep 7 operator\n");
  bob = table.Find(kBob);
  ASSERT_TRUE(bob.has_value());
  EXPECT_EQ(bob->role, Role::kViewer);
  EXPECT_EQ(bob->sweeps.at(7), Role::kOperator);
  AddUser("short", "tiny");  // too short to be a token: ignored
  EXPECT_FALSE(table.Find("tiny").has_value());
  std::filesystem::remove(users_ + "/bob.token");
  EXPECT_FALSE(table.Find(kBob).has_value()) << "a removed user's token ends at once";
}

TEST_F(TokenTableTest, ARotatedOwnerTokenReplacesTheOldOne) {
  std::string path = std::filesystem::path(users_).parent_path() / "token";
  ASSERT_TRUE(WriteFileAtomic(path, std::string(kOwner) + "\n", 0600).ok());
  TokenTable table("alice", kOwner, users_, clock_, path);
  ASSERT_TRUE(table.Find(kOwner).has_value());
  constexpr char kNew[] = "new-owner-token-0123456789abcdef";
  ASSERT_TRUE(WriteFileAtomic(path, std::string(kNew) + "\n", 0600).ok());
  clock_.Advance(absl::Seconds(1));
  EXPECT_FALSE(table.Find(kOwner).has_value());
  ASSERT_TRUE(table.Find(kNew).has_value());
  EXPECT_TRUE(table.Find(kNew)->owner());
}

TEST_F(TokenTableTest, ABadAccessFileGivesNoRole) {
  TokenTable table("alice", kOwner, users_, clock_);
  AddUser("bob", kBob);
  SetAccess("bob", "role admin\n");
  auto bob = table.Find(kBob);
  ASSERT_TRUE(bob.has_value());
  EXPECT_EQ(bob->role, Role::kNone);
  EXPECT_FALSE(Authorize(*bob, Action::kView, nullptr).ok());
}

TEST(Authorize, TheOwnerDoesEverything) {
  Caller owner = Caller::Owner("alice");
  SweepRef bobs{3, "bob"};
  for (Action a : {Action::kUse, Action::kView, Action::kOperate, Action::kSubmit, Action::kRemove,
                   Action::kMetrics}) {
    EXPECT_TRUE(Authorize(owner, a, &bobs).ok());
  }
}

TEST(Authorize, OnlyTheOwnerRunsCommands) {
  Caller op;
  op.user = "bob";
  op.role = Role::kOperator;
  for (Action a : {Action::kSubmit, Action::kRemove}) {
    absl::Status s = Authorize(op, a);
    EXPECT_TRUE(absl::IsPermissionDenied(s));
    EXPECT_NE(s.message().find("only the daemon's owner"), std::string::npos) << s;
  }
}

TEST(Authorize, RolesOnEverySweepOrOnNamedOnes) {
  SweepRef one{1, "alice"}, two{2, "alice"}, legacy{3, "carol"};
  Caller viewer;
  viewer.user = "vic";
  viewer.role = Role::kViewer;
  EXPECT_TRUE(Authorize(viewer, Action::kView, &one).ok());
  absl::Status s = Authorize(viewer, Action::kOperate, &one);
  EXPECT_TRUE(absl::IsPermissionDenied(s));
  EXPECT_NE(s.message().find("sweep 1"), std::string::npos) << s;
  EXPECT_TRUE(Authorize(viewer, Action::kUse).ok());
  EXPECT_TRUE(Authorize(viewer, Action::kMetrics).ok()) << "filtered to what it may see";

  Caller named;  // operator on sweep 2 only
  named.user = "nora";
  named.sweeps[2] = Role::kOperator;
  EXPECT_TRUE(absl::IsPermissionDenied(Authorize(named, Action::kView, &one)));
  EXPECT_TRUE(Authorize(named, Action::kOperate, &two).ok());

  Caller carol;  // submitted sweep 3 before roles: hers to operate, nothing else
  carol.user = "carol";
  EXPECT_TRUE(Authorize(carol, Action::kOperate, &legacy).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(Authorize(carol, Action::kView, &one)));
  EXPECT_TRUE(absl::IsPermissionDenied(Authorize(carol, Action::kRemove, &legacy)));
}

TEST(Authorize, AMetricsTokenReadsMetricsAndNothingElse) {
  Caller scraper;
  scraper.user = "prometheus";
  scraper.kind = Caller::Kind::kMetrics;
  SweepRef one{1, "alice"};
  EXPECT_TRUE(Authorize(scraper, Action::kMetrics).ok());
  for (Action a : {Action::kUse, Action::kView, Action::kOperate, Action::kSubmit}) {
    EXPECT_TRUE(absl::IsPermissionDenied(Authorize(scraper, a, &one)));
  }
}

TEST(AccessFile, RolesAndSweepsAreChecked) {
  auto ok = ParseAccessFile("# given by the owner\nrole operator\nsweep 4 viewer\n");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->role, "operator");
  EXPECT_EQ(ok->sweeps.at(4), "viewer");
  EXPECT_EQ(ParseAccessFile(AccessFileText(*ok))->sweeps, ok->sweeps);
  absl::StatusOr<AccessFile> bad = ParseAccessFile("role viewer\nrole root\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status();
  EXPECT_FALSE(ParseAccessFile("sweep x viewer").ok());
  EXPECT_FALSE(ParseAccessFile("sweep 4 metrics").ok()) << "metrics is not per sweep";
  EXPECT_FALSE(ParseAccessFile("{\"role\": \"viewer\"}").ok());
}

}  // namespace
}  // namespace hpo::server
