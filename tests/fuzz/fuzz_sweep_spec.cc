// libFuzzer target: the sweep YAML parser and everything a valid spec feeds (its pilot, sampler,
// summary, one rendered command). Any crash, hang, sanitizer report or uncaught exception is a bug:
// bad input must only ever produce error lines.
#include <cstddef>
#include <cstdint>
#include <string>

#include "algorithms/sampler.h"
#include "server/spec/sweep_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string yaml(reinterpret_cast<const char*>(data), size);
  hpo::server::ParseResult r = hpo::server::ParseSweepSpec(yaml, "fuzz.yaml", "/tmp");
  if (!r.spec) {
    if (r.errors.empty()) __builtin_trap();  // refused without saying why
    return 0;
  }
  // Its pilot (hpo plan --pilot) is a sweep file of its own: it parses, or says why not.
  if (absl::StatusOr<std::string> pilot = hpo::server::PilotYaml(yaml, 2, 3); pilot.ok()) {
    hpo::server::ParseResult p = hpo::server::ParseSweepSpec(*pilot, "pilot.yaml", "/tmp");
    if (!p.spec && p.errors.empty()) __builtin_trap();
  }
  auto sampler = hpo::algorithms::MakeSampler(r.spec->algorithm, r.spec->space);
  if (!sampler.ok()) return 0;
  (void)r.spec->Summary(**sampler);
  std::vector<hpo::algorithms::HistoryEntry> history;
  hpo::algorithms::SuggestRequest req{&r.spec->space, &history, 0, r.spec->seed,
                                      r.spec->objective.direction};
  auto params = (*sampler)->Suggest(req);
  if (params.ok() && params->has_value()) {
    if (!r.spec->space.Contains(**params)) __builtin_trap();
    (void)r.spec->RenderCommand(**params, 1, 0, 1, "/tmp/t", "/tmp/p/checkpoint");
    (void)r.spec->TrialResources(**params);
  }
  return 0;
}
