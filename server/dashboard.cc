#include "server/dashboard.h"

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
#include "server/dashboard_assets.h"
#include "spdlog/spdlog.h"

namespace hpo::server {
namespace {

using json = nlohmann::json;
constexpr char kCookie[] = "hpod_session";

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
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
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

// Runs `fn` on the controller's thread and waits for it. With `writes`, the answer waits for the
// batch's commit too (what it changed is durable), and a failed commit is the answer.
absl::StatusOr<json> OnController(Controller& controller, std::function<absl::StatusOr<json>()> fn,
                                  bool writes = false) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<json>>>();
  std::future<absl::StatusOr<json>> answer = promise->get_future();
  controller.Post([promise, fn = std::move(fn), writes]() -> Controller::Done {
    absl::StatusOr<json> result = fn();
    if (!writes || !result.ok()) {
      promise->set_value(std::move(result));
      return nullptr;
    }
    return [promise, result = std::move(result)](const absl::Status& commit) {
      promise->set_value(commit.ok() ? result : absl::StatusOr<json>(commit));
    };
  });
  if (answer.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    return absl::UnavailableError("hpod did not answer within 30 s");
  }
  return answer.get();
}

int64_t IdOf(const httplib::Request& req) {
  int64_t id = 0;
  (void)absl::SimpleAtoi(req.matches[1].str(), &id);
  return id;
}

int64_t IntParam(const httplib::Request& req, const char* name, int64_t fallback) {
  int64_t v = fallback;
  if (req.has_param(name)) (void)absl::SimpleAtoi(req.get_param_value(name), &v);
  return v;
}

// "sort=param:lr&desc=1&state=RUNNING,COMPLETED&range=lr:0.001:0.1&offset=0&limit=50"
absl::StatusOr<TrialQuery> QueryOf(const httplib::Request& req) {
  TrialQuery q;
  q.offset = IntParam(req, "offset", 0);
  q.limit = IntParam(req, "limit", 50);
  if (req.has_param("sort")) q.sort = req.get_param_value("sort");
  q.descending = req.get_param_value("desc") == "1";
  if (req.has_param("state")) {
    for (absl::string_view s :
         absl::StrSplit(req.get_param_value("state"), ',', absl::SkipEmpty())) {
      v1::TrialState state;
      if (!v1::TrialState_Parse(absl::StrCat("TRIAL_STATE_", s), &state)) {
        return absl::InvalidArgumentError(absl::StrCat("unknown trial state '", s, "'"));
      }
      q.states.push_back(state);
    }
  }
  for (size_t i = 0; i < req.get_param_value_count("range"); ++i) {
    std::vector<std::string> f = absl::StrSplit(req.get_param_value("range", i), ':');
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

Dashboard::Dashboard(Options options, Controller& controller, TrialFiles& files, TokenTable& tokens)
    : options_(std::move(options)),
      controller_(controller),
      files_(files),
      tokens_(tokens),
      server_(std::make_unique<httplib::Server>()) {}

Dashboard::~Dashboard() { Stop(); }

absl::Status Dashboard::Start() {
  // Enough threads for several open pages, each holding one for its event stream.
  server_->new_task_queue = [] { return new httplib::ThreadPool(32); };
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
  return absl::StrCat("http://", options_.host, ":", port_, "/");
}

absl::StatusOr<std::unique_ptr<Dashboard>> Dashboard::Open(const std::string& address,
                                                           const DataDir& data_dir,
                                                           Controller& controller,
                                                           TrialFiles& files, TokenTable& tokens) {
  Options options;
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &options.port) ||
      options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dashboard ", address, ": give host:port (port 0: any), or none"));
  }
  options.host = address.substr(0, colon);
  int remembered = 0;
  if (options.port == 0) {
    absl::StatusOr<std::string> kept = ReadFile(data_dir.dashboard_port_path());
    if (kept.ok()) (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(*kept), &remembered);
  }
  auto dashboard = std::make_unique<Dashboard>(options, controller, files, tokens);
  if (remembered > 0) {
    dashboard->options_.port = remembered;
    if (!dashboard->Start().ok()) {
      spdlog::warn("the dashboard's port {} of the last start is taken; it gets another",
                   remembered);
      dashboard = std::make_unique<Dashboard>(options, controller, files, tokens);
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
  absl::Time now = absl::Now();
  std::lock_guard lock(mu_);
  for (auto it = logins_.begin(); it != logins_.end();) {
    it = it->second.second < now ? logins_.erase(it) : std::next(it);
  }
  logins_[token] = {caller, now + options_.login_ttl};
  return absl::StrCat(url(), "login?token=", token);
}

void Dashboard::Login(const httplib::Request& req, httplib::Response& res) {
  std::string token = req.get_param_value("token");
  std::optional<Caller> caller;
  {
    std::lock_guard lock(mu_);
    auto it = logins_.find(token);
    if (it != logins_.end() && it->second.second >= absl::Now()) caller = it->second.first;
    if (it != logins_.end()) logins_.erase(it);  // one use, good or late
  }
  if (!caller) {
    res.status = 401;
    Send(req, res,
         "This login link is not valid (each works once, for a few minutes). Run `hpo dashboard` "
         "for a new one.\n",
         "text/plain");
    return;
  }
  std::string id = NewToken();
  {
    std::lock_guard lock(mu_);
    sessions_[id] = {*caller, NewToken(), absl::Now()};
  }
  // No Path: the cookie belongs to the directory the dashboard is served from, also under a
  // reverse proxy's prefix.
  res.set_header("Set-Cookie",
                 absl::StrCat(kCookie, "=", id, "; HttpOnly; SameSite=Strict; Max-Age=",
                              absl::ToInt64Seconds(options_.session_idle)));
  res.set_redirect("./", 303);
}

std::optional<Dashboard::Session> Dashboard::Authorize(const httplib::Request& req,
                                                       httplib::Response& res, bool bearer_ok) {
  std::string cookie = req.get_header_value("Cookie");
  for (absl::string_view part : absl::StrSplit(cookie, ';', absl::SkipWhitespace())) {
    part = absl::StripLeadingAsciiWhitespace(part);
    if (!absl::ConsumePrefix(&part, kCookie) || !absl::ConsumePrefix(&part, "=")) continue;
    std::lock_guard lock(mu_);
    auto it = sessions_.find(std::string(part));
    if (it == sessions_.end()) continue;
    if (absl::Now() - it->second.last_used > options_.session_idle) {
      sessions_.erase(it);
      continue;
    }
    it->second.last_used = absl::Now();
    return it->second;
  }
  if (bearer_ok) {
    std::string header = req.get_header_value("Authorization");
    absl::string_view auth = header;
    if (absl::ConsumePrefix(&auth, "Bearer ")) {
      if (std::optional<Caller> c = tokens_.Find(auth)) return Session{*c, "", absl::Now()};
    }
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
  // The page and its assets.
  for (const Asset& asset : DashboardAssets()) {
    std::optional<std::string> z = Gzip(absl::string_view(asset.data, asset.size));
    auto gzipped = z ? std::make_shared<const std::string>(std::move(*z)) : nullptr;
    s.Get(asset.path, [this, asset, gzipped](const httplib::Request& req, httplib::Response& res) {
      if (!Authorize(req, res)) return;
      Send(req, res, std::string(asset.data, asset.size), asset.type, gzipped);
    });
  }
  auto get = [&](const std::string& pattern,
                 std::function<absl::StatusOr<json>(const httplib::Request&, const Caller&)> fn) {
    s.Get(pattern, [this, fn](const httplib::Request& req, httplib::Response& res) {
      std::optional<Session> session = Authorize(req, res);
      if (session) Reply(req, res, fn(req, session->caller));
    });
  };
  s.Get("/api/session", [this](const httplib::Request& req, httplib::Response& res) {
    std::optional<Session> session = Authorize(req, res);
    if (session) {
      Reply(req, res, json{{"user", session->caller.user}, {"csrf", session->csrf}});
    }
  });
  get("/api/sweeps", [this](const httplib::Request&, const Caller& c) {
    return OnController(controller_, [this, c]() -> absl::StatusOr<json> {
      json out = json::array();
      for (const v1::Sweep& sweep : controller_.ListSweeps(false, &c))
        out.push_back(ProtoJson(sweep));
      return out;
    });
  });
  // A sweep's views, each after the caller's access to it is checked.
  auto sweep_get = [&](const std::string& what,
                       std::function<absl::StatusOr<json>(const httplib::Request&, int64_t)> fn) {
    get(absl::StrCat("/api/sweeps/(\\d+)", what),
        [this, fn](const httplib::Request& req, const Caller& c) {
          int64_t id = IdOf(req);
          return OnController(controller_, [this, fn, &req, id, c]() -> absl::StatusOr<json> {
            if (absl::Status a = controller_.CheckSweepAccess(id, c); !a.ok()) return a;
            return fn(req, id);
          });
        });
  };
  sweep_get("", [this](const httplib::Request&, int64_t id) -> absl::StatusOr<json> {
    absl::StatusOr<v1::Sweep> sweep = controller_.GetSweep(id);
    if (!sweep.ok()) return sweep.status();
    return ProtoJson(*sweep);
  });
  sweep_get("/trials", [this](const httplib::Request& req, int64_t id) -> absl::StatusOr<json> {
    absl::StatusOr<TrialQuery> q = QueryOf(req);
    if (!q.ok()) return q.status();
    return controller_.Dashboard().Trials(id, *q);
  });
  sweep_get("/curves", [this](const httplib::Request& req, int64_t id) {
    std::vector<int64_t> ids;
    for (absl::string_view t :
         absl::StrSplit(req.get_param_value("trials"), ',', absl::SkipEmpty())) {
      int64_t v = 0;
      if (absl::SimpleAtoi(t, &v)) ids.push_back(v);
    }
    return controller_.Dashboard().Curves(id, ids, static_cast<int>(IntParam(req, "max", 50)),
                                          static_cast<int>(IntParam(req, "points", 200)));
  });
  sweep_get("/objective", [this](const httplib::Request& req, int64_t id) {
    return controller_.Dashboard().Objective(id, static_cast<int>(IntParam(req, "max", 2000)));
  });
  sweep_get("/parallel", [this](const httplib::Request& req, int64_t id) {
    return controller_.Dashboard().Parallel(id, static_cast<int>(IntParam(req, "max", 1000)));
  });
  sweep_get("/importance", [this](const httplib::Request&, int64_t id) {
    return controller_.Dashboard().Importance(id);
  });
  sweep_get("/timeline", [this](const httplib::Request& req, int64_t id) {
    return controller_.Dashboard().Timeline(id, static_cast<int>(IntParam(req, "max", 2000)));
  });
  get("/api/trials/(\\d+)", [this](const httplib::Request& req, const Caller& c) {
    int64_t id = IdOf(req);
    int points = static_cast<int>(IntParam(req, "points", 500));
    return OnController(controller_, [this, id, c, points]() -> absl::StatusOr<json> {
      if (absl::Status a = controller_.CheckTrialAccess(id, c); !a.ok()) return a;
      return controller_.Dashboard().Trial(id, points);
    });
  });
  s.Get("/api/trials/(\\d+)/log", [this](const httplib::Request& req, httplib::Response& res) {
    std::optional<Session> session = Authorize(req, res);
    if (session) Log(req, res, session->caller);
  });
  s.Get("/api/sweeps/(\\d+)/events", [this](const httplib::Request& req, httplib::Response& res) {
    std::optional<Session> session = Authorize(req, res);
    if (session) Events(req, res, session->caller);
  });
  // Actions: the session's CSRF token in X-HPO-CSRF, and the answer after the commit.
  s.Post("/api/sweeps/(\\d+)/(cancel|pause|resume|extend)", [this](const httplib::Request& req,
                                                                   httplib::Response& res) {
    std::optional<Session> session = Authorize(req, res);
    if (!session) return;
    if (session->csrf.empty() || !TokensEqual(req.get_header_value("X-HPO-CSRF"), session->csrf)) {
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
    Caller c = session->caller;
    Reply(req, res,
          OnController(
              controller_,
              [this, id, verb, body, c]() -> absl::StatusOr<json> {
                if (absl::Status a = controller_.CheckSweepAccess(id, c); !a.ok()) return a;
                absl::StatusOr<v1::Sweep> sweep;
                if (verb == "cancel") {
                  sweep = controller_.Cancel(id);
                } else if (verb == "pause") {
                  sweep = controller_.Pause(id);
                } else if (verb == "resume") {
                  sweep = controller_.Resume(id);
                } else {
                  v1::ExtendSweepRequest r;
                  r.set_sweep_id(id);
                  r.set_add_trials(body.value("add_trials", int64_t{0}));
                  r.set_max_concurrent(body.value("max_concurrent", int64_t{0}));
                  r.set_wall_time_seconds(body.value("wall_time_seconds", 0.0));
                  r.set_add_gpu_hours(body.value("add_gpu_hours", 0.0));
                  sweep = controller_.Extend(r);
                }
                if (!sweep.ok()) return sweep.status();
                spdlog::info("sweep {}: {} from the dashboard by {}", id, verb, c.user);
                return ProtoJson(*sweep);
              },
              /*writes=*/true));
  });
  s.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorize(req, res, /*bearer_ok=*/true)) return;
    auto promise = std::make_shared<std::promise<std::string>>();
    std::future<std::string> text = promise->get_future();
    controller_.Post([this, promise]() -> Controller::Done {
      promise->set_value(controller_.MetricsText());
      return nullptr;
    });
    if (text.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      res.status = 503;
      return;
    }
    Send(req, res, text.get(), "text/plain; version=0.0.4");
  });
}

void Dashboard::Log(const httplib::Request& req, httplib::Response& res, const Caller& caller) {
  int64_t id = IdOf(req);
  absl::StatusOr<json> dir =
      OnController(controller_, [this, id, caller]() -> absl::StatusOr<json> {
        if (absl::Status a = controller_.CheckTrialAccess(id, caller); !a.ok()) return a;
        absl::StatusOr<std::string> d = controller_.TrialDir(id);
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
  int64_t max = std::clamp<int64_t>(IntParam(req, "bytes", 16 * 1024), 1, 1 << 20);
  auto promise = std::make_shared<std::promise<absl::StatusOr<TrialFiles::LogTail>>>();
  auto tail = promise->get_future();
  files_.Tail(path, max, [promise](absl::StatusOr<TrialFiles::LogTail> t) {
    promise->set_value(std::move(t));
  });
  if (tail.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
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
  const int64_t since = req.get_param_value("since") == "now" ? -1 : IntParam(req, "since", -1);
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
    if (absl::Status a = controller_.CheckSweepAccess(id, caller); !a.ok()) return a;
    if (absl::Status w = controller_.Watch(id, since, sink); !w.ok()) return w;
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
      [sink](bool) { sink->Leave(); });
}

}  // namespace hpo::server
