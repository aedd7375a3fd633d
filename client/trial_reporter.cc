#include "client/trial_reporter.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/client.h"
#include "common/duration.h"
#include "common/files.h"
#include "common/fingerprint.h"
#include "common/proofs.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"

namespace hpo::client {
namespace {

// A fingerprint of the trial, the step and the metrics: the same in every process; never 0.
// The same report sent again by a new `hpo report` (one a checkpoint signal killed midway) is
// known by it.
int64_t ContentId(int64_t trial_id, int64_t step, const std::map<std::string, double>& metrics) {
  std::string text = absl::StrCat(trial_id, " ", step);
  for (const auto& [k, v] : metrics) absl::StrAppend(&text, " ", k, "=", absl::StrFormat("%a", v));
  return static_cast<int64_t>(Fingerprint64(text) >> 1) | 1;
}

// hpod's answer says nothing about the report itself: it was not reached, or not in time.
bool Unreached(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsCancelled(s) ||
         absl::IsAborted(s);
}

}  // namespace

absl::Duration ReportTimeout() {
  const char* text = std::getenv("HPO_REPORT_TIMEOUT");
  if (text == nullptr || *text == '\0') return TrialReporter::kDefaultTimeout;
  absl::StatusOr<absl::Duration> d = ParseDuration(text);
  if (!d.ok() || *d <= absl::ZeroDuration()) return TrialReporter::kDefaultTimeout;
  return *d;
}

absl::Duration ReportWait(absl::Duration call_age) {
  const char* text = std::getenv("HPO_REPORT_WAIT");
  if (text != nullptr && *text != '\0') {
    absl::StatusOr<absl::Duration> d = ParseDuration(text);
    if (d.ok() && *d >= absl::ZeroDuration()) return *d;
  }
  return std::max(kReportCallLimit - call_age, absl::ZeroDuration());
}

absl::StatusOr<std::unique_ptr<TrialReporter>> TrialReporter::FromEnvironment() {
  const char* endpoint = std::getenv("HPO_ENDPOINT");
  const char* id = std::getenv("HPO_TRIAL_ID");
  const char* token = std::getenv("HPO_TRIAL_TOKEN");
  int64_t trial_id = 0;
  if (endpoint == nullptr || id == nullptr || token == nullptr ||
      !absl::SimpleAtoi(id, &trial_id)) {
    return absl::FailedPreconditionError(
        "not inside an hpod trial: HPO_ENDPOINT, HPO_TRIAL_ID and HPO_TRIAL_TOKEN must be set");
  }
  const char* dir = std::getenv("HPO_TRIAL_DIR");
  const char* endpoint_file = std::getenv("HPO_ENDPOINT_FILE");
  ASSIGN_OR_RETURN(std::string ca, TlsCaFromEnvironment());
  return std::make_unique<TrialReporter>(endpoint, trial_id, token, dir != nullptr ? dir : "", ca,
                                         endpoint_file != nullptr ? endpoint_file : "");
}

TrialReporter::TrialReporter(const std::string& endpoint, int64_t trial_id, std::string token,
                             const std::string& trial_dir, const std::string& tls_ca_pem,
                             std::string endpoint_file)
    : endpoint_(endpoint),
      endpoint_file_(std::move(endpoint_file)),
      tls_ca_pem_(tls_ca_pem),
      channel_(ComputeNodeChannel(endpoint, tls_ca_pem)),
      stub_(v1::ReportService::NewStub(channel_)),
      trial_id_(trial_id),
      token_(std::move(token)) {
  if (trial_dir.empty()) return;
  journal_.emplace(trial_dir);
  std::lock_guard lock(mu_);
  cursor_ = journal_->ReadCursor();
  // What an earlier reporter of the trial left waiting goes first.
  if (absl::StatusOr<std::vector<JournalEntry>> left = journal_->Unsent(); left.ok()) {
    pending_.assign(left->begin(), left->end());
  }
}

absl::Status TrialReporter::Record(int64_t step, const std::map<std::string, double>& metrics) {
  for (const auto& [name, value] : metrics) {
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric '", name, "' is ", value, "; only finite values are stored"));
    }
  }
  JournalEntry e;
  if (step >= 0) e.step = step;
  e.metrics = metrics;
  e.time = absl::Now();
  std::lock_guard lock(mu_);
  // One id for the report wherever it goes (see ContentId); a report without a step has a
  // random one, kept with it in the journal.
  e.id = step >= 0 ? ContentId(trial_id_, step, metrics)
                   : absl::Uniform<int64_t>(bitgen_, 1, std::numeric_limits<int64_t>::max());
  if (journal_) {
    absl::Status s = journal_->Append(e);
    if (absl::IsInvalidArgument(s)) return s;
    // Not written (a full or read-only disk): it waits in memory, and the journal's cursor stays.
    if (!s.ok()) e.end = 0;
  } else if (absl::StatusOr<std::string> line = FormatJournalLine(e); !line.ok()) {
    return line.status();  // the same rule for names with a journal or without
  }
  pending_.push_back(std::move(e));
  return absl::OkStatus();
}

void TrialReporter::Refresh() {
  if (!journal_) return;
  absl::StatusOr<std::vector<JournalEntry>> left = journal_->Unsent();
  std::lock_guard lock(mu_);
  if (!left.ok()) return;
  std::set<int64_t> have;
  for (const JournalEntry& e : pending_) have.insert(e.id);
  for (JournalEntry& e : *left) {
    if (e.end > cursor_.sent && have.insert(e.id).second) pending_.push_back(std::move(e));
  }
}

void TrialReporter::Keep(JournalEntry entry) {
  entry.end = 0;
  std::lock_guard lock(mu_);
  pending_.push_back(std::move(entry));
}

int TrialReporter::pending() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(pending_.size());
}

std::vector<std::string> TrialReporter::InMemoryLines() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const JournalEntry& e : pending_) {
    if (e.end != 0) continue;
    absl::StatusOr<std::string> line = FormatJournalLine(e);
    if (line.ok()) out.emplace_back(absl::StripTrailingAsciiWhitespace(*line));
  }
  return out;
}

absl::Time TrialReporter::retry_after() const {
  std::lock_guard lock(mu_);
  return cursor_.backoff > absl::ZeroDuration() ? cursor_.retry_after : absl::InfinitePast();
}

v1::ReportRequest TrialReporter::Request(const JournalEntry& e) const {
  v1::ReportRequest req;
  req.set_trial_id(trial_id_);
  if (e.step) req.set_step(*e.step);
  for (const auto& [k, v] : e.metrics) (*req.mutable_metrics())[k] = v;
  req.set_report_id(e.id);
  double made = absl::ToDoubleSeconds(e.time - absl::UnixEpoch());
  req.set_time(made);
  // The token never leaves the trial: the report carries a proof of it, and hpod's answer one of
  // its own, so that whatever answers at hpod's address while hpod is away learns nothing and is
  // not believed.
  req.set_proof(ReportProof(token_, trial_id_, e.step, e.id, made, e.metrics));
  return req;
}

absl::Status TrialReporter::Refusal(const grpc::Status& s, const grpc::ClientContext& ctx,
                                    const std::string& request_proof) const {
  absl::Status status = FromGrpc(s);
  if (Unreached(status)) return status;
  const auto& trailing = ctx.GetServerTrailingMetadata();
  auto proof = trailing.find(kRefusalProofKey);
  if (proof != trailing.end() &&
      ProofsEqual(std::string(proof->second.data(), proof->second.size()),
                  ReportRefusalProof(token_, request_proof, static_cast<int>(s.error_code())))) {
    return status;  // hpod's own refusal
  }
  return absl::UnavailableError(absl::StrCat("the server at ", endpoint_,
                                             " refused the report without proof that it is hpod (",
                                             status.message(), "); the report waits"));
}

absl::Status TrialReporter::CheckReply(const v1::ReportResponse& resp,
                                       const std::string& request_proof) const {
  if (ProofsEqual(resp.proof(),
                  ReportReplyProof(token_, request_proof, resp.action(), resp.step()))) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat(
      "the server at ", endpoint_, " answered without proof that it is hpod; the report waits"));
}

absl::StatusOr<v1::ReportResponse> TrialReporter::Send(const JournalEntry& e,
                                                       absl::Duration timeout) {
  v1::ReportRequest req = Request(e);
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(timeout));
  v1::ReportResponse resp;
  grpc::Status s = stub_->Report(&ctx, req, &resp);
  if (!s.ok()) return Refusal(s, ctx, req.proof());
  RETURN_IF_ERROR(CheckReply(resp, req.proof()));
  return resp;
}

TrialReporter::BatchReply TrialReporter::SendBatch(const std::vector<JournalEntry>& batch,
                                                   absl::Duration timeout) {
  BatchReply out;
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(timeout + absl::Milliseconds(20) * static_cast<int>(batch.size())));
  std::unique_ptr<grpc::ClientReaderWriter<v1::ReportRequest, v1::ReportResponse>> stream =
      stub_->ReportStream(&ctx);
  std::vector<std::string> proofs;
  for (const JournalEntry& e : batch) {
    v1::ReportRequest req = Request(e);
    proofs.push_back(req.proof());
    if (!stream->Write(req)) break;
  }
  stream->WritesDone();
  v1::ReportResponse resp;
  while (out.replies.size() < proofs.size() && stream->Read(&resp)) {
    if (absl::Status s = CheckReply(resp, proofs[out.replies.size()]); !s.ok()) {
      ctx.TryCancel();
      out.status = s;
      break;
    }
    out.replies.push_back(resp);
  }
  grpc::Status s = stream->Finish();
  if (out.status.ok() && !s.ok()) {
    out.status = Refusal(s, ctx, proofs[std::min(out.replies.size(), proofs.size() - 1)]);
  } else if (out.status.ok() && out.replies.size() < proofs.size()) {
    out.status = absl::UnavailableError("hpod ended the report stream early");
  }
  return out;
}

void TrialReporter::Done(const JournalEntry& e) {
  pending_.pop_front();
  bool moved = journal_ && e.end > cursor_.sent;
  bool was_missing = cursor_.backoff > absl::ZeroDuration();
  if (moved) cursor_.sent = e.end;
  cursor_.backoff = absl::ZeroDuration();
  cursor_.retry_after = absl::InfinitePast();
  if (journal_ && (moved || was_missing)) (void)journal_->WriteCursor(cursor_);
}

void TrialReporter::Missed(absl::Duration took) {
  // A refusal to connect costs nothing to try again; only calls that ran into their deadline
  // (a host that does not answer at all) make the wait grow.
  cursor_.backoff = cursor_.backoff > absl::ZeroDuration() && took >= kFirstBackoff
                        ? std::min(cursor_.backoff * 2, kMaxBackoff)
                        : kFirstBackoff;
  cursor_.retry_after = absl::Now() + cursor_.backoff;
  if (journal_) (void)journal_->WriteCursor(cursor_);
}

void TrialReporter::Reconnect() {
  reconnect_ = false;
  channel_ = ComputeNodeChannel(endpoint_, tls_ca_pem_);
  stub_ = v1::ReportService::NewStub(channel_);
}

bool TrialReporter::FollowEndpoint() {
  if (endpoint_file_.empty()) return false;
  absl::StatusOr<std::string> text = ReadFile(endpoint_file_);
  if (!text.ok()) return false;
  std::string now(absl::StripAsciiWhitespace(*text));
  if (now.empty() || now == endpoint_) return false;
  endpoint_ = now;
  Reconnect();
  return true;
}

absl::StatusOr<TrialReporter::Delivery> TrialReporter::Deliver(absl::Duration timeout, bool now) {
  Delivery out;
  std::lock_guard delivering(deliver_mu_);
  std::unique_lock lock(mu_);
  if (!now && cursor_.backoff > absl::ZeroDuration() && absl::Now() < cursor_.retry_after) {
    out.pending = static_cast<int>(pending_.size());
    out.in_memory = InMemory();
    return out;
  }
  if (reconnect_) Reconnect();
  bool followed = false;
  // hpod was not reached (`why`): once, it may listen elsewhere now (it moved to another node,
  // or another port); else the next try is on a new connection, after the wait. True: try again.
  auto unreached = [&](const absl::Status& why, absl::Time sent) {
    if (!followed && FollowEndpoint()) {
      followed = true;
      return true;
    }
    reconnect_ = true;
    Missed(absl::Now() - sent);
    out.missed = why;
    return false;
  };
  auto answered = [&](const v1::ReportResponse& reply) {
    ++out.delivered;
    out.step = reply.step();
    if (reply.action() == v1::ReportResponse::ACTION_STOP) {
      out.stop = true;
      out.reason = reply.reason();
    }
  };
  while (!pending_.empty()) {
    if (pending_.size() > 1) {
      // A backlog goes over one stream, in batches.
      std::vector<JournalEntry> batch(pending_.begin(),
                                      pending_.begin() + std::min<size_t>(pending_.size(), kBatch));
      lock.unlock();
      absl::Time sent = absl::Now();
      BatchReply reply = SendBatch(batch, timeout);
      lock.lock();
      size_t taken = 0;
      for (; taken < reply.replies.size(); ++taken) {
        if (pending_.empty() || pending_.front().id != batch[taken].id) break;
        Done(batch[taken]);
        answered(reply.replies[taken]);
      }
      if (reply.status.ok()) continue;
      if (Unreached(reply.status)) {
        if (unreached(reply.status, sent)) continue;
        break;
      }
      // Refused for good: it is not sent again.
      if (taken < batch.size() && !pending_.empty() && pending_.front().id == batch[taken].id) {
        Done(batch[taken]);
      }
      return reply.status;
    }
    JournalEntry e = pending_.front();
    lock.unlock();
    absl::Time sent = absl::Now();
    absl::StatusOr<v1::ReportResponse> reply = Send(e, timeout);
    lock.lock();
    // Only one delivery at a time takes reports off the front; another may have taken this one.
    if (pending_.empty() || pending_.front().id != e.id) continue;
    if (!reply.ok() && Unreached(reply.status())) {
      if (unreached(reply.status(), sent)) continue;
      break;
    }
    Done(e);
    if (!reply.ok()) return reply.status();  // refused for good: it is not sent again
    answered(*reply);
  }
  out.pending = static_cast<int>(pending_.size());
  out.in_memory = InMemory();
  return out;
}

int TrialReporter::InMemory() const {
  int n = 0;
  for (const JournalEntry& e : pending_) n += e.end == 0 ? 1 : 0;
  return n;
}

absl::StatusOr<TrialReporter::Delivery> TrialReporter::Report(
    int64_t step, const std::map<std::string, double>& metrics, absl::Duration timeout) {
  RETURN_IF_ERROR(Record(step, metrics));
  return Deliver(timeout);
}

}  // namespace hpo::client
