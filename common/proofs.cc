#include "common/proofs.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/crypto.h"
#include "common/token.h"

namespace hpo {

std::string ReportProofText(int64_t trial_id, std::optional<int64_t> step, int64_t report_id,
                            std::optional<double> time,
                            const std::map<std::string, double>& metrics) {
  std::string text =
      absl::StrCat("hpo-report/1\n", trial_id, "\n", step ? absl::StrCat(*step) : std::string("-"),
                   "\n", report_id, "\n", time ? absl::StrFormat("%.17g", *time) : "-", "\n");
  for (const auto& [name, value] : metrics) {
    absl::StrAppend(&text, name, "=", absl::StrFormat("%.17g", value), "\n");
  }
  return text;
}

std::string ReportProof(absl::string_view token, int64_t trial_id, std::optional<int64_t> step,
                        int64_t report_id, std::optional<double> time,
                        const std::map<std::string, double>& metrics) {
  return HmacSha256Hex(token, ReportProofText(trial_id, step, report_id, time, metrics));
}

std::string ReportReplyProof(absl::string_view token, absl::string_view request_proof, int action,
                             int64_t step) {
  return HmacSha256Hex(
      token, absl::StrCat("hpo-report-reply/1\n", request_proof, "\n", action, "\n", step, "\n"));
}

std::string ReportRefusalProof(absl::string_view token, absl::string_view request_proof, int code) {
  return HmacSha256Hex(token,
                       absl::StrCat("hpo-report-refusal/1\n", request_proof, "\n", code, "\n"));
}

std::string AgentRequestMac(absl::string_view token, absl::string_view body) {
  return HmacSha256Hex(token, absl::StrCat("hpo-agent-call/1\n", body));
}

std::string AgentReplyMac(absl::string_view token, absl::string_view request_nonce,
                          absl::string_view body) {
  return HmacSha256Hex(token, absl::StrCat("hpo-agent-reply/1\n", request_nonce, "\n", body));
}

bool ProofsEqual(absl::string_view a, absl::string_view b) { return TokensEqual(a, b); }

}  // namespace hpo
