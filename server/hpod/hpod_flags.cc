#include "server/hpod/hpod_flags.h"

#include <cstdio>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "common/address.h"
#include "common/duration.h"
#include "common/version.h"

namespace hpo::server {

namespace {

// A usage error unless every non-loopback address is served over TLS or the user said
// --insecure-listen; "" when the flags are fine.
std::string ClearTextError(const HpodFlags& f) {
  if (!f.tls_cert.empty() || f.insecure_listen) return "";
  for (const auto& [flag, address] :
       {std::pair<const char*, std::string>{"--listen", f.listen}, {"--dashboard", f.dashboard}}) {
    if (address == "none" || IsLoopback(address)) continue;
    return std::string("hpod: ") + flag + " " + address +
           " is not a loopback address, and without TLS every token and trial report would "
           "cross the network in the clear. Give hpod a certificate: --tls-cert cert.pem "
           "--tls-key key.pem (it serves both the TCP address and the dashboard with it; a "
           "self-signed one: openssl req -x509 -newkey rsa:3072 -nodes -days 365 -subj "
           "/CN=$(hostname -f) -addext \"subjectAltName=DNS:$(hostname -f)\" -keyout key.pem "
           "-out cert.pem; docs/operations.md), or say --insecure-listen on a network you "
           "trust\n";
  }
  return "";
}

}  // namespace

int ParseHpodFlags(int argc, char** argv, HpodFlags& f) {
  CLI::App app{
      "hpod: the hyperparameter optimization daemon. It runs sweeps' trials as local processes "
      "(the local backend) and, where Slurm is configured, on the Slurm cluster: each sweep says "
      "where (`backend:`; a sweep with a slurm: section runs on Slurm). It stores everything in "
      "DATA_DIR/hpod.db and serves hpo and the Python client."};
  app.set_version_flag("--version", std::string("hpod ") + kVersion);
  app.add_option("--data-dir", f.data_dir, "data directory (default $HPO_DATA_DIR or ~/.hpo)");
  app.add_option("--sweeps-dir", f.sweeps_dir,
                 "where sweep and trial directories (logs, checkpoints) go; default "
                 "DATA_DIR/sweeps. On a cluster: a file system the compute nodes see, with the "
                 "database kept local");
  app.add_option("--listen", f.listen,
                 "TCP address for trials and remote clients (host:port; port 0 picks one; "
                 "'none' for the Unix socket only)")
      ->capture_default_str();
  app.add_option("--advertise", f.advertise,
                 "the host name trials, agents and remote clients reach --listen by (written to "
                 "DATA_DIR/endpoint); default: --listen's host, or this host's name when that is "
                 "0.0.0.0 or [::]");
  app.add_option("--dashboard", f.dashboard,
                 "HTTP address of the web dashboard and /metrics (host:port; port 0 picks one, "
                 "kept for the next start; 'none' for no dashboard). Keep it on loopback: reach it "
                 "through `ssh -L` or a reverse proxy (docs/dashboard.md)")
      ->capture_default_str();
  app.add_option("--gpus", f.gpus,
                 "local backend: GPUs to hand out (default: as many as `nvidia-smi -L` lists)");
  app.add_option("--cpus", f.cpus, "local backend: CPU slots to hand out (default: online CPUs)");
  app.add_option("--tick-ms", f.tick_ms, "scheduling tick in milliseconds")->capture_default_str();
  app.add_option("--report-flush-ms", f.report_flush_ms,
                 "how often staged reports move to their indexed table")
      ->capture_default_str();
  app.add_option("--log-file", f.log_file, "log to this file instead of stderr");
  app.add_option("--log-level", f.log_level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_option("--log-format", f.log_format,
                 "text, or json: one JSON object per line, with the sweep, trial, job and step "
                 "ids as fields")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--backend", f.backend,
                 "where the trials of sweeps that name no backend (and have no slurm: section) "
                 "run: local or slurm (slurm implies --slurm on)")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  app.add_option("--slurm", f.slurm,
                 "the Slurm backend: auto (on when a slurm.conf is found and slurmctld answers), "
                 "on (a slurm.conf must be found; sweeps wait while slurmctld is away) or off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--slurm-conf", f.slurm_conf,
                 "slurm.conf for the Slurm backend (default $SLURM_CONF, then "
                 "/etc/slurm/slurm.conf)");
  app.add_option("--agent-silence", f.agent_silence,
                 "an allocation's hpo-agent that has not heard from hpod this long takes no new "
                 "steps, lets its running ones finish, and ends the allocation")
      ->capture_default_str();
  app.add_option("--tls-cert", f.tls_cert,
                 "PEM certificate (chain): the TCP address serves TLS only")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", f.tls_key, "PEM private key of --tls-cert")->check(CLI::ExistingFile);
  app.add_option("--tls-ca", f.tls_ca,
                 "PEM CA that trials (HPO_TLS_CA) and remote clients trust; default: --tls-cert "
                 "itself")
      ->check(CLI::ExistingFile);
  app.add_flag("--insecure-listen", f.insecure_listen,
               "allow a non-loopback --listen or --dashboard without TLS (tokens and reports in "
               "the clear)");
  app.add_option("--dashboard-idle", f.dashboard_idle,
                 "a dashboard session unused this long ends (e.g. 30m, 8h)")
      ->capture_default_str();
  app.add_flag("--no-durable", f.no_durable,
               "commit without fsync (faster; a power loss may lose the last moments)");
  app.add_option("--store-mode", f.store_mode,
                 "how the store is opened: auto (exclusive on NFS, Lustre, GPFS), shared (WAL "
                 "with shared memory, local disks), exclusive (WAL without shared memory)")
      ->check(CLI::IsMember({"auto", "shared", "exclusive"}))
      ->capture_default_str();
  app.add_flag("--keep-trials-on-term", f.keep_trials_on_term,
               "SIGTERM leaves the trials running for the next hpod, as SIGUSR1 does (hpod run "
               "as a Slurm job, `hpo daemon start --as-job`); SIGINT still ends them");
  app.add_flag("--check-flags", f.check_flags, "check these flags and exit (0: they are valid)")
      ->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (f.backend == "slurm" && f.slurm == "off") {
    std::fprintf(stderr, "hpod: --backend slurm needs Slurm, but --slurm is off\n");
    return 2;
  }
  if (std::string error = ClearTextError(f); !error.empty()) {
    std::fputs(error.c_str(), stderr);
    return 2;
  }
  if (absl::StatusOr<absl::Duration> idle = ParseDuration(f.dashboard_idle);
      !idle.ok() || *idle <= absl::ZeroDuration()) {
    std::fprintf(stderr, "hpod: --dashboard-idle %s: give a duration such as 30m or 8h\n",
                 f.dashboard_idle.c_str());
    return 2;
  }
  if (absl::StatusOr<absl::Duration> silence = ParseDuration(f.agent_silence);
      !silence.ok() || *silence <= absl::ZeroDuration()) {
    std::fprintf(stderr, "hpod: --agent-silence %s: give a duration such as 90s or 10m\n",
                 f.agent_silence.c_str());
    return 2;
  }
  return f.check_flags ? 0 : -1;
}

}  // namespace hpo::server
