#pragma once
// RunCommand: a program run to its end, and what it printed. For the few commands hpod and hpo
// run themselves: hpod's own flag checks, and Slurm's sbatch, squeue and srun where no library
// call does the same.
//
// Blocks until the program exits. Thread-compatible.

#include <string>
#include <utility>
#include <vector>

namespace hpo {

// Runs `argv` (no shell), its standard error merged into what it prints; the exit status (-1
// when it could not run, or was killed) and what it printed.
std::pair<int, std::string> RunCommand(const std::vector<std::string>& argv);

}  // namespace hpo
