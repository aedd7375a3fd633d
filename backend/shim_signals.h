#pragma once
// The signals hpo-shim outlives (see hpo_shim.cc), shared by the shim and by Spawn, which starts
// the shim with them blocked: a stop signal sent the instant a trial starts then waits until the
// shim can pass it on to the command, instead of killing the shim before it recorded anything.
// Only libc: the shim links nothing else.

#include <signal.h>

namespace hpo::backend {

// All that end a process by default, except those only a fault raises.
inline constexpr int kShimSignals[] = {SIGHUP,    SIGINT,  SIGQUIT, SIGTERM, SIGUSR1,
                                       SIGUSR2,   SIGALRM, SIGPIPE, SIGXCPU, SIGXFSZ,
                                       SIGVTALRM, SIGPROF, SIGPOLL};

inline void AddShimSignals(sigset_t* set) {
  for (int sig : kShimSignals) sigaddset(set, sig);
}

}  // namespace hpo::backend
