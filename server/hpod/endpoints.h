#pragma once
// Endpoints: hpod's gRPC server, on its Unix socket (for the owner's CLI; peer credentials are
// checked, see unix_listener.h) and on its TCP address (trials on compute nodes and remote
// clients; TLS only when --tls-cert is given).
//
// A port the system picked (port 0) is remembered in DATA_DIR/tcp_port and asked for again at
// the next start, so that trials a restart re-adopts keep reporting to the address in their
// HPO_ENDPOINT; when it is taken, another is picked and the restart says so.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data_dir.h"
#include "grpcpp/grpcpp.h"
#include "server/api/unix_listener.h"
#include "server/hpod/hpod_flags.h"

namespace hpo::server {

struct Endpoints {
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<UnixListener> unix_listener;
  std::string endpoint;  // what trials get as HPO_ENDPOINT
};

// The host of the endpoint: --advertise, else --listen's host, else (a wildcard) this host's name.
std::string AdvertisedHost(const HpodFlags& flags);

// The CA trials and remote clients should trust (--tls-ca, else --tls-cert), or "" without TLS.
std::string TlsCaPath(const HpodFlags& flags);

// Builds and starts the server with `services`. UNAVAILABLE when it cannot listen;
// INVALID_ARGUMENT for TLS flags that do not go together or cannot be read.
[[nodiscard]] absl::StatusOr<Endpoints> StartEndpoints(const HpodFlags& flags,
                                                       const DataDir& data_dir,
                                                       const std::vector<grpc::Service*>& services);

}  // namespace hpo::server
