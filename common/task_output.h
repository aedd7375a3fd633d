#pragma once
// TaskOutput: the end of a multi-task Slurm step's stderr, read back by task, to tell the task
// that failed from those that failed because of it (a rank that raises makes the others print
// NCCL's "remote process exited").
//
// hpod runs a trial of more than one task with `srun --label`, which starts each line of task N
// with "N: ". srun's own error lines say which task ended badly first:
//     srun: error: n2: task 1: Exited with exit code 3
//     srun: error: n1: tasks 0,2-3: Killed
// The first of them that is not a kill (srun's --kill-on-bad-exit ends the others with SIGKILL
// or SIGTERM) names the culprit: its task(s), and the node it ran on.
//
// Thread safety: pure functions.

#include <map>
#include <set>
#include <string>

#include "absl/strings/string_view.h"

namespace hpo {

struct TaskOutput {
  std::map<int, std::string> tasks;  // each labeled task's lines, labels removed
  std::set<int> culprit;             // the task(s) that ended badly first; empty: not known
  std::string culprit_node;          // where they ran ("" when not known)
};

TaskOutput SplitTaskOutput(absl::string_view text);

// `line` without its task label ("1: " and the padding before it), when it has one.
absl::string_view StripTaskLabel(absl::string_view line);

}  // namespace hpo
