#include "hpo/v1/states.h"

namespace hpo::v1 {
namespace {

// Drops "TRIAL_STATE_" / "SWEEP_STATE_" (both 12 characters).
std::string Strip(const std::string& name) { return name.size() > 12 ? name.substr(12) : name; }

}  // namespace

std::string StateName(TrialState s) { return Strip(TrialState_Name(s)); }
std::string StateName(SweepState s) { return Strip(SweepState_Name(s)); }

std::string InterruptionName(Interruption i) {
  if (i == INTERRUPTION_UNSPECIFIED) return "";
  std::string name = Interruption_Name(i).substr(13);  // drops "INTERRUPTION_"
  for (char& c : name) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return name;
}

bool IsFinal(TrialState s) {
  switch (s) {
    case TRIAL_STATE_COMPLETED:
    case TRIAL_STATE_STOPPED:
    case TRIAL_STATE_FAILED:
    case TRIAL_STATE_CANCELED:
    case TRIAL_STATE_LOST:
      return true;
    default:
      return false;
  }
}

bool IsFinal(SweepState s) {
  return s != SWEEP_STATE_RUNNING && s != SWEEP_STATE_PAUSED && s != SWEEP_STATE_UNSPECIFIED;
}

}  // namespace hpo::v1
