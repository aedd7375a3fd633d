#include "server/web/dashboard.h"

#include <chrono>
#include <deque>
#include <future>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/layout.h"
#include "common/status_macros.h"
#include "common/token.h"
#include "hpo/v1/states.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server/web/dashboard_assets.h"
#include "server/web/dashboard_data.h"
#include "spdlog/spdlog.h"

namespace hpo::server {
namespace {

using json = nlohmann::json;
constexpr size_t kMaxBody = 64 * 1024;
// What the page may load and where it may send requests: only the dashboard itself. Chart.js
// and the page draw on canvases; data: is for the empty icon.
constexpr char kContentSecurityPolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

int HttpCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;  // a limit of this caller's (or of every caller's): later, or close something
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

// Whether the client takes gzip ("Accept-Encoding: gzip, br", not "gzip;q=0").
bool TakesGzip(const httplib::Request& req) {
  for (absl::string_view coding : absl::StrSplit(req.get_header_value("Accept-Encoding"), ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(coding, ';');
    if (absl::StripAsciiWhitespace(parts[0]) != "gzip") continue;
    return parts.size() < 2 || absl::StripAsciiWhitespace(parts[1]) != "q=0";
  }
  return false;
}

// `body` gzip-compressed (cpp-httplib's compressor), or nullopt if that failed.
std::optional<std::string> Gzip(absl::string_view body) {
  std::string out;
  httplib::detail::gzip_compressor gzip;
  if (!gzip.compress(body.data(), body.size(), /*last=*/true, [&](const char* data, size_t n) {
        out.append(data, n);
        return true;
      })) {
    return std::nullopt;
  }
  return out;
}

// Sets the response's body: gzip-compressed (`gzipped`, or compressed here) when the client takes
// it and that is worth it. hpod compresses itself and hands cpp-httplib a body of known length,
// which it sends as it is: left to itself, the library prefers brotli at its slowest setting,
// which takes 100-300 ms for 90-200 KB.
void Send(const httplib::Request& req, httplib::Response& res, std::string body,
          const std::string& type, std::shared_ptr<const std::string> gzipped = nullptr) {
  if (TakesGzip(req) && body.size() >= 1024) {
    if (gzipped == nullptr) {
      if (std::optional<std::string> z = Gzip(body)) {
        gzipped = std::make_shared<const std::string>(std::move(*z));
      }
    }
    if (gzipped != nullptr) {
      res.set_header("Content-Encoding", "gzip");
      body = *gzipped;
    }
  }
  res.set_header("Vary", "Accept-Encoding");
  if (body.empty()) {
    res.set_content("", type);
    return;
  }
  auto shared = std::make_shared<const std::string>(std::move(body));
  res.set_content_provider(shared->size(), type,
                           [shared](size_t offset, size_t length, httplib::DataSink& sink) {
                             return sink.write(shared->data() + offset, length);
                           });
}

void Reply(const httplib::Request& req, httplib::Response& res, const absl::StatusOr<json>& body) {
  res.set_header("Cache-Control", "no-store");
  if (!body.ok()) {
    res.status = HttpCode(body.status());
    Send(req, res, json{{"error", std::string(body.status().message())}}.dump(),
         "application/json");
    return;
  }
  res.status = 200;
  Send(req, res, body->dump(), "application/json");
}

// How long a page's request waits for the controller (Controller::Call).
constexpr absl::Duration kAnswerWithin = absl::Seconds(30);

absl::StatusOr<json> OnController(Controller& controller, std::function<absl::StatusOr<json>()> fn,
                                  bool writes = false) {
  return controller.Call<json>(std::move(fn), kAnswerWithin, writes);
}

int64_t IdOf(const httplib::Request& req) {
  int64_t id = 0;
  (void)absl::SimpleAtoi(req.matches[1].str(), &id);
  return id;
}

// A request's query parameters, copied: what work posted to the controller reads, so that it
// never refers to a request that may be gone by the time it runs.
using Params = httplib::Params;

std::string Param(const Params& params, const char* name) {
  auto it = params.find(name);
  return it == params.end() ? std::string() : it->second;
}

int64_t IntParam(const Params& params, const char* name, int64_t fallback) {
  int64_t v = fallback;
  if (auto it = params.find(name); it != params.end()) (void)absl::SimpleAtoi(it->second, &v);
  return v;
}

// "sort=param:lr&desc=1&state=RUNNING,COMPLETED&range=lr:0.001:0.1&offset=0&limit=50"
absl::StatusOr<TrialQuery> QueryOf(const Params& params) {
  TrialQuery q;
  q.offset = IntParam(params, "offset", 0);
  q.limit = IntParam(params, "limit", 50);
  if (params.count("sort") > 0) q.sort = Param(params, "sort");
  q.descending = Param(params, "desc") == "1";
  if (params.count("state") > 0) {
    for (absl::string_view s : absl::StrSplit(Param(params, "state"), ',', absl::SkipEmpty())) {
      v1::TrialState state;
      if (!v1::TrialState_Parse(absl::StrCat("TRIAL_STATE_", s), &state)) {
        return absl::InvalidArgumentError(absl::StrCat("unknown trial state '", s, "'"));
      }
      q.states.push_back(state);
    }
  }
  auto [from, to] = params.equal_range("range");
  for (auto it = from; it != to; ++it) {
    std::vector<std::string> f = absl::StrSplit(it->second, ':');
    double lo = 0, hi = 0;
    if (f.size() != 3 || !absl::SimpleAtod(f[1], &lo) || !absl::SimpleAtod(f[2], &hi)) {
      return absl::InvalidArgumentError("range is NAME:LOW:HIGH");
    }
    q.ranges[f[0]] = {lo, hi};
  }
  return q;
}

// A sweep's events as they come, for one server-sent event stream.
class StreamSink final : public EventSink {
 public:
  void Push(const v1::Event& event) override {
    std::lock_guard lock(mu_);
    if (queue_.size() < 100'000) queue_.push_back(event);
    cv_.notify_one();
  }
  void Close(const absl::Status&) override {
    std::lock_guard lock(mu_);
    closed_ = true;
    cv_.notify_one();
  }
  bool Gone() const override { return gone_.load(); }
  void Leave() { gone_ = true; }
  // The next events, or none after `wait` (a keep-alive is due); false once closed.
  bool Next(std::vector<v1::Event>& out, std::chrono::seconds wait) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return !queue_.empty() || closed_; });
    out.assign(queue_.begin(), queue_.end());
    queue_.clear();
    return !(closed_ && out.empty());
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::Event> queue_;
  bool closed_ = false;
  std::atomic<bool> gone_{false};
};

}  // namespace

Dashboard::Dashboard(Options options, Controller& controller, TrialFiles& files, TokenTable& tokens,
                     const Metrics& metrics)
    : options_(std::move(options)),
      controller_(controller),
      files_(files),
      tokens_(tokens),
      metrics_(metrics),
      // Unique to this hpod (cookies are per host, not per port); __Secure- under TLS, so that a
      // browser takes it only over HTTPS.
      cookie_(absl::StrCat(options_.tls_cert.empty() ? "" : "__Secure-", "hpod_",
                           options_.instance.empty() ? "dashboard" : options_.instance)) {}

Dashboard::~Dashboard() { Stop(); }

absl::Time Dashboard::Now() const {
  return options_.clock != nullptr ? options_.clock->Now() : SystemClock::Get().Now();
}

absl::Status Dashboard::Start() {
  if (!options_.tls_cert.empty()) {
    auto tls =
        std::make_unique<httplib::SSLServer>(options_.tls_cert.c_str(), options_.tls_key.c_str());
    if (!tls->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat("the dashboard cannot use the certificate ",
                                                     options_.tls_cert, " with its key ",
                                                     options_.tls_key));
    }
    server_ = std::move(tls);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  // Enough threads for several open pages, each holding one for its event stream.
  server_->new_task_queue = [] { return new httplib::ThreadPool(32); };
  server_->set_payload_max_length(kMaxBody);
  server_->set_default_headers({{"Content-Security-Policy", kContentSecurityPolicy},
                                {"X-Content-Type-Options", "nosniff"},
                                {"X-Frame-Options", "DENY"},
                                {"Referrer-Policy", "no-referrer"}});
  // Runs once the headers are read and before any body is: a request with a body (every POST)
  // without a session is answered here, and its body never read.
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "GET" || req.method == "HEAD") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (Find(req, /*bearer_ok=*/false)) return httplib::Server::HandlerResponse::Unhandled;
    res.status = 401;
    res.set_header("Connection", "close");  // the unread body must not be taken for a request
    res.set_content("Not logged in.\n", "text/plain");
    return httplib::Server::HandlerResponse::Handled;
  });
  Routes();
  port_ = options_.port == 0
              ? server_->bind_to_any_port(options_.host)
              : (server_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("the dashboard cannot listen on ", options_.host, ":", options_.port));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return absl::OkStatus();
}

void Dashboard::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (const auto& weak : streams_) {
      if (std::shared_ptr<EventSink> s = weak.lock()) s->Close(absl::OkStatus());
    }
  }
  server_->stop();
  thread_.join();
}

std::string Dashboard::url() const {
  return absl::StrCat(options_.tls_cert.empty() ? "http" : "https", "://", options_.host, ":",
                      port_, "/");
}

absl::StatusOr<std::unique_ptr<Dashboard>> Dashboard::Open(const std::string& address,
                                                           Options options, const DataDir& data_dir,
                                                           Controller& controller,
                                                           TrialFiles& files, TokenTable& tokens,
                                                           const Metrics& metrics) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &options.port) ||
      options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dashboard ", address, ": give host:port (port 0: any), or none"));
  }
  options.host = address.substr(0, colon);
  absl::StatusOr<std::string> instance = data_dir.ReadOrCreateInstanceId();
  if (!instance.ok()) return instance.status();
  options.instance = *instance;
  int remembered = 0;
  if (options.port == 0) {
    absl::StatusOr<std::string> kept = ReadFile(data_dir.dashboard_port_path());
    if (kept.ok()) (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(*kept), &remembered);
  }
  auto dashboard = std::make_unique<Dashboard>(options, controller, files, tokens, metrics);
  if (remembered > 0) {
    dashboard->options_.port = remembered;
    if (absl::Status s = dashboard->Start(); !s.ok()) {
      if (absl::IsInvalidArgument(s)) return s;
      spdlog::warn("the dashboard's port {} of the last start is taken; it gets another",
                   remembered);
      dashboard = std::make_unique<Dashboard>(options, controller, files, tokens, metrics);
      RETURN_IF_ERROR(dashboard->Start());
    }
  } else {
    RETURN_IF_ERROR(dashboard->Start());
  }
  if (options.port == 0) {
    (void)WriteFileAtomic(data_dir.dashboard_port_path(), absl::StrCat(dashboard->port_, "\n"),
                          0600);
  }
  RETURN_IF_ERROR(WriteFileAtomic(data_dir.dashboard_path(), dashboard->url() + "\n", 0600));
  return dashboard;
}

std::string Dashboard::IssueLogin(const Caller& caller) {
  std::string token = NewToken();
  absl::Time now = Now();
  std::lock_guard lock(mu_);
  // Unused links expire; past kLoginsPerUser of one credential's (or kLogins in all), the oldest
  // stops working.
  constexpr int kLoginsPerUser = 8, kLogins = 256;
  int mine = 0;
  auto oldest = logins_.end(), oldest_mine = logins_.end();
  for (auto it = logins_.begin(); it != logins_.end();) {
    if (it->second.second < now) {
      it = logins_.erase(it);
      continue;
    }
    if (oldest == logins_.end() || it->second.second < oldest->second.second) oldest = it;
    if (it->second.first == caller.token) {
      ++mine;
      if (oldest_mine == logins_.end() || it->second.second < oldest_mine->second.second) {
        oldest_mine = it;
      }
    }
    ++it;
  }
  if (mine >= kLoginsPerUser) {
    logins_.erase(oldest_mine);
  } else if (static_cast<int>(logins_.size()) >= kLogins) {
    logins_.erase(oldest);
  }
  logins_[token] = {caller.token, now + options_.login_ttl};
  return absl::StrCat(url(), "login?token=", token);
}

void Dashboard::Login(const httplib::Request& req, httplib::Response& res) {
  std::string token = req.get_param_value("token");
  std::optional<std::string> credential;
  {
    std::lock_guard lock(mu_);
    auto it = logins_.find(token);
    if (it != logins_.end() && it->second.second >= Now()) credential = it->second.first;
    if (it != logins_.end()) logins_.erase(it);  // one use, good or late
  }
  // The user it was made for must still hold that token (not removed, not rotated since).
  std::optional<Caller> caller = credential ? tokens_.Find(*credential) : std::nullopt;
  if (!caller || !server::Authorize(*caller, Action::kUse).ok()) {
    res.status = 401;
    Send(req, res,
         "This login link is not valid (each works once, for a few minutes). Run `hpo dashboard` "
         "for a new one.\n",
         "text/plain");
    return;
  }
  std::string id = NewToken();
  absl::Time now = Now();
  {
    std::lock_guard lock(mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {  // the idle ones go
      it = now - it->second.last_used > options_.session_idle ? sessions_.erase(it) : std::next(it);
    }
    sessions_[id] = {*credential, NewToken(), now};
  }
  // No Path: the cookie belongs to the directory the dashboard is served from, also under a
  // reverse proxy's prefix.
  res.set_header("Set-Cookie",
                 absl::StrCat(cookie_, "=", id, "; HttpOnly; SameSite=Strict; Max-Age=",
                              absl::ToInt64Seconds(options_.session_idle),
                              options_.tls_cert.empty() ? "" : "; Secure"));
  res.set_redirect("./", 303);
}

void Dashboard::Logout(const httplib::Request& req, httplib::Response& res) {
  std::optional<Visitor> visitor = Authorize(req, res);
  if (!visitor) return;
  if (!TokensEqual(req.get_header_value("X-HPO-CSRF"), visitor->csrf)) {
    Reply(req, res,
          absl::PermissionDeniedError("this request lacks the session's X-HPO-CSRF token"));
    return;
  }
  {
    std::lock_guard lock(mu_);
    sessions_.erase(visitor->session);
  }
  res.set_header("Set-Cookie", absl::StrCat(cookie_, "=; HttpOnly; SameSite=Strict; Max-Age=0",
                                            options_.tls_cert.empty() ? "" : "; Secure"));
  spdlog::info("dashboard: {} logged out", visitor->caller.user);
  Reply(req, res, json{{"logged_out", true}});
}

std::optional<Dashboard::Visitor> Dashboard::Find(const httplib::Request& req, bool bearer_ok) {
  std::string cookie = req.get_header_value("Cookie");
  for (absl::string_view part : absl::StrSplit(cookie, ';', absl::SkipWhitespace())) {
    part = absl::StripLeadingAsciiWhitespace(part);
    if (!absl::ConsumePrefix(&part, cookie_) || !absl::ConsumePrefix(&part, "=")) continue;
    std::string id(part);
    std::string token, csrf;
    {
      std::lock_guard lock(mu_);
      auto it = sessions_.find(id);
      if (it == sessions_.end()) continue;
      if (Now() - it->second.last_used > options_.session_idle) {
        sessions_.erase(it);
        continue;
      }
      it->second.last_used = Now();
      token = it->second.token;
      csrf = it->second.csrf;
    }
    // The session acts as its token, as it stands now: gone with the user or the token.
    if (std::optional<Caller> caller = tokens_.Find(token)) return Visitor{*caller, id, csrf};
    std::lock_guard lock(mu_);
    sessions_.erase(id);
  }
  if (bearer_ok) {
    std::string header = req.get_header_value("Authorization");
    absl::string_view auth = header;
    if (absl::ConsumePrefix(&auth, "Bearer ")) {
      if (std::optional<Caller> c = tokens_.Find(auth)) return Visitor{*c, "", ""};
    }
  }
  return std::nullopt;
}

std::optional<Dashboard::Visitor> Dashboard::Authorize(const httplib::Request& req,
                                                       httplib::Response& res, bool bearer_ok) {
  if (std::optional<Visitor> visitor = Find(req, bearer_ok)) {
    if (bearer_ok || visitor->caller.kind != Caller::Kind::kMetrics) return visitor;
  }
  res.status = 401;
  res.set_header("Cache-Control", "no-store");
  Send(req, res,
       "Not logged in: run `hpo dashboard` on the machine hpod runs on and open the link it "
       "prints.\n",
       "text/plain");
  return std::nullopt;
}

void Dashboard::Routes() {
  httplib::Server& s = *server_;
  s.Get("/login", [this](const httplib::Request& req, httplib::Response& res) { Login(req, res); });
  s.Post("/logout",
         [this](const httplib::Request& req, httplib::Response& res) { Logout(req, res); });
  // The page and its assets.
  for (const Asset& asset : DashboardAssets()) {
    std::optional<std::string> z = Gzip(absl::string_view(asset.data, asset.size));
    auto gzipped = z ? std::make_shared<const std::string>(std::move(*z)) : nullptr;
    s.Get(asset.path, [this, asset, gzipped](const httplib::Request& req, httplib::Response& res) {
      if (!Authorize(req, res)) return;
      Send(req, res, std::string(asset.data, asset.size), asset.type, gzipped);
    });
  }
  // A view: `fn` runs on the controller's thread once the gate allows `action` on the sweep or
  // trial in the path (`on`); it gets the query's parameters, copied.
  enum class On { kNothing, kSweep, kTrial };
  using View = std::function<absl::StatusOr<json>(const Params&, int64_t id, const Allowed&)>;
  auto view = [&](const std::string& pattern, On on, View fn) {
    s.Get(pattern, [this, on, fn](const httplib::Request& req, httplib::Response& res) {
      std::optional<Visitor> visitor = Authorize(req, res);
      if (!visitor) return;
      int64_t id = on == On::kNothing ? 0 : IdOf(req);
      Need need{on == On::kNothing ? Action::kUse : Action::kView};
      (on == On::kTrial ? need.trial_id : need.sweep_id) = id;
      Reply(req, res,
            OnController(controller_,
                         [this, fn, need, id, params = req.params,
                          caller = std::move(visitor->caller)]() -> absl::StatusOr<json> {
                           absl::StatusOr<Allowed> allowed = controller_.Allow(caller, need);
                           if (!allowed.ok()) return allowed.status();
                           return fn(params, id, *allowed);
                         }));
    });
  };
  s.Get("/api/session", [this](const httplib::Request& req, httplib::Response& res) {
    std::optional<Visitor> visitor = Authorize(req, res);
    if (visitor) {
      Reply(req, res, json{{"user", visitor->caller.user}, {"csrf", visitor->csrf}});
    }
  });
  view("/api/sweeps", On::kNothing,
       [this](const Params&, int64_t, const Allowed& allowed) -> absl::StatusOr<json> {
         absl::StatusOr<std::vector<v1::Sweep>> sweeps = controller_.ListSweeps(allowed, false);
         if (!sweeps.ok()) return sweeps.status();
         json out = json::array();
         for (const v1::Sweep& sweep : *sweeps) out.push_back(ProtoJson(sweep));
         return out;
       });
  view("/api/sweeps/(\\d+)", On::kSweep,
       [this](const Params&, int64_t id, const Allowed& allowed) -> absl::StatusOr<json> {
         absl::StatusOr<v1::Sweep> sweep = controller_.GetSweep(allowed, id);
         if (!sweep.ok()) return sweep.status();
         json out = ProtoJson(*sweep);
         // Whether the page offers the actions: an operator's, or the owner's.
         out["can_operate"] = controller_.Authorize(allowed.caller(), {Action::kOperate, id}).ok();
         return out;
       });
  // A view drawn from what the core lets its readers see (DashboardData over CoreReads).
  using DataView =
      std::function<absl::StatusOr<json>(const DashboardData&, const Params&, int64_t id)>;
  auto data = [&](const std::string& pattern, On on, DataView fn) {
    view(pattern, on,
         [this, fn](const Params& p, int64_t id, const Allowed& allowed) -> absl::StatusOr<json> {
           absl::StatusOr<CoreReads> reads = controller_.Read(allowed);
           if (!reads.ok()) return reads.status();
           return fn(DashboardData(*reads), p, id);
         });
  };
  data("/api/sweeps/(\\d+)/trials", On::kSweep,
       [](const DashboardData& d, const Params& p, int64_t id) -> absl::StatusOr<json> {
         absl::StatusOr<TrialQuery> q = QueryOf(p);
         if (!q.ok()) return q.status();
         return d.Trials(id, *q);
       });
  data("/api/sweeps/(\\d+)/curves", On::kSweep,
       [](const DashboardData& d, const Params& p, int64_t id) {
         std::vector<int64_t> ids;
         for (absl::string_view t : absl::StrSplit(Param(p, "trials"), ',', absl::SkipEmpty())) {
           int64_t v = 0;
           if (absl::SimpleAtoi(t, &v)) ids.push_back(v);
         }
         return d.Curves(id, ids, static_cast<int>(IntParam(p, "max", 50)),
                         static_cast<int>(IntParam(p, "points", 200)));
       });
  data("/api/sweeps/(\\d+)/objective", On::kSweep,
       [](const DashboardData& d, const Params& p, int64_t id) {
         return d.Objective(id, static_cast<int>(IntParam(p, "max", 2000)));
       });
  data("/api/sweeps/(\\d+)/parallel", On::kSweep,
       [](const DashboardData& d, const Params& p, int64_t id) {
         return d.Parallel(id, static_cast<int>(IntParam(p, "max", 1000)));
       });
  data("/api/sweeps/(\\d+)/importance", On::kSweep,
       [](const DashboardData& d, const Params&, int64_t id) { return d.Importance(id); });
  data("/api/sweeps/(\\d+)/timeline", On::kSweep,
       [](const DashboardData& d, const Params& p, int64_t id) {
         return d.Timeline(id, static_cast<int>(IntParam(p, "max", 2000)));
       });
  data("/api/trials/(\\d+)", On::kTrial, [](const DashboardData& d, const Params& p, int64_t id) {
    return d.Trial(id, static_cast<int>(IntParam(p, "points", 500)));
  });
  s.Get("/api/trials/(\\d+)/log", [this](const httplib::Request& req, httplib::Response& res) {
    std::optional<Visitor> visitor = Authorize(req, res);
    if (visitor) Log(req, res, visitor->caller);
  });
  s.Get("/api/sweeps/(\\d+)/events", [this](const httplib::Request& req, httplib::Response& res) {
    std::optional<Visitor> visitor = Authorize(req, res);
    if (visitor) Events(req, res, visitor->caller);
  });
  // Actions: the session's CSRF token in X-HPO-CSRF, and the answer after the commit. An extend
  // carries the page's request_id, so that a retry after a lost answer applies it once.
  s.Post("/api/sweeps/(\\d+)/(cancel|pause|resume|extend)", [this](const httplib::Request& req,
                                                                   httplib::Response& res) {
    std::optional<Visitor> visitor = Authorize(req, res);
    if (!visitor) return;
    if (visitor->csrf.empty() || !TokensEqual(req.get_header_value("X-HPO-CSRF"), visitor->csrf)) {
      Reply(req, res,
            absl::PermissionDeniedError(
                "this request lacks the session's X-HPO-CSRF token: refused"));
      return;
    }
    int64_t id = IdOf(req);
    std::string verb = req.matches[2].str();
    json body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      Reply(req, res, absl::InvalidArgumentError("the body must be a JSON object"));
      return;
    }
    Reply(req, res,
          OnController(
              controller_,
              [this, id, verb, body, c = std::move(visitor->caller)]() -> absl::StatusOr<json> {
                absl::StatusOr<Allowed> allowed = controller_.Allow(c, {Action::kOperate, id});
                if (!allowed.ok()) return allowed.status();
                absl::StatusOr<v1::Sweep> sweep;
                if (verb == "cancel") {
                  sweep = controller_.Cancel(*allowed, id);
                } else if (verb == "pause") {
                  sweep = controller_.Pause(*allowed, id);
                } else if (verb == "resume") {
                  sweep = controller_.Resume(*allowed, id);
                } else {
                  v1::ExtendSweepRequest r;
                  r.set_sweep_id(id);
                  r.set_add_trials(body.value("add_trials", int64_t{0}));
                  r.set_max_concurrent(body.value("max_concurrent", int64_t{0}));
                  r.set_wall_time_seconds(body.value("wall_time_seconds", 0.0));
                  r.set_add_gpu_hours(body.value("add_gpu_hours", 0.0));
                  r.set_request_id(body.value("request_id", std::string()));
                  sweep = controller_.Extend(*allowed, r);
                }
                if (!sweep.ok()) return sweep.status();
                spdlog::info("sweep {}: {} from the dashboard by {}", id, verb, c.user);
                json out = ProtoJson(*sweep);
                out["can_operate"] = true;
                return out;
              },
              /*writes=*/true));
  });
  s.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    std::optional<Visitor> visitor = Authorize(req, res, /*bearer_ok=*/true);
    if (!visitor) return;
    absl::StatusOr<json> text = OnController(
        controller_, [this, caller = std::move(visitor->caller)]() -> absl::StatusOr<json> {
          absl::StatusOr<Allowed> allowed = controller_.Allow(caller, {Action::kMetrics});
          if (!allowed.ok()) return allowed.status();
          absl::StatusOr<CoreReads> reads = controller_.Read(*allowed);
          if (!reads.ok()) return reads.status();
          return json(metrics_.TextFor(*reads, allowed->caller()));
        });
    if (!text.ok()) {
      Reply(req, res, text.status());
      return;
    }
    Send(req, res, text->get<std::string>(), "text/plain; version=0.0.4");
  });
}

void Dashboard::Log(const httplib::Request& req, httplib::Response& res, const Caller& caller) {
  int64_t id = IdOf(req);
  absl::StatusOr<json> dir =
      OnController(controller_, [this, id, caller]() -> absl::StatusOr<json> {
        absl::StatusOr<Allowed> allowed = controller_.Allow(caller, {Action::kView, 0, id});
        if (!allowed.ok()) return allowed.status();
        absl::StatusOr<std::string> d = controller_.TrialDir(*allowed, id);
        if (!d.ok()) return d.status();
        return json(*d);
      });
  if (!dir.ok()) {
    Reply(req, res, dir.status());
    return;
  }
  const layout::TrialDir trial_dir(dir->get<std::string>());
  std::string path =
      req.get_param_value("stream") == "stderr" ? trial_dir.stderr_log() : trial_dir.stdout_log();
  int64_t max = std::clamp<int64_t>(IntParam(req.params, "bytes", 16 * 1024), 1, 1 << 20);
  auto promise = std::make_shared<std::promise<absl::StatusOr<TrialFiles::LogTail>>>();
  auto tail = promise->get_future();
  files_.Tail(path, max, [promise](absl::StatusOr<TrialFiles::LogTail> t) {
    promise->set_value(std::move(t));
  });
  if (tail.wait_for(absl::ToChronoNanoseconds(kAnswerWithin)) != std::future_status::ready) {
    Reply(req, res, absl::UnavailableError("the trial's log could not be read within 30 s"));
    return;
  }
  absl::StatusOr<TrialFiles::LogTail> t = tail.get();
  if (!t.ok()) {
    Reply(req, res, t.status());
    return;
  }
  Reply(req, res, json{{"data", t->data}, {"truncated", t->truncated}, {"path", path}});
}

void Dashboard::Events(const httplib::Request& req, httplib::Response& res, const Caller& caller) {
  int64_t id = IdOf(req);
  // since=SEQ replays the events after SEQ first; without it (or since=now), only new ones.
  const int64_t since =
      req.get_param_value("since") == "now" ? -1 : IntParam(req.params, "since", -1);
  absl::StatusOr<Slots::Held> slot = stream_slots_->Take(caller.user);
  if (!slot.ok()) {
    Reply(req, res, slot.status());
    return;
  }
  auto sink = std::make_shared<StreamSink>();
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    streams_.erase(
        std::remove_if(streams_.begin(), streams_.end(), [](const auto& w) { return w.expired(); }),
        streams_.end());
    streams_.push_back(sink);
  }
  absl::StatusOr<json> watched = OnController(controller_, [=, this]() -> absl::StatusOr<json> {
    absl::StatusOr<Allowed> allowed = controller_.Allow(caller, {Action::kView, id});
    if (!allowed.ok()) return allowed.status();
    if (absl::Status w = controller_.Watch(*allowed, id, since, sink); !w.ok()) return w;
    return json();
  });
  if (!watched.ok()) {
    Reply(req, res, watched.status());
    return;
  }
  res.set_header("Cache-Control", "no-store");
  res.set_chunked_content_provider(
      "text/event-stream",
      [sink](size_t, httplib::DataSink& out) {
        std::vector<v1::Event> events;
        if (!sink->Next(events, std::chrono::seconds(15))) {
          out.done();
          return true;
        }
        std::string text = events.empty() ? ": keep-alive\n\n" : "";
        for (const v1::Event& e : events) {
          absl::StrAppend(&text, "id: ", e.seq(), "\ndata: ", ProtoJson(e).dump(), "\n\n");
        }
        return out.write(text.data(), text.size());
      },
      [sink, held = std::make_shared<Slots::Held>(std::move(*slot))](bool) {
        sink->Leave();
        held->reset();
      });
}

}  // namespace hpo::server
