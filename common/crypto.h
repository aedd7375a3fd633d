#pragma once
// What hpod and its callers prove to each other with, from OpenSSL's libcrypto:
//
// - HMAC-SHA256 proofs: a party that holds a secret (an agent's or a trial's token) shows it by
//   a MAC over what it says, so that the secret itself never crosses the network, and the other
//   side can tell hpod's answers from an impostor's whatever the transport.
// - hpod's own TLS identity: a CA made once per data directory (as an SSH host key is), and a
//   server certificate it signs at every start for the names and addresses the host has now.
//   Clients pin the CA (DATA_DIR/tls-ca.pem, or the copy each trial and agent gets at launch).
//
// Thread safety: the functions are thread-safe. Errors: UNAVAILABLE when a file of the CA
// cannot be read or written; INTERNAL when OpenSSL fails (its own error text in the message).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hpo {

// The environment variable that carries the CA to trust (base64 of its PEM, one line) to trials
// and agents with their launch, as a kubeconfig's certificate-authority-data does; HPO_TLS_CA
// names a PEM file instead.
inline constexpr char kTlsCaDataEnv[] = "HPO_TLS_CA_DATA";

// HMAC-SHA256 of `message` under `key`, as 64 lowercase hex characters.
std::string HmacSha256Hex(absl::string_view key, absl::string_view message);

// Base64 (standard alphabet, padded, one line), and back: nullopt-like empty string with false
// for text that is not base64.
std::string Base64Encode(absl::string_view bytes);
bool Base64Decode(absl::string_view text, std::string* bytes);

// A PEM certificate and its PEM private key.
struct PemPair {
  std::string cert;
  std::string key;
};

// The CA of the data directory: `dir`/ca.pem and `dir`/ca.key (mode 0600, in a directory of
// mode 0700), made at first use: an EC P-256 key and a self-signed certificate valid for
// `valid_for`, named after `subject` (who and where: "hpod CA of alice@login1:/home/alice/.hpo").
[[nodiscard]] absl::StatusOr<PemPair> ReadOrCreateCa(const std::string& dir,
                                                     const std::string& subject,
                                                     absl::Duration valid_for = absl::Hours(24 *
                                                                                            3650));

// A server certificate signed by `ca` for `dns_names` and `ips` (textual IPv4 or IPv6
// addresses), valid from an hour ago for `valid_for`, with a fresh EC P-256 key.
[[nodiscard]] absl::StatusOr<PemPair> IssueServerCertificate(
    const PemPair& ca, const std::vector<std::string>& dns_names,
    const std::vector<std::string>& ips, absl::Duration valid_for = absl::Hours(24 * 365));

// This host's addresses (every interface that is up, loopback included), as text.
std::vector<std::string> HostAddresses();

}  // namespace hpo
