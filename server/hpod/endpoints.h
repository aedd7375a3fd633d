#pragma once
// Endpoints: hpod's gRPC server, on its Unix socket (for the owner's CLI; peer credentials are
// checked, see unix_listener.h) and on its TCP address (trials on compute nodes and remote
// clients), over TLS unless --insecure-listen.
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

// What hpod serves its TCP address (and a dashboard off loopback) with.
struct ServerTls {
  bool clear_text = false;  // --insecure-listen
  bool own = false;         // hpod's own CA signed the certificate (no --tls-cert)
  std::string cert_pem, key_pem;
  std::string cert_path, key_path;  // the same, on disk (the dashboard reads files)
  std::string ca_pem;               // what clients trust: hpod's CA, or --tls-ca / --tls-cert
};

// The TLS of this start: the site's certificate (--tls-cert, --tls-key, --tls-ca), else one that
// hpod's own CA (DATA_DIR/tls/ca.pem and ca.key, made at the first start) signs now for this
// host's names (--advertise, the host name, localhost) and addresses; clear text with
// --insecure-listen. INVALID_ARGUMENT for files that cannot be read; UNAVAILABLE or INTERNAL
// when hpod's CA cannot be made.
[[nodiscard]] absl::StatusOr<ServerTls> LoadServerTls(const HpodFlags& flags,
                                                      const DataDir& data_dir);

// Builds and starts the server with `services`. UNAVAILABLE when it cannot listen.
[[nodiscard]] absl::StatusOr<Endpoints> StartEndpoints(const HpodFlags& flags, const ServerTls& tls,
                                                       const DataDir& data_dir,
                                                       const std::vector<grpc::Service*>& services);

}  // namespace hpo::server
