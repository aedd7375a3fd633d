#include "server/hpod/hpod_flags.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/daemon_lock.h"
#include "common/data_dir.h"
#include "common/duration.h"
#include "common/files.h"
#include "common/version.h"
#include "yaml-cpp/yaml.h"

namespace hpo::server {

namespace {

// A usage error for TLS flags that do not go together; "" when the flags are fine.
std::string TlsError(const HpodFlags& f) {
  if (f.insecure_listen && !f.tls_cert.empty()) {
    return "hpod: --insecure-listen serves the TCP address in clear text; it does not go with "
           "--tls-cert\n";
  }
  if (f.tls_cert.empty() != f.tls_key.empty())
    return "hpod: --tls-cert and --tls-key go together\n";
  if (!f.tls_ca.empty() && f.tls_cert.empty()) {
    return "hpod: --tls-ca names the CA of a site certificate: give --tls-cert and --tls-key "
           "too\n";
  }
  return "";
}

void Define(CLI::App& app, HpodFlags& f) {
  app.description(
      "hpod: the hyperparameter optimization daemon. It runs sweeps' trials as local processes "
      "(the local backend) and, where Slurm is configured, on the Slurm cluster: each sweep says "
      "where (`backend:`; a sweep with a slurm: section runs on Slurm). It stores everything in "
      "DATA_DIR/hpod.db and serves hpo and the Python client. Its options are kept in "
      "DATA_DIR/hpod.yaml, which every start reads (docs/operations.md).");
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
                 "steps, lets its running ones finish, and ends the allocation (default 10m; 30m "
                 "for an hpod run as a Slurm job, --as-job)");
  app.add_option("--lock-stale", f.lock_stale,
                 "how long another host's hpod must have been silent (its lock file not written "
                 "again) before this one takes its data directory over; the hosts' clocks must "
                 "agree to well within it")
      ->capture_default_str();
  app.add_option("--tls-cert", f.tls_cert,
                 "a site's PEM certificate (chain) for the TCP address and the dashboard, instead "
                 "of the one hpod signs with its own CA (DATA_DIR/tls/ca.pem)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", f.tls_key, "PEM private key of --tls-cert")->check(CLI::ExistingFile);
  app.add_option("--tls-ca", f.tls_ca,
                 "PEM CA that trials (HPO_TLS_CA) and remote clients trust; default: --tls-cert "
                 "itself")
      ->check(CLI::ExistingFile);
  app.add_flag("--insecure-listen", f.insecure_listen,
               "serve the TCP address and the dashboard in clear text, without TLS: anyone on the "
               "network reads what crosses it, and a process that takes hpod's port while it is "
               "down is not told apart from hpod by `hpo` and the Python client (agents and "
               "trials still are: docs/operations.md, Security model)");
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
  app.add_flag("--share-group", f.share_group,
               "make trial directories and the files of hpod and its trials readable by your "
               "group (0750/0640) rather than by you alone (0700/0600, the default)");
  app.add_option("--as-job", f.as_job,
                 "this hpod runs as a Slurm job of its own, submitted with these sbatch options "
                 "(`hpo daemon start --as-job` writes it): it runs Slurm sweeps only (it implies "
                 "--backend slurm), its agents wait 30m for it, and near its job's time limit "
                 "(SIGTERM 120 s before) it queues the next job and stops, leaving the trials to "
                 "it");
  app.add_flag("--reconfigure", f.reconfigure,
               "make the options given here the configuration of the data directory "
               "(DATA_DIR/hpod.yaml), in place of what it says for them; without it a start "
               "whose options differ from hpod.yaml is refused");
  app.add_flag("--check-flags", f.check_flags, "check these flags and exit (0: they are valid)")
      ->group("");
  app.add_flag("--configure", f.configure_only,
               "write the configuration these options make to DATA_DIR/hpod.yaml and exit")
      ->group("");
  app.add_flag("--show-config", f.show_config,
               "print the options DATA_DIR/hpod.yaml keeps, name=value a line, and exit")
      ->group("");
}

std::string Text(const std::string& s) { return s; }
std::string Text(int i) { return std::to_string(i); }
std::string Text(bool b) { return b ? "true" : "false"; }

// The options that are a data directory's configuration (DATA_DIR/hpod.yaml), each with its
// value as hpod.yaml keeps it; paths absolute. The others (--data-dir, --log-file, --reconfigure,
// --check-flags) are about one start.
struct ConfigOption {
  const char* name;  // without the dashes
  std::function<std::string(const HpodFlags&)> text;
};
#define HPO_CONFIG(name, field)                            \
  {                                                        \
    name, [](const HpodFlags& f) { return Text(f.field); } \
  }
#define HPO_CONFIG_PATH(name, field)                                                      \
  {                                                                                       \
    name, [](const HpodFlags& f) { return f.field.empty() ? "" : AbsolutePath(f.field); } \
  }
const std::vector<ConfigOption>& ConfigOptions() {
  static const std::vector<ConfigOption> options = {
      HPO_CONFIG_PATH("sweeps-dir", sweeps_dir),
      HPO_CONFIG("listen", listen),
      HPO_CONFIG("advertise", advertise),
      HPO_CONFIG("dashboard", dashboard),
      HPO_CONFIG("gpus", gpus),
      HPO_CONFIG("cpus", cpus),
      HPO_CONFIG("tick-ms", tick_ms),
      HPO_CONFIG("report-flush-ms", report_flush_ms),
      HPO_CONFIG("log-level", log_level),
      HPO_CONFIG("log-format", log_format),
      HPO_CONFIG("backend", backend),
      HPO_CONFIG("slurm", slurm),
      HPO_CONFIG_PATH("slurm-conf", slurm_conf),
      HPO_CONFIG("agent-silence", agent_silence),
      HPO_CONFIG("lock-stale", lock_stale),
      HPO_CONFIG_PATH("tls-cert", tls_cert),
      HPO_CONFIG_PATH("tls-key", tls_key),
      HPO_CONFIG_PATH("tls-ca", tls_ca),
      HPO_CONFIG("insecure-listen", insecure_listen),
      HPO_CONFIG("dashboard-idle", dashboard_idle),
      HPO_CONFIG("no-durable", no_durable),
      HPO_CONFIG("store-mode", store_mode),
      HPO_CONFIG("keep-trials-on-term", keep_trials_on_term),
      HPO_CONFIG("share-group", share_group),
      HPO_CONFIG("as-job", as_job),
  };
  return options;
}
#undef HPO_CONFIG
#undef HPO_CONFIG_PATH

const ConfigOption* FindConfigOption(const std::string& name) {
  for (const ConfigOption& o : ConfigOptions()) {
    if (name == o.name) return &o;
  }
  return nullptr;
}

// Parses `args` (argv[0] first) into `f`; an error as CLI11 words it, "" when they parse.
std::string Parse(const std::vector<std::string>& args, HpodFlags& f) {
  CLI::App app;
  Define(app, f);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

// hpod.yaml: each option a line, "name: value", in the order of ConfigOptions; `names` say which.
std::string ConfigText(const HpodFlags& f, const std::vector<std::string>& names) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const ConfigOption& o : ConfigOptions()) {
    if (std::find(names.begin(), names.end(), o.name) == names.end()) continue;
    out << YAML::Key << o.name << YAML::Value << o.text(f);
  }
  out << YAML::EndMap;
  return absl::StrCat(
      "# hpod's options for this data directory: every start of its hpod reads them (hpod, `hpo\n"
      "# daemon start`, an `hpo` command that starts hpod, hpod run as a Slurm job), and one "
      "whose\n"
      "# options differ is refused. Change them with `hpo daemon start --reconfigure OPTIONS`\n"
      "# (or `hpod --reconfigure`), or here while hpod is stopped. See `hpod --help`.\n",
      out.c_str(), "\n");
}

// The options in hpod.yaml at `path`, name -> value as written (none when there is no file);
// an error "PATH:LINE:COLUMN: what is wrong" otherwise.
absl::StatusOr<std::map<std::string, std::string>> ReadConfig(const std::string& path,
                                                              bool* exists) {
  std::map<std::string, std::string> out;
  absl::StatusOr<std::string> text = ReadFile(path);
  *exists = text.ok();
  if (!text.ok()) return out;
  auto where = [&](const YAML::Mark& m) {
    return absl::StrCat(path, ":", m.line + 1, ":", m.column + 1);
  };
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(where(e.mark), ": ", e.msg));
  }
  if (!root || root.IsNull()) return out;
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(root.Mark()), ": give hpod's options as name: value lines"));
  }
  for (const auto& kv : root) {
    std::string name = kv.first.Scalar();
    if (FindConfigOption(name) == nullptr) {
      std::vector<std::string> names;
      for (const ConfigOption& o : ConfigOptions()) names.push_back(o.name);
      return absl::InvalidArgumentError(absl::StrCat(where(kv.first.Mark()), ": '", name,
                                                     "' is not one of hpod's kept options (",
                                                     absl::StrJoin(names, ", "), ")"));
    }
    if (!kv.second.IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(kv.second.Mark()), ": ", name, " takes a single value"));
    }
    out[name] = kv.second.Scalar();
  }
  return out;
}

}  // namespace

int ParseHpodFlags(int argc, char** argv, HpodFlags& f) {
  std::vector<std::string> args(argv, argv + argc);
  // The command line alone (--help, --version and usage errors end here): which of the kept
  // options it gives.
  HpodFlags given;
  CLI::App app;
  Define(app, given);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::vector<std::string> said;
  for (const ConfigOption& o : ConfigOptions()) {
    if (app.get_option(std::string("--") + o.name)->count() > 0) said.push_back(o.name);
  }
  // What the data directory's hpod.yaml keeps, checked as if given on the command line.
  DataDir dir =
      given.data_dir.empty() ? DataDir::FromEnvironment() : DataDir(AbsolutePath(given.data_dir));
  bool exists = false;
  absl::StatusOr<std::map<std::string, std::string>> kept = ReadConfig(dir.config_path(), &exists);
  if (!kept.ok()) {
    std::fprintf(stderr, "hpod: %s\n", std::string(kept.status().message()).c_str());
    return 2;
  }
  std::vector<std::string> from_file = {args[0]};
  for (const auto& [name, value] : *kept) from_file.push_back(absl::StrCat("--", name, "=", value));
  HpodFlags configured;
  if (std::string e = Parse(from_file, configured); !e.empty()) {
    std::fprintf(stderr, "hpod: %s: %s\n", dir.config_path().c_str(), e.c_str());
    return 2;
  }
  // A start may add options to the configuration; one that says otherwise than it changes it only
  // when told to.
  std::vector<std::string> differ;
  bool adds = false;
  for (const std::string& name : said) {
    const ConfigOption& o = *FindConfigOption(name);
    if (kept->count(name) == 0) {
      adds = true;
    } else if (o.text(given) != o.text(configured)) {
      differ.push_back(absl::StrCat("  --", name, " ", o.text(given),
                                    "  (hpod.yaml: ", o.text(configured), ")"));
    }
  }
  if (!differ.empty() && !given.reconfigure) {
    std::fprintf(stderr,
                 "hpod: %s is this data directory's configuration, and this start says "
                 "otherwise:\n%s\nStart hpod as configured (leave these options out), or make "
                 "them the configuration: `hpo daemon start --reconfigure ...` (or edit the file "
                 "while hpod is stopped)\n",
                 dir.config_path().c_str(), absl::StrJoin(differ, "\n").c_str());
    return 2;
  }
  // The configuration, then the command line over it.
  std::vector<std::string> merged = {args[0]};
  for (const auto& [name, value] : *kept) {
    if (std::find(said.begin(), said.end(), name) == said.end()) {
      merged.push_back(absl::StrCat("--", name, "=", value));
    }
  }
  merged.insert(merged.end(), args.begin() + 1, args.end());
  if (std::string e = Parse(merged, f); !e.empty()) {
    std::fprintf(stderr, "hpod: %s\n", e.c_str());
    return 2;
  }
  if (f.show_config) {
    for (const auto& [name, value] : *kept) {
      std::printf("%s=%s\n", name.c_str(), FindConfigOption(name)->text(configured).c_str());
    }
    return 0;
  }
  // What this start keeps: options hpod.yaml did not have yet, and what --reconfigure changes.
  // Written once this hpod holds the data directory (main).
  if (adds || (f.reconfigure && !differ.empty())) {
    std::vector<std::string> names = said;
    for (const auto& [name, value] : *kept) names.push_back(name);
    f.config_text = ConfigText(f, names);
    f.config_path = dir.config_path();
  }
  if (!f.as_job.empty()) f.backend = "slurm";  // its local trials would die at every move
  // An hpod run as a job is away between one job and the next (the scrontab line's cadence,
  // the queue): its agents wait for it longer, unless told how long.
  if (!f.as_job.empty() && kept->count("agent-silence") == 0 &&
      std::find(said.begin(), said.end(), "agent-silence") == said.end()) {
    f.agent_silence = HpodFlags::kAsJobAgentSilence;
  }
  if (f.backend == "slurm" && f.slurm == "off") {
    std::fprintf(stderr, "hpod: --backend slurm needs Slurm, but --slurm is off\n");
    return 2;
  }
  if (std::string error = TlsError(f); !error.empty()) {
    std::fputs(error.c_str(), stderr);
    return 2;
  }
  if (absl::StatusOr<absl::Duration> idle = ParseDuration(f.dashboard_idle);
      !idle.ok() || *idle <= absl::ZeroDuration()) {
    std::fprintf(stderr, "hpod: --dashboard-idle %s: give a duration such as 30m or 8h\n",
                 f.dashboard_idle.c_str());
    return 2;
  }
  if (absl::StatusOr<absl::Duration> stale = ParseDuration(f.lock_stale);
      !stale.ok() || *stale < absl::Seconds(2)) {
    std::fprintf(stderr, "hpod: --lock-stale %s: give a duration of 2s or more, such as 45s\n",
                 f.lock_stale.c_str());
    return 2;
  }
  if (absl::StatusOr<absl::Duration> silence = ParseDuration(f.agent_silence);
      !silence.ok() || *silence <= absl::ZeroDuration()) {
    std::fprintf(stderr, "hpod: --agent-silence %s: give a duration such as 90s or 10m\n",
                 f.agent_silence.c_str());
    return 2;
  }
  if (f.configure_only) {
    if (std::optional<LockHolder> holder = LiveLockHolder(dir.lock_path())) {
      std::fprintf(stderr,
                   "hpod: hpod runs for %s (on %s, pid %d): stop it before changing its "
                   "options\n",
                   dir.root().c_str(), holder->host.c_str(), holder->pid);
      return 1;
    }
    if (!f.config_text.empty()) {
      if (absl::Status s = MakeDirs(dir.root(), 0700); !s.ok()) {
        std::fprintf(stderr, "hpod: %s\n", std::string(s.message()).c_str());
        return 1;
      }
      if (absl::Status s = WriteFileAtomic(f.config_path, f.config_text, 0600); !s.ok()) {
        std::fprintf(stderr, "hpod: %s\n", std::string(s.message()).c_str());
        return 1;
      }
    }
    return 0;
  }
  return f.check_flags ? 0 : -1;
}

}  // namespace hpo::server
