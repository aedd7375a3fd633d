#include "common/crypto.h"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "absl/strings/match.h"
#include "common/files.h"
#include "common/proofs.h"
#include "gtest/gtest.h"

namespace hpo {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/hpo-crypto-test.XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

int Mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return static_cast<int>(st.st_mode & 07777);
}

// Whether `cert_pem` verifies against `ca_pem` and names `host` (a DNS name or an IP address).
bool Verifies(const std::string& ca_pem, const std::string& cert_pem, const std::string& host) {
  auto read = [](const std::string& pem) {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    return std::unique_ptr<X509, decltype(&X509_free)>(x, X509_free);
  };
  auto ca = read(ca_pem);
  auto cert = read(cert_pem);
  if (ca == nullptr || cert == nullptr) return false;
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca.get());
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, cert.get(), nullptr);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  bool is_ip = absl::StrContains(host, ':') || host.find_first_not_of("0123456789.") == host.npos;
  if (is_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  } else {
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  }
  bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return ok;
}

TEST(Crypto, HmacSha256MatchesTheRfcVector) {
  // RFC 4231, test case 2.
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Crypto, Base64RoundTrips) {
  for (std::string text : {"", "a", "ab", "abc", "abcd", "-----BEGIN CERTIFICATE-----\nMIIB\n"}) {
    std::string back;
    ASSERT_TRUE(Base64Decode(Base64Encode(text), &back)) << text;
    EXPECT_EQ(back, text);
  }
  EXPECT_EQ(Base64Encode("hpod"), "aHBvZA==");
  std::string out;
  EXPECT_FALSE(Base64Decode("not base64!", &out));
}

TEST(Crypto, TheCaIsMadeOncePrivatelyAndSignsServerCertificatesForTheirNames) {
  TempDir tmp;
  std::string dir = tmp.path() + "/tls";
  absl::StatusOr<PemPair> ca = ReadOrCreateCa(dir, "hpod CA test");
  ASSERT_TRUE(ca.ok()) << ca.status();
  EXPECT_EQ(Mode(dir), 0700);
  EXPECT_EQ(Mode(dir + "/ca.key"), 0600);
  EXPECT_EQ(Mode(dir + "/ca.pem"), 0600);
  absl::StatusOr<PemPair> again = ReadOrCreateCa(dir, "hpod CA test");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cert, ca->cert);  // kept: clients that pinned it go on trusting hpod

  absl::StatusOr<PemPair> server =
      IssueServerCertificate(*ca, {"node7", "localhost"}, {"127.0.0.1", "::1", "10.1.2.3"});
  ASSERT_TRUE(server.ok()) << server.status();
  for (const char* host : {"node7", "localhost", "127.0.0.1", "::1", "10.1.2.3"}) {
    EXPECT_TRUE(Verifies(ca->cert, server->cert, host)) << host;
  }
  EXPECT_FALSE(Verifies(ca->cert, server->cert, "node8"));
  EXPECT_FALSE(Verifies(ca->cert, server->cert, "10.1.2.4"));

  // Another CA (an impostor's own) vouches for nothing of this one's.
  TempDir other;
  absl::StatusOr<PemPair> stranger = ReadOrCreateCa(other.path() + "/tls", "someone else");
  ASSERT_TRUE(stranger.ok());
  absl::StatusOr<PemPair> forged = IssueServerCertificate(*stranger, {"node7"}, {"127.0.0.1"});
  ASSERT_TRUE(forged.ok());
  EXPECT_FALSE(Verifies(ca->cert, forged->cert, "node7"));
  EXPECT_FALSE(Verifies(ca->cert, forged->cert, "127.0.0.1"));
}

TEST(Crypto, AMismatchedCaIsAnErrorThatSaysWhatToDo) {
  TempDir a, b;
  ASSERT_TRUE(ReadOrCreateCa(a.path(), "a").ok());
  ASSERT_TRUE(ReadOrCreateCa(b.path(), "b").ok());
  std::filesystem::copy_file(b.path() + "/ca.key", a.path() + "/ca.key",
                             std::filesystem::copy_options::overwrite_existing);
  absl::StatusOr<PemPair> ca = ReadOrCreateCa(a.path(), "a");
  ASSERT_FALSE(ca.ok());
  EXPECT_TRUE(absl::StrContains(ca.status().message(), "remove both")) << ca.status();
}

TEST(Proofs, TheReportTextIsFixed) {
  // The Python client builds the same text (tests/python/test_client.py checks this vector).
  EXPECT_EQ(ReportProofText(7, 3, 42, 1700000000.25, {{"val_acc", 0.91}, {"loss", 1.0 / 3}}),
            "hpo-report/"
            "1\n7\n3\n42\n1700000000.25\nloss=0.33333333333333331\nval_acc=0.91000000000000003\n");
  EXPECT_EQ(ReportProofText(7, std::nullopt, 1, std::nullopt, {{"x", -0.0}}),
            "hpo-report/1\n7\n-\n1\n-\nx=-0\n");
  EXPECT_EQ(ReportProof("token", 7, 3, 42, 1700000000.25, {{"val_acc", 0.91}, {"loss", 1.0 / 3}}),
            HmacSha256Hex("token", ReportProofText(7, 3, 42, 1700000000.25,
                                                   {{"val_acc", 0.91}, {"loss", 1.0 / 3}})));
  // Anything changed, another proof.
  EXPECT_NE(ReportProof("token", 7, 3, 42, 1.0, {{"loss", 0.5}}),
            ReportProof("token", 7, 4, 42, 1.0, {{"loss", 0.5}}));
  EXPECT_NE(ReportProof("token", 7, 3, 42, 1.0, {{"loss", 0.5}}),
            ReportProof("other", 7, 3, 42, 1.0, {{"loss", 0.5}}));
}

TEST(Proofs, AnAnswerProvesItselfOverTheQuestion) {
  std::string a = AgentReplyMac("tok", "nonce-1", "body");
  EXPECT_NE(a, AgentReplyMac("tok", "nonce-2", "body"));  // an old answer does not fit
  EXPECT_NE(a, AgentReplyMac("tok", "nonce-1", "bodY"));
  EXPECT_NE(a, AgentReplyMac("kot", "nonce-1", "body"));
  EXPECT_NE(AgentRequestMac("tok", "body"), AgentReplyMac("tok", "", "body"));
  EXPECT_TRUE(ProofsEqual(a, AgentReplyMac("tok", "nonce-1", "body")));
}

}  // namespace
}  // namespace hpo
