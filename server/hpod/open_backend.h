#pragma once
// Opening the backends hpod runs trials on, from its flags: always the local backend, and the
// Slurm backend when Slurm is here (`--slurm auto`: a slurm.conf is found and slurmctld
// answers; `--slurm on`: a slurm.conf is found; `--slurm off`: never) and hpod was built with it
// (HPO_WITH_SLURM). One Router holds them; `--backend` names the default.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backend/router.h"
#include "common/data_dir.h"
#include "server/hpod/hpod_flags.h"

namespace hpo::slurm {
class AgentHub;
}  // namespace hpo::slurm

namespace hpo::server {

// Where Slurm's configuration is: `--slurm-conf`, else $SLURM_CONF, else the default path
// (/etc/slurm/slurm.conf), when that file exists; "" with `why` set when there is none.
std::string FindSlurmConf(const std::string& flag, std::string* why);

// `shim` is hpo-shim's path; `tls_ca_pem` the CA the agents trust ("": clear text). `agents` (built
// with Slurm; it outlives the router): where the hpo-agents of the Slurm allocations call
// (slurm_backend/agent_hub.h); the allocations run hpo-agent when it is installed next to hpo-shim.
// `slurm_sweeps_unfinished`: the store holds sweeps on Slurm that have not ended, so with `--slurm
// auto` Slurm stays on even if slurmctld does not answer at this moment (their trials wait for it
// instead of being lost). FAILED_PRECONDITION when the flags ask for Slurm and it cannot be had (no
// slurm.conf, a build without Slurm).
[[nodiscard]] absl::StatusOr<std::unique_ptr<backend::Router>> OpenBackends(
    const HpodFlags& flags, const DataDir& data_dir, const std::string& tls_ca_pem,
    const std::string& shim, bool slurm_sweeps_unfinished, slurm::AgentHub* agents);

}  // namespace hpo::server
