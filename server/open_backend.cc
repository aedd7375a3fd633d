#include "server/open_backend.h"

#include "backend/local_backend.h"
#include "common/clock.h"
#include "common/status_macros.h"
#ifdef HPO_WITH_SLURM
#include "slurm_backend/slurm_backend.h"
#endif

namespace hpo::server {

absl::StatusOr<std::unique_ptr<backend::Backend>> OpenBackend(const HpodFlags& flags,
                                                              const DataDir& data_dir,
                                                              const std::string& shim) {
  if (flags.backend == "slurm") {
#ifdef HPO_WITH_SLURM
    slurm::SlurmBackend::Options options;
    options.shim = shim;
    // Allocation names carry the data directory's stable id: a restarted daemon finds its own.
    ASSIGN_OR_RETURN(options.instance, data_dir.ReadOrCreateInstanceId());
    return std::make_unique<slurm::SlurmBackend>(slurm::MakeLibSlurm(flags.slurm_conf),
                                                 SystemClock::Get(), options);
#else
    (void)data_dir;
    return absl::FailedPreconditionError(
        "this hpod was built without Slurm (cmake -DHPO_WITH_SLURM=OFF): --backend slurm is not "
        "available; rebuild with libslurm-dev installed and HPO_WITH_SLURM=ON");
#endif
  }
  backend::LocalBackend::Options options;
  options.gpus = flags.gpus;
  options.cpus = flags.cpus;
  options.shim = shim;
  return std::make_unique<backend::LocalBackend>(options, SystemClock::Get());
}

}  // namespace hpo::server
