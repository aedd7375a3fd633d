// libFuzzer target: every request the API takes, as the controller validates and serves it. The
// first byte picks the request type, the rest is its protobuf encoding. One TestDaemon
// (tests/fakes: controller, store in a temp dir, simulated backend, virtual clock) lives across
// inputs, so sweeps and trials submitted by earlier inputs are there to be reported on,
// canceled, listed.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tests/fakes/test_daemon.h"

namespace {

using namespace hpo;  // NOLINT

template <typename T>
bool Parse(T& msg, const uint8_t* data, size_t size) {
  return msg.ParseFromArray(data, static_cast<int>(size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fakes::TestDaemon* d = [] {  // lives for the whole run
    fakes::TestDaemon::Options o;
    o.dir_prefix = "hpo-fuzz";
    return new fakes::TestDaemon(o);
  }();
  if (size < 1) return 0;
  uint8_t kind = data[0] % 14;
  ++data;
  --size;
  server::Controller& c = d->controller();
  switch (kind) {
    case 0: {
      v1::ValidateSweepRequest r;
      if (Parse(r, data, size)) (void)c.Validate(server::Controller::AllowedForTest(), r);
      break;
    }
    case 1: {
      v1::SubmitSweepRequest r;
      if (Parse(r, data, size)) {
        r.set_base_dir(d->root());  // where trial programs would run; never outside the temp dir
        (void)c.Submit(hpo::server::Controller::AllowedForTest(), r);
      }
      break;
    }
    case 2: {
      v1::ReportRequest r;
      // Odd trial ids: the trial's own token (the checks past authentication); even: a wrong one.
      if (Parse(r, data, size)) {
        std::string token = "wrong";
        if (r.trial_id() % 2 != 0) token = c.TrialTokenForTest(r.trial_id()).value_or("wrong");
        (void)c.Report(r, token);
      }
      break;
    }
    case 3: {
      v1::ListTrialsRequest r;
      if (Parse(r, data, size)) (void)c.ListTrials(server::Controller::AllowedForTest(), r);
      break;
    }
    case 4: {
      v1::GetTrialRequest r;
      if (Parse(r, data, size)) (void)c.GetTrial(server::Controller::AllowedForTest(), r);
      break;
    }
    case 5: {
      v1::CancelSweepRequest r;
      if (Parse(r, data, size))
        (void)c.Cancel(hpo::server::Controller::AllowedForTest(), r.sweep_id());
      break;
    }
    case 6: {
      v1::PauseSweepRequest r;
      if (Parse(r, data, size))
        (void)c.Pause(hpo::server::Controller::AllowedForTest(), r.sweep_id());
      break;
    }
    case 7: {
      v1::ResumeSweepRequest r;
      if (Parse(r, data, size))
        (void)c.Resume(hpo::server::Controller::AllowedForTest(), r.sweep_id());
      break;
    }
    case 8: {
      v1::GetSweepRequest r;
      if (Parse(r, data, size))
        (void)c.GetSweep(server::Controller::AllowedForTest(), r.sweep_id());
      break;
    }
    case 9: {
      v1::ListSweepsRequest r;
      if (Parse(r, data, size))
        (void)c.ListSweeps(server::Controller::AllowedForTest(), r.active_only());
      break;
    }
    case 10: {
      v1::AllowNodeRequest r;
      if (Parse(r, data, size))
        (void)c.AllowNode(server::Controller::AllowedForTest(), r.sweep_id(), r.node());
      break;
    }
    case 11: {
      v1::PlanSweepRequest r;
      if (Parse(r, data, size)) {
        r.set_base_dir(d->root());
        (void)c.Plan(server::Controller::AllowedForTest(), r);
      }
      break;
    }
    default:
      // Time passes: trials start, end, get stopped.
      d->clock().Advance(absl::Seconds(1 + (size > 0 ? data[0] % 30 : 0)));
      break;
  }
  c.RunOnce();
  return 0;
}
