#include "common/crypto.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"

namespace hpo {
namespace {

struct Free {
  void operator()(X509* x) const { X509_free(x); }
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
  void operator()(BIO* b) const { BIO_free(b); }
  void operator()(BIGNUM* b) const { BN_free(b); }
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};
template <typename T>
using Owned = std::unique_ptr<T, Free>;

// OpenSSL's own account of what failed, after `what`.
absl::Status OpenSslError(absl::string_view what) {
  std::string detail;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    absl::StrAppend(&detail, detail.empty() ? "" : "; ", buf);
  }
  return absl::InternalError(absl::StrCat(what, detail.empty() ? "" : absl::StrCat(": ", detail)));
}

std::string ToPem(X509* cert) {
  Owned<BIO> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string ToPem(EVP_PKEY* key) {
  Owned<BIO> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Owned<X509> CertFromPem(const std::string& pem) {
  Owned<BIO> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Owned<X509>(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

Owned<EVP_PKEY> KeyFromPem(const std::string& pem) {
  Owned<BIO> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Owned<EVP_PKEY>(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

// X.509 caps a common name at 64 characters.
std::string CommonName(const std::string& text) { return text.substr(0, 64); }

absl::Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  Owned<X509_EXTENSION> ext(X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str()));
  if (ext == nullptr || X509_add_ext(cert, ext.get(), -1) != 1) {
    return OpenSslError(absl::StrCat("certificate extension ", OBJ_nid2sn(nid), " ", value));
  }
  return absl::OkStatus();
}

// A certificate for `key` named `common_name`, valid from an hour ago for `valid_for`, signed by
// `issuer_key` as `issuer` (nullptr: self-signed), with `extensions` (nid, value) in order.
absl::StatusOr<Owned<X509>> MakeCertificate(EVP_PKEY* key, const std::string& common_name,
                                            X509* issuer, EVP_PKEY* issuer_key,
                                            absl::Duration valid_for,
                                            const std::vector<std::pair<int, std::string>>& ext) {
  Owned<X509> cert(X509_new());
  Owned<BIGNUM> serial(BN_new());
  if (cert == nullptr || serial == nullptr || X509_set_version(cert.get(), X509_VERSION_3) != 1 ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr ||
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), absl::ToInt64Seconds(valid_for)) == nullptr ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return OpenSslError("making a certificate");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  std::string cn = CommonName(common_name);
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1 ||
      X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name) !=
          1) {
    return OpenSslError("naming a certificate");
  }
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer != nullptr ? issuer : cert.get(), cert.get(), nullptr, nullptr, 0);
  for (const auto& [nid, value] : ext) {
    if (absl::Status s = AddExtension(cert.get(), &ctx, nid, value); !s.ok()) return s;
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) {
    return OpenSslError("signing a certificate");
  }
  return cert;
}

Owned<EVP_PKEY> NewKey() { return Owned<EVP_PKEY>(EVP_EC_gen("P-256")); }

// Whether `cert` is still valid a day from now.
bool StillValid(X509* cert) {
  time_t tomorrow = ::time(nullptr) + 24 * 3600;
  return X509_cmp_time(X509_get0_notAfter(cert), &tomorrow) > 0;
}

}  // namespace

std::string HmacSha256Hex(absl::string_view key, absl::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &n);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (unsigned int i = 0; i < n; ++i) {
    out.push_back(kHex[mac[i] >> 4]);
    out.push_back(kHex[mac[i] & 15]);
  }
  return out;
}

std::string Base64Encode(absl::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

bool Base64Decode(absl::string_view text, std::string* bytes) {
  if (text.size() % 4 != 0) return false;
  std::string out(3 * text.size() / 4 + 1, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return false;
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t pad = 0;
  for (size_t i = text.size(); i > 0 && text[i - 1] == '=' && pad < 2; --i) ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  *bytes = std::move(out);
  return true;
}

absl::StatusOr<PemPair> ReadOrCreateCa(const std::string& dir, const std::string& subject,
                                       absl::Duration valid_for) {
  std::string cert_path = dir + "/ca.pem", key_path = dir + "/ca.key";
  if (::access(cert_path.c_str(), F_OK) == 0 || ::access(key_path.c_str(), F_OK) == 0) {
    absl::StatusOr<std::string> cert = ReadFile(cert_path), key = ReadFile(key_path);
    if (!cert.ok()) return absl::UnavailableError(cert.status().message());
    if (!key.ok()) return absl::UnavailableError(key.status().message());
    Owned<X509> x = CertFromPem(*cert);
    Owned<EVP_PKEY> k = KeyFromPem(*key);
    if (x == nullptr || k == nullptr || X509_check_private_key(x.get(), k.get()) != 1) {
      return OpenSslError(absl::StrCat(cert_path, " and ", key_path,
                                       " are not a certificate and its key (remove both, and "
                                       "hpod makes a new CA: clients then trust the new one)"));
    }
    if (StillValid(x.get())) return PemPair{*cert, *key};
    // Expired: a new one below; clients read tls-ca.pem again at their next connection.
  }
  if (absl::Status s = MakeDirs(dir, 0700); !s.ok()) return absl::UnavailableError(s.message());
  ::chmod(dir.c_str(), 0700);
  Owned<EVP_PKEY> key = NewKey();
  if (key == nullptr) return OpenSslError("making the CA's key");
  absl::StatusOr<Owned<X509>> cert =
      MakeCertificate(key.get(), subject, nullptr, nullptr, valid_for,
                      {{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                       {NID_key_usage, "critical,keyCertSign,cRLSign"},
                       {NID_subject_key_identifier, "hash"}});
  if (!cert.ok()) return cert.status();
  PemPair out{ToPem(cert->get()), ToPem(key.get())};
  // The key first: a certificate without its key would be unusable.
  if (absl::Status s = WriteFileAtomic(key_path, out.key, 0600); !s.ok()) {
    return absl::UnavailableError(s.message());
  }
  if (absl::Status s = WriteFileAtomic(cert_path, out.cert, 0600); !s.ok()) {
    return absl::UnavailableError(s.message());
  }
  return out;
}

absl::StatusOr<PemPair> IssueServerCertificate(const PemPair& ca,
                                               const std::vector<std::string>& dns_names,
                                               const std::vector<std::string>& ips,
                                               absl::Duration valid_for) {
  Owned<X509> ca_cert = CertFromPem(ca.cert);
  Owned<EVP_PKEY> ca_key = KeyFromPem(ca.key);
  if (ca_cert == nullptr || ca_key == nullptr) return OpenSslError("reading the CA");
  Owned<EVP_PKEY> key = NewKey();
  if (key == nullptr) return OpenSslError("making the server's key");
  std::vector<std::string> alt;
  std::set<std::string> seen;
  for (const std::string& n : dns_names) {
    if (!n.empty() && seen.insert("DNS:" + n).second) alt.push_back("DNS:" + n);
  }
  for (const std::string& ip : ips) {
    if (!ip.empty() && seen.insert("IP:" + ip).second) alt.push_back("IP:" + ip);
  }
  if (alt.empty()) return absl::InvalidArgumentError("a server certificate needs a name");
  absl::StatusOr<Owned<X509>> cert =
      MakeCertificate(key.get(), dns_names.empty() ? ips.front() : dns_names.front(), ca_cert.get(),
                      ca_key.get(), valid_for,
                      {{NID_basic_constraints, "critical,CA:FALSE"},
                       {NID_key_usage, "critical,digitalSignature,keyAgreement"},
                       {NID_ext_key_usage, "serverAuth"},
                       {NID_subject_key_identifier, "hash"},
                       {NID_authority_key_identifier, "keyid:always"},
                       {NID_subject_alt_name, absl::StrJoin(alt, ",")}});
  if (!cert.ok()) return cert.status();
  return PemPair{ToPem(cert->get()), ToPem(key.get())};
}

std::vector<std::string> HostAddresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || (a->ifa_flags & IFF_UP) == 0) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
      ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(a->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;  // needs a scope: no use in a name
      ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    } else {
      continue;
    }
    if (std::find(out.begin(), out.end(), text) == out.end()) out.push_back(text);
  }
  ::freeifaddrs(list);
  return out;
}

}  // namespace hpo
