#pragma once
// Client: the C++ client library of hpod. Wraps the gRPC stubs with the token and deadlines, and
// finds (and if asked, starts) the local daemon the way the `hpo` CLI does.
//
// Thread safety: a Client may be used from several threads at once (gRPC stubs are).
// Errors: the daemon's gRPC status as absl::Status, with the same code and message;
// UNAVAILABLE when no daemon answers.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/credentials.h"
#include "hpo/v1/hpo.grpc.pb.h"

namespace hpo::client {

class Client {
 public:
  // Connects to `target` (e.g. "unix:/home/me/.hpo/hpod.sock" or "127.0.0.1:7070"); with
  // `tls_ca_pem`, over TLS trusting that CA (or self-signed certificate).
  Client(const std::string& target, std::string token, const std::string& tls_ca_pem = "");

  // The daemon the environment names: $HPO_SERVER (host:port) with the token in $HPO_TOKEN
  // or the file $HPO_TOKEN_FILE and, for TLS, the CA in $HPO_TLS_CA; else Local(autostart).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Client>> FromEnvironment(bool autostart);

  // The local daemon of $HPO_DATA_DIR (or ~/.hpo); with `autostart`, starts hpod when none
  // answers and waits until it does.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Client>> Local(bool autostart);

  [[nodiscard]] absl::StatusOr<v1::ValidateSweepResponse> Validate(
      const v1::ValidateSweepRequest& req);
  [[nodiscard]] absl::StatusOr<v1::PlanSweepResponse> Plan(const v1::PlanSweepRequest& req);
  [[nodiscard]] absl::StatusOr<v1::Sweep> Submit(const v1::SubmitSweepRequest& req);
  [[nodiscard]] absl::StatusOr<v1::Sweep> GetSweep(int64_t sweep_id);
  [[nodiscard]] absl::StatusOr<std::vector<v1::Sweep>> ListSweeps(bool active_only);
  [[nodiscard]] absl::StatusOr<v1::Sweep> Cancel(int64_t sweep_id);
  [[nodiscard]] absl::StatusOr<v1::Sweep> Pause(int64_t sweep_id);
  [[nodiscard]] absl::StatusOr<v1::Sweep> Resume(int64_t sweep_id);
  [[nodiscard]] absl::StatusOr<v1::Sweep> AllowNode(int64_t sweep_id, const std::string& node);
  [[nodiscard]] absl::StatusOr<v1::Sweep> Extend(const v1::ExtendSweepRequest& req);
  [[nodiscard]] absl::StatusOr<v1::Sweep> Enqueue(const v1::EnqueueRequest& req);
  [[nodiscard]] absl::StatusOr<v1::AskResponse> Ask(int64_t sweep_id);
  [[nodiscard]] absl::StatusOr<v1::Trial> Tell(const v1::TellRequest& req);
  // The directories removed with it.
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> Remove(int64_t sweep_id);
  [[nodiscard]] absl::StatusOr<std::vector<v1::Trial>> ListTrials(const v1::ListTrialsRequest& req);
  [[nodiscard]] absl::StatusOr<v1::GetTrialResponse> GetTrial(int64_t trial_id,
                                                              bool include_reports);
  [[nodiscard]] absl::StatusOr<v1::TailTrialLogResponse> TailLog(
      const v1::TailTrialLogRequest& req);
  // A one-time login link to hpod's web dashboard.
  [[nodiscard]] absl::StatusOr<v1::DashboardLoginResponse> DashboardLogin();
  // Streams events after `since_seq` to `on_event` until the sweep ends (OK), `on_event`
  // returns false (CANCELLED), `timeout` passes (DEADLINE_EXCEEDED) or the stream breaks (its
  // status).
  [[nodiscard]] absl::Status Watch(int64_t sweep_id, int64_t since_seq,
                                   const std::function<bool(const v1::Event&)>& on_event,
                                   absl::Duration timeout = absl::InfiniteDuration());
  // True when the daemon answers its health check.
  bool Healthy(absl::Duration timeout);

 private:
  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout = absl::Seconds(60));

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::HpoService::Stub> stub_;
  std::string token_;
};

// Starts hpod for the data directory in the background, with `extra_args` (e.g. "--cpus=4"),
// and waits until it answers.
[[nodiscard]] absl::Status StartDaemon(absl::Duration timeout,
                                       const std::vector<std::string>& extra_args = {});
// hpod run as a Slurm job: its job id and, once it serves, the node it runs on.
struct DaemonJob {
  std::string id;
  bool running = false;  // it holds the data directory and answers
  std::string host;      // where, when running
  std::string state;     // Slurm's state of the job when not yet running (e.g. PENDING)
};
// Keeps `hpod_args` and `--as-job=SBATCH_ARGS` in DATA_DIR/hpod.yaml (listening on 0.0.0.0:0
// and leaving the trials running when its job ends, unless they or hpod.yaml say otherwise),
// writes DATA_DIR/hpod-job.sh, a batch script that runs hpod for the data directory, submits it
// with `sbatch_args`, and waits up to `wait` for it to answer.
// A job still queued then is no error (running false). FAILED_PRECONDITION when sbatch refuses
// it, INVALID_ARGUMENT when hpod refuses the options, UNAVAILABLE when the job ended unserved.
[[nodiscard]] absl::StatusOr<DaemonJob> StartDaemonAsJob(
    const std::vector<std::string>& sbatch_args, const std::vector<std::string>& hpod_args,
    absl::Duration wait);
// The options the data directory's hpod.yaml keeps (`hpod --show-config`), name -> value.
[[nodiscard]] absl::StatusOr<std::map<std::string, std::string>> KeptOptions();
// Sends SIGTERM to the data directory's hpod (SIGUSR1 with `keep_trials`: it leaves its trials
// running for the next start to re-adopt) and waits until it is gone. hpod run as a Slurm job
// gets SIGINT or SIGUSR1 through `scancel --batch`, from any host.
[[nodiscard]] absl::Status StopDaemon(absl::Duration timeout, bool keep_trials = false);

[[nodiscard]] absl::Status FromGrpc(const grpc::Status& s);

// What the client library's calls share: a deadline `d` from now, the credentials of a channel
// (TLS trusting `tls_ca_pem`, or none when it is empty), and the CA $HPO_TLS_CA names ("" when
// unset; FAILED_PRECONDITION when it cannot be read).
std::chrono::system_clock::time_point Deadline(absl::Duration d);
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const std::string& tls_ca_pem);
// The CA to trust: $HPO_TLS_CA_DATA (base64 of its PEM: what trials and agents get at launch),
// else the PEM file $HPO_TLS_CA.
[[nodiscard]] absl::StatusOr<std::string> TlsCaFromEnvironment();
// Whether HPO_INSECURE=1 lets hpo send the user's token over a clear-text TCP connection (to an
// hpod started with --insecure-listen).
bool ClearTextAllowed();
// A channel for the calls of programs on compute nodes (trials' reporters, hpo-agent), which
// keep their own pace after a miss: it only has to reconnect quickly once hpod is back (gRPC's
// own backoff grows to two minutes).
std::shared_ptr<grpc::Channel> ComputeNodeChannel(const std::string& endpoint,
                                                  const std::string& tls_ca_pem);

}  // namespace hpo::client
