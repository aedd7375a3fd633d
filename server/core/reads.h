#pragma once
// CoreReads: what a reader outside the core (the dashboard's views, /metrics) may see of it, as
// of one moment on the controller's thread: the sweeps in memory, read-only; the store, for its
// Load calls; the backend's capacity; and the time. The core hands it out (Controller::Read)
// and includes nothing of its readers.
//
// Valid only inside the posted function that asked for it.

#include "absl/time/time.h"
#include "backend/backend.h"
#include "server/core/sweep_table.h"
#include "server/store/store.h"

namespace hpo::server {

struct CoreReads {
  const SweepTable& sweeps;
  Store& store;  // reads only: a writer outside the core would bypass its verbs
  const backend::Capacity& capacity;
  absl::Time now;
};

}  // namespace hpo::server
