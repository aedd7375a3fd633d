#pragma once
// The names of the files hpod keeps: those of its data directory and those of each trial's
// directory. hpod, hpo and hpo-shim all take them from here, so that they agree.
//
//   $HPO_DATA_DIR (default ~/.hpo)     mode 0700
//     hpod.db          the SQLite store (WAL)
//     hpod.sock        the Unix socket for local clients
//     endpoint         the TCP address trials, agents and remote clients use ("HOST:PORT")
//     hpod.yaml        hpod's options, read by every start (server/hpod/hpod_flags.h)
//     tcp_port         the port of the last run, asked for again at the next start
//     tls-ca.pem       the CA that clients reaching `endpoint` trust, while hpod serves TLS
//     tls/             hpod's own CA (ca.pem, ca.key) and the server certificate it signed at
//                      this start (server.pem, server.key), mode 0700
//     hpod-job.sh      the batch script of hpod run as a Slurm job (`hpo daemon start --as-job`)
//     token            the owner's token, mode 0600
//     users/NAME.token tokens of other users of a shared daemon, mode 0600
//     users/NAME.access  their roles (server/auth/auth.h)
//     hpod.pid         pid of the running daemon
//     hpod.lock        held (flock) by the running daemon: one daemon per data directory
//     hpod.log         the daemon's log when started in the background
//     instance         this data directory's stable id (names its Slurm allocations)
//     agents/JOB.token   the token of the hpo-agent in Slurm allocation JOB, mode 0600
//     agents/JOB.journal what that agent started and saw end (its own record)
//     agents/JOB.log     what that agent did
//     sweeps/<sweep>/trials/<number>/   a trial's directory, see TrialDir
//
// Header-only, with no dependency beyond the standard library: hpo-shim is a static program
// that links libc alone.

#include <cstdint>
#include <string>

namespace hpo::layout {

// The data directory.
inline constexpr char kDatabase[] = "hpod.db";
inline constexpr char kSocket[] = "hpod.sock";
inline constexpr char kEndpoint[] = "endpoint";
inline constexpr char kTcpPort[] = "tcp_port";
inline constexpr char kConfig[] = "hpod.yaml";
inline constexpr char kTlsCa[] = "tls-ca.pem";
inline constexpr char kTlsDir[] = "tls";
inline constexpr char kDaemonJobScript[] = "hpod-job.sh";
// The dashboard's URL while hpod runs, and the port it had (asked for again at the next start).
inline constexpr char kDashboard[] = "dashboard";
inline constexpr char kDashboardPort[] = "dashboard_port";
inline constexpr char kToken[] = "token";
inline constexpr char kUsersDir[] = "users";
inline constexpr char kUserTokenSuffix[] = ".token";
inline constexpr char kUserAccessSuffix[] = ".access";
inline constexpr char kDaemonPid[] = "hpod.pid";
inline constexpr char kDaemonLock[] = "hpod.lock";
inline constexpr char kDaemonLog[] = "hpod.log";
inline constexpr char kInstance[] = "instance";
inline constexpr char kSweepsDir[] = "sweeps";
inline constexpr char kAgentsDir[] = "agents";
inline constexpr char kAgentTokenSuffix[] = ".token";
inline constexpr char kAgentJournalSuffix[] = ".journal";
inline constexpr char kAgentLogSuffix[] = ".log";

// What hpod and its trials make files with: the owner alone reads them (077), or with
// --share-group the owner's group too (027). hpod passes its choice to the programs it launches
// elsewhere (hpo-shim, hpo-agent) as HPO_UMASK, in octal.
inline constexpr unsigned kPrivateUmask = 077;
inline constexpr unsigned kGroupUmask = 027;
inline constexpr char kUmaskEnv[] = "HPO_UMASK";

// A trial's directory.
inline constexpr char kStdout[] = "stdout.log";            // the command's standard output
inline constexpr char kStderr[] = "stderr.log";            // its standard error (and srun's)
inline constexpr char kParams[] = "params.json";           // a copy of its parameters
inline constexpr char kShimPid[] = "hpo.pid";              // hpo-shim's pid (the process group)
inline constexpr char kShimExit[] = "hpo.exit";            // how the command ended, by hpo-shim
inline constexpr char kCheckpoint[] = "checkpoint";        // {checkpoint_out}: the trial's own
inline constexpr char kTaskRecordPrefix[] = ".hpo-task.";  // Slurm steps: what each task got
// The trial's reports as it made them, and how far hpod has acknowledged them (report_journal.h).
inline constexpr char kReportJournal[] = "reports.journal";
inline constexpr char kReportCursor[] = "reports.sent";

// The files of one trial's directory.
class TrialDir {
 public:
  explicit TrialDir(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  std::string stdout_log() const { return File(kStdout); }
  std::string stderr_log() const { return File(kStderr); }
  std::string params() const { return File(kParams); }
  std::string shim_pid() const { return File(kShimPid); }
  std::string shim_exit() const { return File(kShimExit); }
  std::string checkpoint() const { return File(kCheckpoint); }
  std::string report_journal() const { return File(kReportJournal); }
  std::string report_cursor() const { return File(kReportCursor); }
  std::string File(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace hpo::layout
