#include "server/hpod/open_backend.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "backend/external_backend.h"
#include "backend/local_backend.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/layout.h"
#include "common/status_macros.h"
#include "server/hpod/endpoints.h"
#include "spdlog/spdlog.h"
#ifdef HPO_WITH_SLURM
#include "slurm_backend/agent_hub.h"
#include "slurm_backend/slurm_backend.h"
#endif

namespace hpo::server {

namespace {
constexpr char kDefaultSlurmConf[] = "/etc/slurm/slurm.conf";
}  // namespace

std::string FindSlurmConf(const std::string& flag, std::string* why) {
  std::string path = flag, from = "--slurm-conf";
  if (path.empty()) {
    const char* env = std::getenv("SLURM_CONF");
    path = env != nullptr ? env : "";
    from = "SLURM_CONF";
  }
  if (path.empty()) {
    path = kDefaultSlurmConf;
    from = "the default path";
  }
  if (::access(path.c_str(), R_OK) == 0) return path;
  *why =
      absl::StrCat("no slurm.conf at ", path, " (", from,
                   "; hpod looks at --slurm-conf, then SLURM_CONF, then ", kDefaultSlurmConf, ")");
  return "";
}

absl::StatusOr<std::unique_ptr<backend::Router>> OpenBackends(
    const HpodFlags& flags, const DataDir& data_dir, const std::string& tls_ca_pem,
    const std::string& shim, bool slurm_sweeps_unfinished, slurm::AgentHub* agents) {
  auto router = std::make_unique<backend::Router>(flags.backend);
  backend::LocalBackend::Options local;
  local.gpus = flags.gpus;
  local.cpus = flags.cpus;
  local.shim = shim;
  if (flags.as_job.empty()) {
    router->Add(std::make_unique<backend::LocalBackend>(local, SystemClock::Get()));
  } else {
    // Local trials would die with hpod's job at its next move.
    router->AddUnavailable("local",
                           "hpod runs as a Slurm job (--as-job), whose end would end the trials "
                           "it runs as its own processes: give the sweep a slurm: section (or "
                           "`backend: slurm`), or run hpod outside Slurm for local sweeps");
  }
  router->Add(std::make_unique<backend::ExternalBackend>(SystemClock::Get()));

  // --backend slurm: the sweeps that name no backend go to Slurm, so it must be there.
  std::string mode = flags.slurm;
  bool required = mode == "on" || flags.backend == "slurm";
  if (mode == "off") {
    router->AddUnavailable("slurm", "hpod was started with --slurm off");
    return router;
  }
#ifdef HPO_WITH_SLURM
  std::string why;
  std::string conf = FindSlurmConf(flags.slurm_conf, &why);
  if (conf.empty()) {
    if (required) return absl::FailedPreconditionError(absl::StrCat("Slurm: ", why));
    router->AddUnavailable("slurm", why);
    return router;
  }
  std::unique_ptr<slurm::SlurmApi> api = slurm::MakeLibSlurm(conf);
  absl::Status answers = api->QueryMine().status();
  if (!answers.ok()) {
    if (!required && !slurm_sweeps_unfinished) {
      router->AddUnavailable(
          "slurm", absl::StrCat("slurmctld (", conf, ") does not answer: ", answers.message()));
      return router;
    }
    spdlog::warn("slurmctld ({}) does not answer now: {}; Slurm sweeps wait for it", conf,
                 std::string(answers.message()));
  }
  slurm::SlurmBackend::Options options;
  options.shim = shim;
  options.query_thread = true;  // a slow slurmctld never holds up the controller
  if (agents != nullptr) options.endpoint = [agents] { return agents->Endpoint(); };
  options.in_job = !flags.as_job.empty();
  // Allocation names carry the data directory's stable id: a restarted daemon finds its own.
  ASSIGN_OR_RETURN(options.instance, data_dir.ReadOrCreateInstanceId());
  std::string agent = DirName(shim) + "/hpo-agent";
  if (agents != nullptr && ::access(agent.c_str(), X_OK) == 0) {
    options.agent.hub = agents;
    options.agent.argv = {agent, "--silence", flags.agent_silence, "--dir", agents->dir()};
    options.agent.env["HPO_ENDPOINT_FILE"] = data_dir.endpoint_path();
    // Its journal, its log and the steps it starts are private (or the group's) as hpod's are.
    options.agent.env[layout::kUmaskEnv] = options.agent.env["SLURM_UMASK"] =
        flags.share_group ? "0027" : "0077";
    if (!tls_ca_pem.empty()) options.agent.env[kTlsCaDataEnv] = Base64Encode(tls_ca_pem);
    if (absl::Status s = MakeDirs(agents->dir(), 0700); !s.ok()) return s;
  } else {
    spdlog::warn("no {}: hpod runs each Slurm step's srun on this host", agent);
  }
  router->Add(std::make_unique<slurm::SlurmBackend>(std::move(api), SystemClock::Get(), options));
  spdlog::info("Slurm is on: {}", conf);
#else
  (void)data_dir;
  (void)tls_ca_pem;
  (void)slurm_sweeps_unfinished;
  (void)agents;
  const char* why =
      "this hpod was built without Slurm (cmake -DHPO_WITH_SLURM=OFF); rebuild with "
      "libslurm-dev installed and HPO_WITH_SLURM=ON";
  if (required) return absl::FailedPreconditionError(why);
  router->AddUnavailable("slurm", why);
#endif
  return router;
}

}  // namespace hpo::server
