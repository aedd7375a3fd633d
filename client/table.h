#pragma once
// Text rendering of sweeps and trials for the CLI: trial tables (fit to a width and height),
// the watch header, CSV/JSON export rows.

#include <string>
#include <vector>

#include "hpo/v1/hpo.pb.h"
#include "nlohmann/json.hpp"

namespace hpo::client {

std::string ValueText(const v1::ParamValue& v);
// A trial's parameters as a JSON object, each value with its own type.
nlohmann::json ParamsJson(const v1::Trial& t);
std::string NumberText(double v);  // 6 significant digits
// Seconds the trial ran (until now when still running); 0 before it started.
double RuntimeSeconds(const v1::Trial& t);

struct TableOptions {
  int max_width = 0;   // 0: no limit; wider tables drop parameter columns from the right
  int max_rows = 0;    // lines including the header; 0: no limit; says how many rows are hidden
  bool where = false;  // add the backend id (pid, Slurm job and nodes) and GPUs of each trial
};
// One row per trial: id, number, state, params..., step, objective metric, other metrics, runtime.
std::string TrialTable(const v1::Sweep& sweep, const std::vector<v1::Trial>& trials,
                       const TableOptions& options);
// "sweep 3 'quickstart' RUNNING  12.3s | RUNNING 4  COMPLETED 10 | best val_acc 0.93 (trial 7)"
std::string SweepHeader(const v1::Sweep& sweep, const std::vector<v1::Trial>& trials);
std::string SweepLine(const v1::Sweep& sweep);  // one line for `hpo ls`
// The sweep ranks trials by Pareto dominance (several objectives, or constraints).
bool IsPareto(const v1::Sweep& sweep);
// "val_acc ↑, hpo.gpu_hours ↓ subject to latency_ms <= 20"
std::string ObjectivesText(const v1::Sweep& sweep);
// A trial's Pareto rank for tables: "front", "2", ..., "-"; " infeasible" when it misses a
// constraint.
std::string ParetoText(const v1::Trial& t);
// Two lines: "GPU-hours 1.25 of 10 (12.5%), 4 GPU(s) held: the budget lasts about 2h11m at
// this rate" (in steps mode: "GPU-hours 1.5 in allocations (1.25 in trials: utilization
// 83.3%) ..."), then "node-hours 0.5 of 2 (25.0%), 1 node(s) held".
std::string GpuHoursText(const v1::Sweep& sweep);
// An estimate (hpo plan), one figure a line, each with its range.
std::string PlanText(const v1::SweepEstimate& e);
// "plan: ... used: ..." for a sweep submitted with an estimate; "" without one. `trials`: the
// configurations it ran (retries of lost trials not counted, as the plan does not).
std::string PlanVsUsed(const v1::Sweep& sweep, size_t trials);
// "quarantined nodes: n2 (2 infrastructure failures)"; "" when none is quarantined.
std::string QuarantineText(const v1::Sweep& sweep);
// The nodes where the sweep's trials failed by the infrastructure's fault, one line each.
std::string NodesTable(const v1::Sweep& sweep);
// The sweep runs in allocations hpod holds (Slurm steps mode), which are what is charged.
bool InAllocations(const v1::Sweep& sweep);

std::string TrialsCsv(const std::vector<v1::Trial>& trials);
std::string TrialsJson(const v1::Sweep& sweep, const std::vector<v1::Trial>& trials);

}  // namespace hpo::client
