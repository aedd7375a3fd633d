#include "common/task_output.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hpo {
namespace {

// "0,2-3" -> {0, 2, 3}; empty when it does not parse.
std::set<int> TaskList(absl::string_view list) {
  std::set<int> out;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    std::vector<absl::string_view> range = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int first = 0, last = 0;
    if (!absl::SimpleAtoi(range[0], &first)) return {};
    last = first;
    if (range.size() == 2 && !absl::SimpleAtoi(range[1], &last)) return {};
    if (last < first || last - first > 100'000) return {};
    for (int t = first; t <= last; ++t) out.insert(t);
  }
  return out;
}

// srun's "srun: error: NODE: task(s) LIST: WHAT": true with its parts.
bool SrunTaskError(absl::string_view line, std::string* node, std::set<int>* tasks,
                   absl::string_view* what) {
  if (!absl::ConsumePrefix(&line, "srun: error: ")) return false;
  size_t colon = line.find(": task");
  if (colon == absl::string_view::npos) return false;
  absl::string_view rest = line.substr(colon + 2);
  if (!absl::ConsumePrefix(&rest, "tasks ") && !absl::ConsumePrefix(&rest, "task ")) return false;
  size_t end = rest.find(": ");
  if (end == absl::string_view::npos) return false;
  *tasks = TaskList(rest.substr(0, end));
  if (tasks->empty()) return false;
  *node = std::string(line.substr(0, colon));
  *what = rest.substr(end + 2);
  return true;
}

// "N: ..." (srun pads N to the width of the largest task number): the rest, with `*task` N;
// else the line, with `*task` -1.
absl::string_view Label(absl::string_view line, int* task) {
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(line);
  size_t colon = rest.find(": ");
  if (colon == absl::string_view::npos || colon == 0 || colon > 7 ||
      !absl::SimpleAtoi(rest.substr(0, colon), task) || *task < 0) {
    *task = -1;
    return line;
  }
  return rest.substr(colon + 2);
}

}  // namespace

TaskOutput SplitTaskOutput(absl::string_view text) {
  TaskOutput out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::string node;
    std::set<int> tasks;
    absl::string_view what;
    if (SrunTaskError(line, &node, &tasks, &what)) {
      bool killed = absl::StartsWith(what, "Killed") || absl::StartsWith(what, "Terminated") ||
                    absl::StartsWith(what, "Exited with exit code 0");
      if (out.culprit.empty() && !killed) {
        out.culprit = std::move(tasks);
        out.culprit_node = std::move(node);
      }
      continue;
    }
    int task = 0;
    absl::string_view rest = Label(line, &task);
    if (task < 0) continue;
    absl::StrAppend(&out.tasks[task], rest, "\n");
  }
  return out;
}

absl::string_view StripTaskLabel(absl::string_view line) {
  int task = 0;
  return Label(line, &task);
}

}  // namespace hpo
