// The dashboard's logins and sessions in virtual time (server/web/dashboard.h): a login link
// works once and for a few minutes, a session lasts while it is used and ends after its idle
// time, each measured on the clock the dashboard was given.
#include <memory>

#include "gtest/gtest.h"
#include "httplib.h"
#include "server/auth/auth.h"
#include "server/web/dashboard.h"
#include "server/web/metrics.h"
#include "tests/fakes/test_daemon.h"

namespace hpo::server {
namespace {

class DashboardSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Dashboard::Options options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.instance = "test";
    options.login_ttl = absl::Minutes(5);
    options.session_idle = absl::Hours(8);
    options.clock = &daemon_.clock();
    dashboard_ = std::make_unique<Dashboard>(options, daemon_.controller(), daemon_.files(),
                                             tokens_, metrics_);
    ASSERT_TRUE(dashboard_->Start().ok());
    std::string url = dashboard_->url();  // http://127.0.0.1:PORT/
    client_ = std::make_unique<httplib::Client>(url.substr(0, url.size() - 1));
  }
  void TearDown() override { dashboard_->Stop(); }

  // Follows a login link; the session cookie ("" when refused).
  std::string LogIn(const std::string& link) {
    auto res = client_->Get(link.substr(link.find("/login")));
    if (!res || res->status != 303) return "";
    std::string cookie = res->get_header_value("Set-Cookie");
    return cookie.substr(0, cookie.find(';'));
  }
  int Session(const std::string& cookie) {
    auto res = client_->Get("/api/session", {{"Cookie", cookie}});
    return res ? res->status : -1;
  }

  fakes::TestDaemon daemon_;
  TokenTable tokens_{"owner", "owner-token", "", daemon_.clock()};
  Metrics metrics_;
  std::unique_ptr<Dashboard> dashboard_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(DashboardSessionTest, ALoginLinkWorksOnceAndForAFewMinutes) {
  Caller owner = *tokens_.Find("owner-token");
  std::string link = dashboard_->IssueLogin(owner);
  std::string cookie = LogIn(link);
  ASSERT_FALSE(cookie.empty());
  EXPECT_EQ(Session(cookie), 200);
  EXPECT_EQ(LogIn(link), "") << "a link works once";
  std::string late = dashboard_->IssueLogin(owner);
  daemon_.clock().Advance(absl::Minutes(5) + absl::Seconds(1));
  EXPECT_EQ(LogIn(late), "") << "a link is good for five minutes of the dashboard's clock";
}

TEST_F(DashboardSessionTest, ASessionEndsAfterItsIdleTimeAndLastsWhileUsed) {
  std::string cookie = LogIn(dashboard_->IssueLogin(*tokens_.Find("owner-token")));
  ASSERT_FALSE(cookie.empty());
  for (int i = 0; i < 3; ++i) {  // used every 7 hours: it lasts 21
    daemon_.clock().Advance(absl::Hours(7));
    EXPECT_EQ(Session(cookie), 200) << i;
  }
  daemon_.clock().Advance(absl::Hours(8) + absl::Seconds(1));
  EXPECT_EQ(Session(cookie), 401) << "idle past --dashboard-idle";
}

}  // namespace
}  // namespace hpo::server
