// SlurmBackend and the hpo-agents of its allocations (agent_hub.h): what the agents say of their
// steps, and the signals that go through them.
#include <signal.h>

#include <map>
#include <utility>

#include "slurm_backend/slurm_backend.h"
#include "spdlog/spdlog.h"

namespace hpo::slurm {

using backend::ExitRecord;
using backend::TrialProcess;

void SlurmBackend::SignalSrun(const Step& step, int signal) {
  if (step.agent) {
    v1::AgentOrder order;
    v1::AgentSignal* s = order.mutable_signal();
    s->set_trial_id(step.trial_id);
    s->set_segment(step.process.segment);
    s->set_signal(signal);
    options_.agent.hub->Order(step.job_id, std::move(order));
    return;
  }
  if (step.process.pid <= 0) return;
  if (!step.process.adopted || backend::IsTrialProcess(step.process.pid, step.trial_id)) {
    ::kill(-step.process.pid, signal);
  }
}

TrialProcess::State SlurmBackend::CheckAgentStep(Step& step, ExitRecord* outcome) {
  if (step.agent_outcome) {
    *outcome = *step.agent_outcome;
    return TrialProcess::State::kEnded;
  }
  // The agent does not list it, or its allocation (and the agent with it) is gone: what hpo-shim
  // wrote in the trial directory is the last word.
  bool gone = !pool_.WhyGone(step.job_id).why.empty();
  if (!step.agent_vanished && step.agent_missing < 2 && !gone) return TrialProcess::State::kRunning;
  if (std::optional<ExitRecord> rec =
          backend::ReadExitRecord(step.process.dir, step.process.segment)) {
    *outcome = *rec;
    return TrialProcess::State::kEnded;
  }
  if (!gone && !step.agent_vanished && step.launch_order && !step.relaunched) {
    // The agent lists every step it started until hpod acknowledges its end, and an
    // acknowledged one left its exit record: it never had this one (hpod went down before the
    // order reached it). The same order again; the agent never starts a step twice.
    spdlog::info("trial {}: allocation {}'s agent never got its launch; sending it again",
                 step.trial_id, step.job_id);
    step.relaunched = true;
    step.agent_missing = 0;
    step.launch_seq = options_.agent.hub->Order(step.job_id, *step.launch_order);
    return TrialProcess::State::kRunning;
  }
  return TrialProcess::State::kVanished;
}

void SlurmBackend::HearAgents() {
  AgentHub* hub = options_.agent.hub;
  if (hub == nullptr) return;
  for (const AgentHub::Heard& heard : hub->TakeHeard()) {
    // An agent that calls runs: its allocation is usable now; slurmctld's next answer adds its
    // times (asked at once when a waiting trial needs them: WantsTimes).
    pool_.AgentCalled(heard.job_id, heard.nodelist);
    std::map<std::pair<int64_t, int>, const v1::AgentStep*> listed;
    for (const v1::AgentStep& s : heard.steps) listed[{s.trial_id(), s.segment()}] = &s;
    for (auto& [trial_id, step] : steps_) {
      if (!step.agent || step.job_id != heard.job_id || step.agent_outcome) continue;
      auto found = listed.find({trial_id, step.process.segment});
      if (found == listed.end()) {
        // Not started yet (its order is on its way), or the agent has no record of it.
        if (hub->Applied(heard.job_id, step.launch_seq)) ++step.agent_missing;
        continue;
      }
      const v1::AgentStep& s = *found->second;
      listed.erase(found);
      step.agent_missing = 0;
      if (!s.ended()) continue;
      if (s.vanished()) {
        step.agent_vanished = true;
      } else {
        step.agent_outcome = ExitRecord{.exit_code = s.exit_code(),
                                        .term_signal = s.term_signal(),
                                        .exec_errno = s.exec_errno()};
      }
    }
    // What the agent runs that hpod does not (a trial that ended or was given up meanwhile):
    // ended steps are acknowledged, running ones ended.
    for (const auto& [key, s] : listed) {
      if (steps_.count(key.first) && steps_.at(key.first).process.segment == key.second) continue;
      if (s->ended()) {
        hub->Acknowledge(heard.job_id, key.first, key.second);
        continue;
      }
      if (!orphans_.insert(key).second) continue;
      spdlog::warn(
          "trial {}: hpod does not run segment {} any more; ending the step allocation "
          "{}'s agent runs",
          key.first, key.second, heard.job_id);
      Step orphan;
      orphan.trial_id = key.first;
      orphan.job_id = heard.job_id;
      orphan.agent = true;
      orphan.process.segment = key.second;
      SignalSrun(orphan, SIGKILL);
    }
  }
}

}  // namespace hpo::slurm
