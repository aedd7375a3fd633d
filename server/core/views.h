#pragma once
// Views: the proto messages the API answers with, built from the controller's memory
// (SweepTable). Pure functions; the controller's thread only, like the table.

#include <string>
#include <vector>

#include "hpo/v1/hpo.pb.h"
#include "server/core/estimate.h"
#include "server/core/sweep_table.h"

namespace hpo::server {

// A sweep with its counts and best; `with_spec` adds the submitted YAML.
v1::Sweep SweepView(const Sweep& sweep, bool with_spec, absl::Time now);
// An estimate (estimate.h) as the API gives it.
v1::SweepEstimate EstimateProto(const Estimate& e);
// A trial as of `now` (its GPU-seconds count the running segment up to then).
v1::Trial TrialView(const Sweep& sweep, const TrialRuntime& trial, absl::Time now);
// The trials `req` asks for: filtered by state, in its order, at most its limit.
std::vector<v1::Trial> TrialsView(const Sweep& sweep, const v1::ListTrialsRequest& req,
                                  absl::Time now);
// An event for the log: the sweep's state (trial null) or the trial's.
v1::Event EventView(const Sweep& sweep, v1::EventKind kind, const TrialRuntime* trial,
                    absl::Time now);

}  // namespace hpo::server
