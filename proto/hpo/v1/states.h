#pragma once
// The states of hpo.v1 in words, and which of them are final: one definition for hpod, hpo and
// the C++ client. A final state is never left; UNSPECIFIED is not a state, so not final either.

#include <string>

#include "hpo/v1/hpo.pb.h"

namespace hpo::v1 {

// "RUNNING", "COMPLETED", ...: the enum's name without its prefix; "UNSPECIFIED" for 0.
std::string StateName(TrialState s);
std::string StateName(SweepState s);

// "time_limit", "preempted", ...: the enum's name without its prefix, in lower case; "" for
// UNSPECIFIED (nothing interrupted the trial).
std::string InterruptionName(Interruption i);

// COMPLETED, STOPPED, FAILED, CANCELED, LOST.
bool IsFinal(TrialState s);
// Every state but RUNNING, PAUSED and UNSPECIFIED.
bool IsFinal(SweepState s);

}  // namespace hpo::v1
