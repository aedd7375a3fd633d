#pragma once
// The proofs hpod and the programs it launches exchange instead of their secrets, so that a
// process that answers at hpod's address while hpod is away (or anyone who reads a clear-text
// connection) learns no token and cannot give an order: each side shows that it holds the token
// of the trial or the allocation by an HMAC-SHA256 (common/crypto.h) over what it says, and the
// answer's proof covers the question's, so that an old answer cannot be replayed.
//
//   a trial's report     ReportProof(trial token, the report's fields), in the request
//   hpod's answer        ReportReplyProof(trial token, the request's proof, action, step)
//   hpod's refusal       ReportRefusalProof(trial token, the request's proof, status code)
//   an agent's call      AgentRequestMac(agent token, the serialized AgentSyncRequest)
//   hpod's answer        AgentReplyMac(agent token, the request's nonce, the serialized reply)
//
// The texts are defined here once; the Python client (client/python/hpo/reporting.py) builds the
// report ones the same way, and a test checks that the two agree.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace hpo {

// What a report's proof covers, one field a line: "hpo-report/1", the trial, the step ("-"
// without one), the report's id, its time ("-" without one), then "name=value" for each metric
// in name order; numbers as printf's %.17g writes them.
std::string ReportProofText(int64_t trial_id, std::optional<int64_t> step, int64_t report_id,
                            std::optional<double> time,
                            const std::map<std::string, double>& metrics);
std::string ReportProof(absl::string_view token, int64_t trial_id, std::optional<int64_t> step,
                        int64_t report_id, std::optional<double> time,
                        const std::map<std::string, double>& metrics);
// hpod's answer to a report that came with `request_proof`: its action (ReportResponse.Action's
// number) and the step it stored the report under.
std::string ReportReplyProof(absl::string_view token, absl::string_view request_proof, int action,
                             int64_t step);
// hpod's refusal of a report that came with `request_proof` (its gRPC status code), sent as the
// call's trailing metadata kRefusalProofKey: a trial drops a report only on hpod's word.
std::string ReportRefusalProof(absl::string_view token, absl::string_view request_proof, int code);
inline constexpr char kRefusalProofKey[] = "hpo-refusal-proof";

std::string AgentRequestMac(absl::string_view token, absl::string_view body);
std::string AgentReplyMac(absl::string_view token, absl::string_view request_nonce,
                          absl::string_view body);

// Proofs compare in constant time (TokensEqual).
bool ProofsEqual(absl::string_view a, absl::string_view b);

}  // namespace hpo
