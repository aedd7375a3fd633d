#include "server/hpod/endpoints.h"

#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/address.h"
#include "common/files.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/api/hpo_service.h"
#include "spdlog/spdlog.h"

namespace hpo::server {
namespace {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpCredentials(const HpodFlags& f) {
  if (f.tls_cert.empty() != f.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (f.tls_cert.empty()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = ReadFile(f.tls_cert), key = ReadFile(f.tls_key);
  if (!cert.ok()) return cert.status();
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions tls;
  tls.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(tls);
}

// The address to ask for: the remembered port when `listen` says port 0.
std::string RememberedAddress(const std::string& listen, const DataDir& data_dir) {
  if (listen == "none" || !absl::EndsWith(listen, ":0")) return listen;
  int saved = 0;
  absl::StatusOr<std::string> text = ReadFile(data_dir.tcp_port_path());
  if (text.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &saved) && saved > 0 &&
      saved < 65536) {
    return absl::StrCat(listen.substr(0, listen.size() - 1), saved);
  }
  return listen;
}

}  // namespace

std::string AdvertisedHost(const HpodFlags& flags) {
  if (!flags.advertise.empty()) return flags.advertise;
  std::string host = flags.listen.substr(0, flags.listen.rfind(':'));
  if (!host.empty() && host != "0.0.0.0" && host != "[::]" && host != "::") return host;
  return HostName();
}

std::string TlsCaPath(const HpodFlags& flags) {
  if (flags.tls_cert.empty()) return "";
  return AbsolutePath(flags.tls_ca.empty() ? flags.tls_cert : flags.tls_ca);
}

absl::StatusOr<Endpoints> StartEndpoints(const HpodFlags& flags, const DataDir& data_dir,
                                         const std::vector<grpc::Service*>& services) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = TcpCredentials(flags);
  if (!credentials.ok()) return credentials.status();
  Endpoints out;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> unix_acceptor;
  int tcp_port = 0;
  auto build = [&](const std::string& address) {
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(builder);
    // The Unix socket's connections come from our own listener, which checks peer credentials.
    unix_acceptor = builder.experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
        grpc::InsecureServerCredentials());
    tcp_port = 0;
    if (address != "none") builder.AddListeningPort(address, *credentials, &tcp_port);
    for (grpc::Service* service : services) builder.RegisterService(service);
    out.server = builder.BuildAndStart();
    if (out.server == nullptr) return false;
    // gRPC's health protocol asks by service name: each of hpod's answers for itself (the empty
    // name, the server as a whole, is SERVING already).
    if (grpc::HealthCheckServiceInterface* health = out.server->GetHealthCheckService()) {
      for (const char* name :
           {v1::HpoService::service_full_name(), v1::ReportService::service_full_name()}) {
        health->SetServingStatus(name, true);
      }
    }
    return address == "none" || tcp_port != 0;
  };
  std::string remembered = RememberedAddress(flags.listen, data_dir);
  if (!build(remembered)) {
    if (remembered == flags.listen || !build(flags.listen)) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", data_dir.socket_path(), " and ", flags.listen));
    }
    spdlog::warn(
        "the port of the last run ({}) is taken; trials it left running cannot report until they "
        "are restarted",
        remembered);
  }
  if (tcp_port != 0) {
    if (absl::Status s =
            WriteFileAtomic(data_dir.tcp_port_path(), absl::StrCat(tcp_port, "\n"), 0600);
        !s.ok()) {
      spdlog::warn("cannot remember the TCP port for the next start: {}", s.ToString());
    }
  }
  absl::StatusOr<std::unique_ptr<UnixListener>> listener =
      UnixListener::Bind(data_dir.socket_path());
  if (!listener.ok()) return listener.status();
  out.unix_listener = std::move(*listener);
  out.unix_listener->Start(std::move(unix_acceptor), ::geteuid());
  out.endpoint = data_dir.socket_target();
  if (tcp_port != 0) out.endpoint = absl::StrCat(AdvertisedHost(flags), ":", tcp_port);
  return out;
}

}  // namespace hpo::server
