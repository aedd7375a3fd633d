#pragma once
// Telemetry: what the core and the front doors measure as things happen (one report from receipt
// to its reply, one controller batch from its start to its commit). hpod hands the controller
// one that feeds /metrics (server/web/metrics.h); without one, nothing is measured.
//
// Thread safety: implementations must be thread-safe (reports are measured on gRPC's threads).

namespace hpo::server {

class Telemetry {
 public:
  virtual ~Telemetry() = default;
  virtual void ObserveReport(double /*seconds*/) {}
  virtual void ObserveBatch(double /*seconds*/) {}
};

}  // namespace hpo::server
