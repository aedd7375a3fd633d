#include "server/hpod/endpoints.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/address.h"
#include "common/crypto.h"
#include "common/files.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/api/hpo_service.h"
#include "server/auth/auth.h"
#include "spdlog/spdlog.h"

namespace hpo::server {
namespace {

std::shared_ptr<grpc::ServerCredentials> TcpCredentials(const ServerTls& tls) {
  if (tls.clear_text) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
  return grpc::SslServerCredentials(options);
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

absl::StatusOr<ServerTls> LoadServerTls(const HpodFlags& flags, const DataDir& data_dir) {
  ServerTls tls;
  if (flags.insecure_listen) {
    tls.clear_text = true;
    return tls;
  }
  if (!flags.tls_cert.empty()) {
    tls.cert_path = AbsolutePath(flags.tls_cert);
    tls.key_path = AbsolutePath(flags.tls_key);
    absl::StatusOr<std::string> cert = ReadFile(tls.cert_path), key = ReadFile(tls.key_path);
    absl::StatusOr<std::string> ca = flags.tls_ca.empty() ? cert : ReadFile(flags.tls_ca);
    for (const auto* read : {&cert, &key, &ca}) {
      if (!read->ok()) return absl::InvalidArgumentError(read->status().message());
    }
    tls.cert_pem = *cert;
    tls.key_pem = *key;
    tls.ca_pem = *ca;
    return tls;
  }
  std::string dir = data_dir.tls_dir();
  absl::StatusOr<PemPair> ca =
      ReadOrCreateCa(dir, absl::StrCat("hpod CA ", ProcessUserName(), "@", HostName()));
  if (!ca.ok()) return ca.status();
  std::vector<std::string> names = {AdvertisedHost(flags), HostName(), "localhost"};
  std::vector<std::string> ips = HostAddresses();
  for (const char* loopback : {"127.0.0.1", "::1"}) {
    if (std::find(ips.begin(), ips.end(), loopback) == ips.end()) ips.push_back(loopback);
  }
  // A name that is an address goes in as one.
  for (auto it = names.begin(); it != names.end();) {
    in6_addr scratch;
    if (::inet_pton(AF_INET, it->c_str(), &scratch) == 1 ||
        ::inet_pton(AF_INET6, it->c_str(), &scratch) == 1) {
      ips.push_back(*it);
      it = names.erase(it);
    } else {
      ++it;
    }
  }
  absl::StatusOr<PemPair> server = IssueServerCertificate(*ca, names, ips);
  if (!server.ok()) return server.status();
  tls.own = true;
  tls.cert_pem = server->cert;
  tls.key_pem = server->key;
  tls.ca_pem = ca->cert;
  tls.cert_path = dir + "/server.pem";
  tls.key_path = dir + "/server.key";
  for (const auto& [path, pem] :
       {std::pair{tls.key_path, tls.key_pem}, {tls.cert_path, tls.cert_pem}}) {
    if (absl::Status s = WriteFileAtomic(path, pem, 0600); !s.ok()) {
      return absl::UnavailableError(s.message());
    }
  }
  return tls;
}

absl::StatusOr<Endpoints> StartEndpoints(const HpodFlags& flags, const ServerTls& tls,
                                         const DataDir& data_dir,
                                         const std::vector<grpc::Service*>& services) {
  std::shared_ptr<grpc::ServerCredentials> credentials = TcpCredentials(tls);
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
    if (address != "none") builder.AddListeningPort(address, credentials, &tcp_port);
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
