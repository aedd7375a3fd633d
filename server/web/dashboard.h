#pragma once
// Dashboard: hpod's web dashboard, its JSON API and Prometheus /metrics, over HTTP on loopback
// (cpp-httplib; the page's assets are built into the binary).
//
// Access. Nothing is served without a session: `hpo dashboard` asks hpod (gRPC, as its user)
// for a one-time login link, good for a few minutes; opening it sets a session cookie
// (HttpOnly, SameSite=Strict, Secure under TLS, named after this hpod instance so that two
// hpods on one host keep their sessions apart) and leads to the page. A session acts as the
// token it was made from, checked again on every request: removing the user (`hpo user rm`) or
// rotating the token ends its sessions and unused links at once, and a changed role holds at
// once. A session unused for `session_idle` ends; `POST logout` ends it. A session sees what its
// user may through gRPC (server/auth.h). Requests that change something (POST) must also carry
// the session's CSRF token in an X-HPO-CSRF header, which no other site's page can set without
// a CORS preflight, and hpod answers no CORS request; a POST without a session is refused
// before its body is read, and no body may exceed 64 KiB. /metrics takes the session or a
// token (Authorization: Bearer, as a Prometheus scrape sends it; a `metrics` role's token reads
// nothing else). Every answer carries a Content-Security-Policy (scripts, styles and requests
// only from the dashboard itself; no framing), X-Content-Type-Options: nosniff and
// Referrer-Policy: no-referrer. With a certificate (hpod's --tls-cert) the dashboard speaks
// HTTPS only. Every link is relative, so the dashboard works under a path prefix (a reverse
// proxy, Open OnDemand) and through an SSH tunnel.
//
// Threads: HTTP requests are served on the server's own threads; they read and act through the
// controller (Post, waiting for the batch) and never touch its state themselves. Live updates are
// server-sent events fed by the sweep's event log, as `hpo watch` is. Start/Stop from one thread.

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/data_dir.h"
#include "common/slots.h"
#include "server/auth/auth.h"
#include "server/core/controller.h"
#include "server/core/trial_files.h"
#include "server/web/metrics.h"

namespace httplib {
class Server;
class Request;
class Response;
}  // namespace httplib

namespace hpo::server {

class Dashboard {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 0;  // 0: the system picks one
    absl::Duration login_ttl = absl::Minutes(5);
    absl::Duration session_idle = absl::Hours(8);
    std::string tls_cert, tls_key;  // both set: HTTPS only
    std::string instance;           // names the session cookie (DataDir's instance id)
    // The time logins and sessions expire by; null: the system clock.
    const Clock* clock = nullptr;
  };
  Dashboard(Options options, Controller& controller, TrialFiles& files, TokenTable& tokens,
            const Metrics& metrics);
  ~Dashboard();
  Dashboard(const Dashboard&) = delete;
  Dashboard& operator=(const Dashboard&) = delete;

  // Listens and serves on its own threads. UNAVAILABLE when the address cannot be bound.
  [[nodiscard]] absl::Status Start();
  void Stop();
  // "http://127.0.0.1:PORT/", once started.
  std::string url() const;
  // A one-time login link for `caller`: the dashboard's URL with "login?token=...".
  std::string IssueLogin(const Caller& caller);

  // hpod's dashboard at `address` (host:port, port 0: the one it had last time, kept in
  // DATA_DIR/dashboard_port, else any), started, its URL in DATA_DIR/dashboard. `options`
  // gives the rest (TLS, the idle timeout); its host, port and instance are set here.
  // INVALID_ARGUMENT for a bad address or certificate, UNAVAILABLE when it cannot listen.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Dashboard>> Open(
      const std::string& address, Options options, const DataDir& data_dir, Controller& controller,
      TrialFiles& files, TokenTable& tokens, const Metrics& metrics);
  // The session cookie's name.
  const std::string& cookie() const { return cookie_; }

 private:
  absl::Time Now() const;
  struct Session {
    std::string token;  // the credential it acts as
    std::string csrf;
    absl::Time last_used;
  };
  // Who a request comes from: its session's caller as of now (or, with `bearer_ok`, its bearer
  // token's), and the session's id and CSRF token ("" for a bearer).
  struct Visitor {
    Caller caller;
    std::string session, csrf;
  };
  // The visitor of the request's session cookie (or bearer token), or nullopt.
  std::optional<Visitor> Find(const httplib::Request& req, bool bearer_ok);
  // Find, or nullopt after answering 401.
  std::optional<Visitor> Authorize(const httplib::Request& req, httplib::Response& res,
                                   bool bearer_ok = false);
  void Routes();
  void Login(const httplib::Request& req, httplib::Response& res);
  void Logout(const httplib::Request& req, httplib::Response& res);
  void Events(const httplib::Request& req, httplib::Response& res, const Caller& caller);
  void Log(const httplib::Request& req, httplib::Response& res, const Caller& caller);

  Options options_;
  Controller& controller_;
  TrialFiles& files_;
  TokenTable& tokens_;
  const Metrics& metrics_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::string cookie_;
  // One-time login token -> the credential it logs in as, and until when.
  std::map<std::string, std::pair<std::string, absl::Time>> logins_;
  std::map<std::string, Session> sessions_;        // cookie value -> session
  std::vector<std::weak_ptr<EventSink>> streams_;  // open event streams
  // Each open event stream holds one of the server's threads: so many per user, and in all, so
  // that other pages and requests always find one.
  std::shared_ptr<Slots> stream_slots_ = Slots::Make("dashboard pages open (event streams)", 6, 20);
  bool stopping_ = false;
};

}  // namespace hpo::server
