#pragma once
// TrialReporter: reporting from inside a trial (HPO_ENDPOINT, HPO_TRIAL_ID, HPO_TRIAL_TOKEN,
// HPO_TRIAL_DIR, HPO_ENDPOINT_FILE), in a way that never stalls or fails the trial for hpod's
// absence, and that follows hpod when it comes back at another address.
//
// Each report is first appended to the trial's journal (common/report_journal.h), then handed
// to hpod with a deadline. While hpod does not answer, reports wait in the journal and go, in
// order, with the next delivery that reaches it; after a miss the reporter waits before it tries
// again: 1 s while hpod's host refuses the connection (hpod is down), doubling up to 30 s while
// calls run into their deadline (the host does not answer at all). The wait is kept in the
// journal's cursor, so that one `hpo report` after another keeps the trial's pace. Reports still
// waiting when the trial ends are read by hpod from the journal. Every report has an id of its own,
// so hpod stores each once, whichever way it came. A trial without a directory (one that something
// else runs, `backend: external`) keeps its waiting reports in memory instead.
//
// Thread safety: Record and Deliver may be called from different threads (`hpo exec` records
// as its command prints and delivers on a thread of its own).
// Errors: a report hpod refuses (a bad metric, a wrong token, a trial that ended) comes back
// from Deliver as hpod said it, and is not sent again; hpod's absence is never an error.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/report_journal.h"
#include "hpo/v1/hpo.grpc.pb.h"

namespace hpo::client {

class TrialReporter {
 public:
  // How long one call to hpod may take: $HPO_REPORT_TIMEOUT, else this.
  static constexpr absl::Duration kDefaultTimeout = absl::Seconds(5);
  static constexpr absl::Duration kFirstBackoff = absl::Seconds(1);
  static constexpr absl::Duration kMaxBackoff = absl::Seconds(30);

  // FAILED_PRECONDITION when the environment is not a trial's (or $HPO_TLS_CA cannot be read).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TrialReporter>> FromEnvironment();
  // `trial_dir` empty: no journal. With `tls_ca_pem`, over TLS trusting that CA. With
  // `endpoint_file` (hpod's DATA_DIR/endpoint, $HPO_ENDPOINT_FILE), a miss looks there for
  // where hpod listens now, and follows it.
  TrialReporter(const std::string& endpoint, int64_t trial_id, std::string token,
                const std::string& trial_dir = "", const std::string& tls_ca_pem = "",
                std::string endpoint_file = "");

  struct Delivery {
    int delivered = 0;  // reports hpod stored in this call
    int pending = 0;    // reports still waiting
    int in_memory = 0;  // of those, the ones no journal keeps (gone when this process ends)
    bool stop = false;  // hpod asked the trial to stop
    std::string reason;
    std::optional<int64_t> step;  // the step hpod stored the last delivered report under
    absl::Status missed;          // why hpod was not reached (OK when it was, or not tried)
  };

  // Records one report (step < 0: the trial's last step + 1). INVALID_ARGUMENT for a metric
  // name a journal cannot hold or a value that is not finite (hpod would refuse it, and its
  // refusal may come after the trial stopped listening); a journal that cannot be written keeps
  // the report in memory.
  [[nodiscard]] absl::Status Record(int64_t step, const std::map<std::string, double>& metrics);
  // Hands the waiting reports to hpod, oldest first, each call waiting at most `timeout`. While
  // the wait after a miss lasts it returns at once, unless `now`.
  [[nodiscard]] absl::StatusOr<Delivery> Deliver(absl::Duration timeout, bool now = false);
  // Takes in what other processes of the trial appended to its journal since (hpo report's
  // sender: the trainer's own `hpo report` calls record, the sender delivers).
  void Refresh();
  // A report another process recorded that no journal keeps (it could not be written): it
  // waits here, in memory.
  void Keep(JournalEntry entry);
  // Reports waiting.
  int pending() const;
  // The waiting reports no journal keeps, as journal lines (for Keep in another process).
  std::vector<std::string> InMemoryLines() const;
  // Record, then Deliver.
  [[nodiscard]] absl::StatusOr<Delivery> Report(int64_t step,
                                                const std::map<std::string, double>& metrics,
                                                absl::Duration timeout);
  // When the next Deliver will try again (InfinitePast: at once).
  absl::Time retry_after() const;
  bool journaled() const { return journal_.has_value(); }
  std::string journal_path() const { return journal_ ? journal_->path() : ""; }
  int64_t trial_id() const { return trial_id_; }

 private:
  // A backlog goes to hpod over one ReportStream, this many reports at a time.
  static constexpr size_t kBatch = 256;
  // The request for `e`, with its proof.
  v1::ReportRequest Request(const JournalEntry& e) const;
  // A call's failure: hpod's own refusal (its proof over `request_proof` checked), hpod not
  // reached, or UNAVAILABLE for a refusal without proof.
  absl::Status Refusal(const grpc::Status& s, const grpc::ClientContext& ctx,
                       const std::string& request_proof) const;
  // OK when `resp` carries hpod's proof over `request_proof`.
  absl::Status CheckReply(const v1::ReportResponse& resp, const std::string& request_proof) const;
  // One report to hpod; OK or the reason it did not get there or was refused.
  [[nodiscard]] absl::StatusOr<v1::ReportResponse> Send(const JournalEntry& e,
                                                        absl::Duration timeout);
  // Several over one stream: hpod's answers, in order, for as many as it answered, and why the
  // rest were not (OK: every one was).
  struct BatchReply {
    std::vector<v1::ReportResponse> replies;
    absl::Status status;
  };
  BatchReply SendBatch(const std::vector<JournalEntry>& batch, absl::Duration timeout);
  // hpod has it (or refused it for good): it waits no more.
  void Done(const JournalEntry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // hpod was not reached; the call took `took`.
  void Missed(absl::Duration took) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int InMemory() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // After a miss: true when the endpoint file names another address, now this one's.
  bool FollowEndpoint();
  // A new channel to endpoint_.
  void Reconnect();
  // After a miss the next call goes over a new channel. It is made then, not at the miss: a
  // process that ends after its miss does not wait for a channel it never uses.
  bool reconnect_ = false;  // guarded by deliver_mu_

  std::mutex deliver_mu_;  // one delivery at a time (it may replace the channel)
  std::string endpoint_, endpoint_file_, tls_ca_pem_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ReportService::Stub> stub_;
  int64_t trial_id_;
  std::string token_;
  std::optional<ReportJournal> journal_;
  mutable std::mutex mu_;
  std::deque<JournalEntry> pending_ ABSL_GUARDED_BY(mu_);
  JournalCursor cursor_ ABSL_GUARDED_BY(mu_);
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);  // ids of reports without a step
};

// $HPO_REPORT_TIMEOUT (a duration) or TrialReporter::kDefaultTimeout.
absl::Duration ReportTimeout();
// `hpo report` as a whole (the process's start, loading included, to its end) stays under this
// while hpod answers slowly or not at all: its look for hpod's answer ends this long after the
// process started.
inline constexpr absl::Duration kReportCallLimit = absl::Milliseconds(70);
// How long a trainer's report waits for hpod's answer before the trial's sender takes it over:
// $HPO_REPORT_WAIT (a duration such as 50ms; 0s: not at all), else what is left of
// kReportCallLimit for a call that began `call_age` ago (zero when nothing is).
absl::Duration ReportWait(absl::Duration call_age);

}  // namespace hpo::client
