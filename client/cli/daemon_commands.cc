#include "client/cli/daemon_commands.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/cli/cli.h"
#include "common/daemon_lock.h"
#include "common/data_dir.h"
#include "common/files.h"
#include "common/shell_quote.h"

namespace hpo::client::cli {

DaemonCommands::DaemonCommands(CLI::App& app, int& rc) : rc_(rc) {
  CLI::App* daemon = app.add_subcommand("daemon", "start, stop or check hpod");
  daemon->require_subcommand(1);
  CLI::App* start = daemon->add_subcommand(
      "start",
      "start hpod in the background. Any other option of hpod's (`hpod --help`) is passed on: "
      "e.g. --backend slurm, --slurm auto|on|off, --slurm-conf FILE, --sweeps-dir DIR, "
      "--tls-ca FILE, --log-level debug");
  start->allow_extras();
  start_app_ = start;
  start->add_option("--gpus", start_.gpus,
                    "GPUs to hand out (default: what `nvidia-smi -L` lists)");
  start->add_option("--cpus", start_.cpus, "CPU slots to hand out (default: online CPUs)");
  start->add_option("--listen", start_.listen, "TCP address for trials (default 127.0.0.1:0)");
  start
      ->add_option("--tls-cert", start_.tls_cert,
                   "PEM certificate: serve the TCP address over TLS only")
      ->check(CLI::ExistingFile);
  start->add_option("--tls-key", start_.tls_key, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  start
      ->add_option("--as-job", start_.as_job,
                   "run hpod as a Slurm job (sbatch), listening on 0.0.0.0 unless --listen says "
                   "otherwise; its sweeps and trials go on when the job ends and another starts. "
                   "sbatch options as one value: --as-job='--qos=workflow --time=7-0'")
      ->expected(0, 1);
  start
      ->add_option("--wait", start_.wait_s,
                   "with --as-job: seconds to wait for the job to start serving (a job still "
                   "queued then is left queued)")
      ->capture_default_str();
  start->callback([this] { Start(); });
  CLI::App* stop = daemon->add_subcommand(
      "stop",
      "stop hpod (running trials end and are retried at its next start); hpod run as a Slurm "
      "job is signalled through scancel, from any host");
  stop->add_flag("--keep-trials", stop_.keep_trials,
                 "leave running trials running; the next start re-adopts them (for upgrades)");
  stop->callback([this] { Stop(); });
  daemon->add_subcommand("status", "say whether hpod runs (exit 0) or not (exit 1)")
      ->callback([this] { Status(); });
  CLI::App* dashboard = app.add_subcommand(
      "dashboard",
      "print a one-time login link to hpod's web dashboard (it works once, for 5 minutes)");
  dashboard->add_flag("--open", open_, "also open it in a browser (xdg-open, or $BROWSER)");
  dashboard->callback([this] { Dashboard(); });
}

void DaemonCommands::Dashboard() {
  auto c = Connect();
  absl::StatusOr<v1::DashboardLoginResponse> login = c->DashboardLogin();
  if (!login.ok()) {
    rc_ = Fail(login.status());
    return;
  }
  std::printf("%s\n", login->url().c_str());
  std::fprintf(stderr,
               "(the link works once, for %lld s; from another machine: ssh -L "
               "PORT:127.0.0.1:PORT to this one, and open it there; docs/dashboard.md)\n",
               static_cast<long long>(login->valid_seconds()));
  if (!open_) return;
  const char* browser = std::getenv("BROWSER");
  std::string cmd = absl::StrCat(browser != nullptr && *browser ? browser : "xdg-open", " ",
                                 ShellQuote(login->url()), " >/dev/null 2>&1 &");
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "hpo dashboard: could not open a browser; open the link above\n");
  }
}

void DaemonCommands::Start() {
  if (client::Client::Local(false).ok()) {
    std::printf("hpod already runs for %s\n", DataDir::FromEnvironment().root().c_str());
    return;
  }
  std::vector<std::string> args;
  if (start_.gpus >= 0) args.push_back(absl::StrCat("--gpus=", start_.gpus));
  if (start_.cpus > 0) args.push_back(absl::StrCat("--cpus=", start_.cpus));
  if (!start_.listen.empty()) args.push_back("--listen=" + start_.listen);
  if (!start_.tls_cert.empty()) args.push_back("--tls-cert=" + AbsolutePath(start_.tls_cert));
  if (!start_.tls_key.empty()) args.push_back("--tls-key=" + AbsolutePath(start_.tls_key));
  for (const std::string& extra : start_app_->remaining()) args.push_back(extra);
  // hpod as a Slurm job: asked for now, or what the data directory's configuration says it is.
  std::string as_job = start_.as_job;
  bool in_job = start_app_->count("--as-job") > 0;
  if (absl::StatusOr<std::map<std::string, std::string>> kept = client::KeptOptions();
      !in_job && kept.ok() && kept->count("as-job")) {
    in_job = true;
    as_job = kept->at("as-job");
  }
  if (in_job) {
    std::vector<std::string> sbatch =
        absl::StrSplit(as_job, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    absl::StatusOr<client::DaemonJob> job =
        client::StartDaemonAsJob(sbatch, args, absl::Seconds(start_.wait_s));
    if (!job.ok()) {
      rc_ = Fail(job.status());
      return;
    }
    DataDir dir = DataDir::FromEnvironment();
    if (job->running) {
      std::printf("hpod started for %s as Slurm job %s on %s\n", dir.root().c_str(),
                  job->id.c_str(), job->host.c_str());
    } else {
      std::printf(
          "hpod submitted for %s as Slurm job %s (%s); `hpo daemon status` says when it "
          "serves\n",
          dir.root().c_str(), job->id.c_str(), job->state.empty() ? "queued" : job->state.c_str());
    }
    return;
  }
  absl::Status s = client::StartDaemon(absl::Seconds(20), args);
  if (!s.ok()) {
    rc_ = Fail(s);
    return;
  }
  std::printf("hpod started for %s\n", DataDir::FromEnvironment().root().c_str());
}

void DaemonCommands::Stop() {
  absl::Status s = client::StopDaemon(absl::Seconds(30), stop_.keep_trials);
  if (!s.ok()) {
    rc_ = Fail(s);
    return;
  }
  std::printf("hpod stopped\n");
}

void DaemonCommands::Status() {
  DataDir dir = DataDir::FromEnvironment();
  if (!client::Client::Local(false).ok()) {
    std::printf("no hpod runs for %s\n", dir.root().c_str());
    rc_ = kExitError;
    return;
  }
  auto endpoint = ReadFile(dir.endpoint_path());
  std::optional<LockHolder> holder = LiveLockHolder(dir.lock_path());
  std::string where = "?";
  if (holder) {
    where = absl::StrCat("on ", holder->host, ", pid ", holder->pid,
                         holder->job.empty() ? "" : ", Slurm job ", holder->job);
  }
  std::printf("hpod runs for %s (%s, endpoint %s)\n", dir.root().c_str(), where.c_str(),
              endpoint.ok() ? std::string(absl::StripAsciiWhitespace(*endpoint)).c_str() : "?");
}

}  // namespace hpo::client::cli
