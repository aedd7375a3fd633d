#pragma once
// Opening the backend hpod runs trials on, from its flags: the local backend, or the Slurm
// backend when hpod was built with it (HPO_WITH_SLURM).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "common/data_dir.h"
#include "server/hpod_flags.h"

namespace hpo::server {

// `shim` is hpo-shim's path. FAILED_PRECONDITION for `--backend slurm` in a build without
// Slurm; what opening the data directory's instance id returns otherwise.
[[nodiscard]] absl::StatusOr<std::unique_ptr<backend::Backend>> OpenBackend(
    const HpodFlags& flags, const DataDir& data_dir, const std::string& shim);

}  // namespace hpo::server
