#include "client/cli/trial_side_commands.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli/cli.h"
#include "client/client.h"
#include "client/trial_reporter.h"
#include "common/files.h"
#include "common/fom_regex.h"
#include "common/pattern.h"
#include "common/report_journal.h"

namespace hpo::client::cli {

TrialSideCommands::TrialSideCommands(CLI::App& app, int& rc) : rc_(rc) {
  CLI::App* report =
      app.add_subcommand("report", "inside a trial: push metrics (exit 10 when hpod says stop)");
  report->add_option("--step", report_.step,
                     "step (epoch) of the report; default: the trial's last step + 1");
  report->add_option("metrics", report_.metrics, "name=value pairs");
  // The trial's sender, which `hpo report` starts itself (not for users).
  report->add_flag("--deliver", report_.deliver)->group("");
  report->add_option("--line", report_.lines)->group("");
  report->add_option("--trial-group", report_.trial_group)->group("");
  report->callback([this] {
    if (report_.deliver) {
      rc_ = DeliverReports(report_.lines, static_cast<pid_t>(report_.trial_group));
    } else if (report_.metrics.empty()) {
      std::fprintf(stderr, "hpo report: no metrics (name=value pairs) given\n");
      rc_ = kExitUsage;
    } else {
      rc_ = Report(report_.step, report_.metrics);
    }
  });
  CLI::App* exec = app.add_subcommand(
      "exec", "inside a trial: run CMD, report every figure-of-merit line of its stdout");
  exec->add_option("--metric", exec_.metric,
                   "metric name for the values (default: the sweep's objective metric)");
  exec->add_option("--regex", exec_.regex,
                   "regex whose group 1 is the value (default: the sweep's fom_regex, 'FoM: "
                   "<number>')");
  exec->add_option("command", exec_.command, "the command and its arguments, after --")->required();
  exec->callback([this] { rc_ = Exec(exec_.command, exec_.metric, exec_.regex); });
}

// --- exec --------------------------------------------------------------------------------------

namespace {

pid_t g_child = 0;
void Forward(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}

}  // namespace

// Delivers what `hpo exec` records on a thread of its own, so that the command's output never
// waits for hpod: while hpod is away, reports wait in the trial's journal, the command goes on,
// and they go when hpod answers (or hpod reads them when the trial ends).
class ExecSender {
 public:
  ExecSender(client::TrialReporter& reporter, pid_t child)
      : reporter_(reporter), child_(child), thread_([this] { Loop(); }) {}
  ~ExecSender() { Finish(); }

  void Record(int64_t step, const std::string& metric, double value) {
    if (absl::Status s = reporter_.Record(step, {{metric, value}}); !s.ok()) {
      std::fprintf(stderr, "hpo exec: report not recorded: %s\n", std::string(s.message()).c_str());
      return;
    }
    {
      std::lock_guard lock(mu_);
      news_ = true;
    }
    cv_.notify_one();
  }
  // The command's output ended: one last delivery, then the thread ends.
  void Finish() {
    {
      std::lock_guard lock(mu_);
      if (done_) return;
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    while (true) {
      absl::Time retry = reporter_.retry_after();
      auto woken = [this] { return news_ || done_; };
      if (retry == absl::InfinitePast()) {
        cv_.wait(lock, woken);
      } else {
        cv_.wait_until(lock, absl::ToChronoTime(retry), woken);
      }
      bool last = done_;
      news_ = false;
      lock.unlock();
      Deliver(last);
      lock.lock();
      if (last) return;
    }
  }
  void Deliver(bool last) {
    absl::StatusOr<client::TrialReporter::Delivery> d =
        reporter_.Deliver(client::ReportTimeout(), /*now=*/last);
    if (!d.ok()) {
      std::fprintf(stderr, "hpo exec: report refused: %s\n",
                   std::string(d.status().message()).c_str());
      return;
    }
    if (!d->missed.ok() && !away_) {
      away_ = true;
      std::fprintf(stderr, "hpo exec: hpod does not answer (%s); reports wait in %s\n",
                   std::string(d->missed.message()).c_str(),
                   reporter_.journaled() ? reporter_.journal_path().c_str() : "memory");
    } else if (d->missed.ok() && d->delivered > 0 && away_) {
      away_ = false;
      std::fprintf(stderr, "hpo exec: hpod answers again; the reports that waited are delivered\n");
    }
    if (d->stop && !stop_sent_) {
      std::fprintf(stderr, "hpo exec: hpod stops the trial (%s)\n", d->reason.c_str());
      ::kill(child_, SIGTERM);
      stop_sent_ = true;
    }
  }

  client::TrialReporter& reporter_;
  pid_t child_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool news_ = false;
  bool done_ = false;
  bool away_ = false;       // sender thread only
  bool stop_sent_ = false;  // sender thread only
  std::thread thread_;
};

int Exec(std::vector<std::string> cmd, std::string metric, std::string regex_text) {
  if (cmd.empty()) {
    std::fprintf(stderr, "hpo exec: give the command after --\n");
    return kExitUsage;
  }
  if (metric.empty())
    metric = std::getenv("HPO_OBJECTIVE_METRIC") ? std::getenv("HPO_OBJECTIVE_METRIC") : "fom";
  if (regex_text.empty()) {
    regex_text = std::getenv("HPO_FOM_REGEX") ? std::getenv("HPO_FOM_REGEX") : kDefaultFomRegex;
  }
  absl::StatusOr<std::shared_ptr<const re2::RE2>> re =
      CompilePattern(regex_text, /*ignore_case=*/true);
  if (!re.ok() || Groups(**re) < 1) {
    std::fprintf(stderr, "hpo exec: bad regex '%s': %s\n", regex_text.c_str(),
                 re.ok() ? "no capture group ( ) around the number"
                         : std::string(re.status().message()).c_str());
    return kExitUsage;
  }
  auto reporter = client::TrialReporter::FromEnvironment();
  if (!reporter.ok()) {
    std::fprintf(stderr, "hpo exec: %s; running without reporting\n",
                 std::string(reporter.status().message()).c_str());
  }
  int fds[2];
  if (::pipe(fds) != 0) return kExitError;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> argv;
    for (auto& a : cmd) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "hpo exec: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(fds[1]);
  g_child = pid;
  struct sigaction sa {};
  sa.sa_handler = Forward;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGUSR1, &sa, nullptr);
  std::optional<ExecSender> sender;
  if (reporter.ok()) sender.emplace(**reporter, pid);
  FILE* in = ::fdopen(fds[0], "r");
  char* line = nullptr;
  size_t cap = 0;
  ssize_t n;
  int64_t step = 0;
  while ((n = ::getline(&line, &cap, in)) > 0) {
    std::fwrite(line, 1, static_cast<size_t>(n), stdout);
    std::fflush(stdout);
    std::string found;
    // The line without its newline, so that a pattern may end with $.
    size_t len = static_cast<size_t>(n) - (line[n - 1] == '\n' ? 1 : 0);
    if (!sender || !FoundGroup(**re, std::string(line, len), &found)) continue;
    double value = 0;
    if (!absl::SimpleAtod(found, &value)) continue;
    sender->Record(++step, metric, value);
  }
  std::free(line);
  if (sender) sender->Finish();
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitError;
}

// --- report ------------------------------------------------------------------------------------
//
// A report waits for the trial's journal, and for hpod's answer while nothing else waits and hpod
// answered last time: until 70 ms after the process started (kReportCallLimit), or
// HPO_REPORT_WAIT when set; the trial's sender delivers the rest. The
// sender is `hpo report --deliver`, a process of its own that `hpo report` starts when none runs
// (it holds reports.sender locked while it does): it sends the journal's backlog to hpod in
// batches, waits as TrialReporter says while hpod does not answer, and ends as soon as nothing
// waits or its trial has ended (the trial's process group is gone; it runs in a group of its
// own). hpod's answer that
// the trial should stop goes into reports.stop, and the trial's next `hpo report` exits 10 with it.
// A report the journal cannot take (a full disk) is kept in memory, with a warning: hpod's answer
// is waited for, and what hpod did not take goes to a sender of its own; the trial goes on.

namespace {

constexpr char kSenderLock[] = "reports.sender";
constexpr char kStopFile[] = "reports.stop";
constexpr char kSenderLog[] = "reports.sender.log";
// A sender that has not reached hpod for this long ends; the next report starts another, and
// hpod reads the journal when the trial ends.
constexpr absl::Duration kGiveUp = absl::Minutes(10);

std::string TrialFile(const char* name) {
  const char* dir = std::getenv("HPO_TRIAL_DIR");
  return dir == nullptr || *dir == '\0' ? "" : absl::StrCat(dir, "/", name);
}

// Starts `hpo report --deliver` with `lines` (reports no journal keeps), in the background, in a
// process group of its own: it is no part of the trial that Slurm (proctrack/pgid), hpo-shim or
// hpod's stop would wait for or signal, and it watches the trial's group (this process's) to end
// with it.
void StartSender(const std::vector<std::string>& lines) {
  std::vector<std::string> args = {"hpo", "report", "--deliver", "--trial-group",
                                   std::to_string(::getpgrp())};
  for (const std::string& l : lines) args.insert(args.end(), {"--line", l});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // What the sender says goes to a file of its own in the trial's directory, not to the trial's
  // stderr: a process that holds a Slurm step's output open keeps the step (and its GPUs) from
  // ending until it exits, and a sender may outlive its trial by a moment. A file that cannot be
  // made (a full disk) leaves it unsaid.
  std::string log = TrialFile(kSenderLog);
  int err = log.empty() ? -1 : ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  if (err >= 0) {
    posix_spawn_file_actions_adddup2(&actions, err, STDERR_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, "/proc/self/exe", &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (err >= 0) ::close(err);
  if (rc != 0) {
    std::fprintf(stderr,
                 "hpo report: cannot start its sender (%s); the report waits in the journal\n",
                 std::strerror(rc));
  }
}

// Whether a sender holds the trial's lock; with `take`, takes it (the fd in *fd) when none does.
bool SenderRuns(const std::string& lock_path, bool take, int* fd) {
  // 0644 as the journal: the trial's umask (hpod's --share-group) decides.
  int f = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (f < 0) return false;
  if (::flock(f, LOCK_EX | LOCK_NB) != 0) {
    ::close(f);
    return true;
  }
  if (take) {
    *fd = f;
  } else {
    ::close(f);
  }
  return false;
}

// How long ago this process started (its start time in /proc/self/stat against the boot clock);
// zero when that cannot be read.
absl::Duration ProcessAge() {
  absl::StatusOr<std::string> stat = ReadFile("/proc/self/stat");
  if (!stat.ok()) return absl::ZeroDuration();
  // Field 22, counted after the command name's closing parenthesis (the name may hold spaces).
  size_t close = stat->rfind(')');
  if (close == std::string::npos) return absl::ZeroDuration();
  std::vector<std::string> fields = absl::StrSplit(stat->substr(close + 1), ' ', absl::SkipEmpty());
  int64_t ticks = 0;
  long hz = ::sysconf(_SC_CLK_TCK);
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &ticks) || hz <= 0) {
    return absl::ZeroDuration();
  }
  struct timespec boot {};
  if (::clock_gettime(CLOCK_BOOTTIME, &boot) != 0) return absl::ZeroDuration();
  absl::Duration age = absl::DurationFromTimespec(boot) - absl::Seconds(ticks) / hz;
  return std::max(age, absl::ZeroDuration());
}

// hpod said the trial should stop: the reason, for the next report.
std::optional<std::string> StopSaid(const std::string& path) {
  if (path.empty()) return std::nullopt;
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return std::nullopt;
  return std::string(absl::StripAsciiWhitespace(*text));
}

// One report, recorded and handed on; the exit status of `hpo report`.
int ReportWith(client::TrialReporter& r, int64_t step,
               const std::map<std::string, double>& metrics) {
  if (!r.journaled()) {
    // Without a trial directory (a trial something else runs) nothing keeps a report but this
    // process: it waits for hpod's answer, a minute at most.
    absl::StatusOr<client::TrialReporter::Delivery> d =
        r.Report(step, metrics, client::ReportTimeout());
    absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (d.ok() && d->in_memory > 0 && absl::Now() < give_up) {
      absl::SleepFor(std::min(r.retry_after() - absl::Now(), give_up - absl::Now()));
      d = r.Deliver(client::ReportTimeout(), /*now=*/true);
    }
    if (!d.ok()) return Fail(d.status());
    if (d->in_memory > 0) return Fail(d->missed);
    if (d->stop) {
      std::printf("stop: %s\n", d->reason.c_str());
      return kExitStop;
    }
    return 0;
  }
  if (absl::Status s = r.Record(step, metrics); !s.ok()) return Fail(s);
  std::vector<std::string> in_memory = r.InMemoryLines();
  if (!in_memory.empty()) {
    std::fprintf(stderr,
                 "hpo report: the journal %s cannot be written (a full or read-only disk?); the "
                 "report goes to hpod from memory\n",
                 r.journal_path().c_str());
    // Nothing on disk keeps it, and a sender may not outlive the trial: hpod's answer is waited
    // for, and only what hpod did not take goes to a sender of its own.
    absl::StatusOr<client::TrialReporter::Delivery> d =
        r.Deliver(client::ReportTimeout(), /*now=*/true);
    if (!d.ok()) return Fail(d.status());
    if (d->stop) {
      std::printf("stop: %s\n", d->reason.c_str());
      return kExitStop;
    }
    if (std::vector<std::string> left = r.InMemoryLines(); !left.empty()) {
      std::fprintf(stderr, "hpo report: hpod did not take it (%s); a sender keeps trying\n",
                   std::string(d->missed.message()).c_str());
      StartSender(left);
    }
  } else if (int fd = -1; !SenderRuns(TrialFile(kSenderLock), /*take=*/false, &fd)) {
    // No backlog and hpod answering: its answer, a stop above all, is worth a short wait.
    if (absl::Duration wait = client::ReportWait(ProcessAge());
        r.retry_after() == absl::InfinitePast() && wait > absl::ZeroDuration()) {
      absl::StatusOr<client::TrialReporter::Delivery> d = r.Deliver(wait);
      if (!d.ok()) return Fail(d.status());  // refused for good: a bad metric, a trial that ended
      if (d->stop) {
        std::printf("stop: %s\n", d->reason.c_str());
        return kExitStop;
      }
      // A slow answer is the sender's to wait for; anything else (no hpod there, a server that
      // cannot prove it is hpod) is said once: the next report sees the backoff and goes quietly.
      if (!d->missed.ok() && !absl::IsDeadlineExceeded(d->missed)) {
        std::fprintf(stderr, "hpo report: %s; %d report(s) wait in %s for the trial's sender\n",
                     std::string(d->missed.message()).c_str(), d->pending,
                     r.journal_path().c_str());
      }
      if (d->pending > 0) StartSender({});
    } else {
      StartSender({});
    }
  }
  if (std::optional<std::string> stop = StopSaid(TrialFile(kStopFile))) {
    std::printf("stop: %s\n", stop->c_str());
    return kExitStop;
  }
  return 0;
}

}  // namespace

int Report(int64_t step, const std::vector<std::string>& pairs) {
  std::map<std::string, double> metrics;
  for (const std::string& p : pairs) {
    std::vector<std::string> kv = absl::StrSplit(p, absl::MaxSplits('=', 1));
    double v = 0;
    if (kv.size() != 2 || kv[0].empty() || !absl::SimpleAtod(kv[1], &v)) {
      std::fprintf(stderr, "hpo report: '%s' is not name=number\n", p.c_str());
      return kExitUsage;
    }
    metrics[kv[0]] = v;
  }
  auto reporter = client::TrialReporter::FromEnvironment();
  if (!reporter.ok()) return Fail(reporter.status());
  int rc = ReportWith(**reporter, step, metrics);
  // The process ends here, without tearing down its gRPC channel: an orderly shutdown waits for a
  // connection still being made to a host that does not answer, and a trainer waits for this.
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(rc);
}

namespace {

// Reports no journal keeps exist nowhere else: their sender tries this much longer once its
// trial has ended (as the Python client's thread does at exit), then gives them up.
constexpr absl::Duration kAfterTrial = absl::Seconds(10);

// Whether the sender should go on: its trial's process group (a Slurm task's, or hpo-shim's for
// a trial hpod starts) still has a process, or, for reports no journal keeps (`lines`), the trial
// ended less than kAfterTrial ago (`ended` keeps when it was first seen gone). What a journal
// sender did not send waits in the journal, which hpod reads as it ends the trial.
bool TrialRuns(pid_t group, const std::vector<std::string>& lines,
               std::optional<absl::Time>& ended) {
  if (group <= 0 || ::kill(-group, 0) == 0 || errno == EPERM) return true;
  if (lines.empty()) return false;
  if (!ended) ended = absl::Now();
  return absl::Now() - *ended < kAfterTrial;
}

}  // namespace

int DeliverReports(const std::vector<std::string>& lines, pid_t trial_group) {
  auto reporter = client::TrialReporter::FromEnvironment();
  if (!reporter.ok()) return Fail(reporter.status());
  client::TrialReporter& r = **reporter;
  const std::string lock_path = TrialFile(kSenderLock);
  int lock_fd = -1;
  if (lines.empty() && SenderRuns(lock_path, /*take=*/true, &lock_fd)) return 0;  // one at a time
  for (const std::string& line : lines) {
    std::vector<JournalEntry> parsed = ParseJournal(line + "\n", 0);
    for (JournalEntry& e : parsed) r.Keep(std::move(e));
  }
  absl::Time reached = absl::Now();
  std::optional<absl::Time> ended;  // when the trial was first seen gone
  std::string said;
  while (true) {
    if (lines.empty()) r.Refresh();
    absl::StatusOr<client::TrialReporter::Delivery> d = r.Deliver(client::ReportTimeout());
    if (!d.ok()) {  // refused for good (a trial that ended, a bad metric): said, and dropped
      std::fprintf(stderr, "hpo report: hpod refused a report: %s\n",
                   std::string(d.status().message()).c_str());
      continue;
    }
    if (d->delivered > 0) reached = absl::Now();
    // What keeps hpod from hearing is said when it changes, and that it hears again once.
    if (!d->missed.ok() && d->missed.message() != said) {
      said = std::string(d->missed.message());
      std::fprintf(stderr, "hpo report: %s; %d report(s) wait in %s\n", said.c_str(), d->pending,
                   r.journal_path().c_str());
    } else if (d->missed.ok() && d->delivered > 0 && !said.empty()) {
      said.clear();
      std::fprintf(stderr, "hpo report: hpod answers again; the reports that waited are sent\n");
    }
    if (d->stop) (void)WriteFileAtomic(TrialFile(kStopFile), d->reason + "\n");
    absl::Time now = absl::Now();
    if (d->pending == 0) {
      // Nothing waits: it ends at once (a process left in a Slurm step when its trial ends holds
      // the step, and its GPUs, until Slurm kills it), unless a report came in while it let go
      // of the lock and no other sender took it.
      if (!lines.empty()) return 0;
      ::flock(lock_fd, LOCK_UN);
      r.Refresh();
      if (r.pending() == 0 || ::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) return 0;
      continue;
    }
    if (!TrialRuns(trial_group, lines, ended)) {
      if (lines.empty()) {
        std::fprintf(stderr,
                     "hpo report: the trial ended; %d report(s) wait in %s (hpod reads them as "
                     "it ends the trial)\n",
                     d->pending, r.journal_path().c_str());
      } else {
        std::fprintf(stderr,
                     "hpo report: the trial ended %s ago and hpod did not take %d report(s) "
                     "that no journal kept; they are given up\n",
                     absl::FormatDuration(kAfterTrial).c_str(), d->pending);
      }
      return 0;
    }
    if (now - reached >= kGiveUp) {
      std::fprintf(stderr,
                   "hpo report: hpod not reached for %s; %d report(s) wait in %s (hpod reads "
                   "them when the trial ends)\n",
                   absl::FormatDuration(kGiveUp).c_str(), d->pending, r.journal_path().c_str());
      return 0;
    }
    // Waits for the next try, looking now and then whether the trial still runs.
    absl::Time next =
        now + std::clamp(r.retry_after() - now, absl::Milliseconds(50), absl::Seconds(30));
    while (absl::Now() < next && TrialRuns(trial_group, lines, ended)) {
      absl::SleepFor(std::min(next - absl::Now(), absl::Milliseconds(250)));
    }
  }
}

}  // namespace hpo::client::cli
