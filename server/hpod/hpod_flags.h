#pragma once
// HpodFlags: hpod's command line (`hpod --help`) over its data directory's configuration.
//
// The configuration, DATA_DIR/hpod.yaml, keeps hpod's options (all but --data-dir, --log-file,
// --reconfigure and --check-flags) so that every start of that data directory's hpod is the
// same: `hpo daemon start`, an `hpo` command that starts hpod, hpod's Slurm job, a systemd unit.
// A start that gives options hpod.yaml does not keep yet adds them there; every start takes the
// rest from there; and one whose command line says otherwise than hpod.yaml for an option it
// keeps is refused (exit 2, naming each difference) unless it says --reconfigure, which writes
// the new values.

#include <string>

namespace hpo::server {

struct HpodFlags {
  std::string data_dir;    // default $HPO_DATA_DIR or ~/.hpo
  std::string sweeps_dir;  // default DATA_DIR/sweeps
  std::string listen = "127.0.0.1:0";
  // The host name trials, agents and clients reach --listen by; default: --listen's host, or
  // this host's name when that is a wildcard (0.0.0.0, [::]).
  std::string advertise;
  std::string dashboard = "127.0.0.1:0";  // host:port of the dashboard and /metrics; "none": off
  std::string log_format = "text";        // text | json
  int gpus = -1;                          // local backend; -1: what `nvidia-smi -L` lists
  int cpus = 0;                           // local backend; 0: the online CPUs
  int tick_ms = 50;
  int report_flush_ms = 50;
  std::string log_file, log_level = "info";
  std::string backend = "local";  // where sweeps that name no backend (and have no slurm:) run
  std::string slurm = "auto";     // auto | on | off
  std::string slurm_conf;
  // An allocation's hpo-agent that has not heard from hpod this long lets its steps finish and
  // ends the allocation.
  std::string agent_silence = "10m";
  static constexpr char kAsJobAgentSilence[] = "30m";  // the default under --as-job
  // Another host's hpod silent this long is taken to be gone: this one takes its data directory.
  std::string lock_stale = "45s";
  std::string tls_cert, tls_key, tls_ca;  // TLS for the TCP address and the dashboard
  bool insecure_listen = false;           // allow a non-loopback --listen / --dashboard without TLS
  std::string dashboard_idle = "8h";      // a dashboard session ends after this long unused
  bool no_durable = false;
  // auto: exclusive on a network file system (NFS, Lustre, GPFS), shared on a local one;
  // shared: WAL with its shared-memory index; exclusive: WAL without it, one connection.
  std::string store_mode = "auto";
  // SIGTERM leaves the trials running, as SIGUSR1 does (hpod run as a Slurm job: the end of
  // its job is a move, not the end of the sweeps); SIGINT still ends them.
  bool keep_trials_on_term = false;
  // Trial directories and the files hpod and its trials make readable by the owner's group
  // (umask 027) instead of the owner alone (umask 077).
  bool share_group = false;
  bool check_flags = false;  // only check the flags (`hpo daemon start` does, before starting)
  // hpod runs as a Slurm job of its own, submitted with these sbatch options ("": it does not).
  std::string as_job;
  // The options given on this command line become the configuration (DATA_DIR/hpod.yaml).
  bool reconfigure = false;
  // Only write the configuration these options make (`hpo daemon start --as-job`, before its
  // sbatch), or only print the kept options (`name=value` lines), and exit.
  bool configure_only = false, show_config = false;
  // What this start writes to `config_path` once it holds the data directory ("": nothing):
  // options hpod.yaml did not keep yet, and what --reconfigure changes.
  std::string config_text, config_path;
};

// Parses argv over the configuration of the data directory it names. Returns the exit code when
// hpod should exit at once (0 after --help or
// --version, 2 for a usage error, with the message printed); -1 to go on.
int ParseHpodFlags(int argc, char** argv, HpodFlags& flags);

}  // namespace hpo::server
