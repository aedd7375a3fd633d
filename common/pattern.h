#pragma once
// Regular expressions a user gives (a failure rule's `stderr`, a sweep's `fom_regex`), compiled
// with RE2: matching takes time linear in the text whatever the pattern, with no backtracking, so
// no pattern can stall hpod's thread or a trainer's output. The usual forms (\d, \s, \w, classes,
// (?:...), alternation, repetition, anchors) mean what they mean in ECMAScript or Python;
// backreferences and lookaround, which need backtracking, are refused with RE2's reason.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace re2 {
class RE2;
}

namespace hpo {

// `pattern` compiled (case-insensitive with `ignore_case`), or INVALID_ARGUMENT with RE2's reason.
absl::StatusOr<std::shared_ptr<const re2::RE2>> CompilePattern(const std::string& pattern,
                                                               bool ignore_case = false);

// How many capturing groups `re` has.
int Groups(const re2::RE2& re);

// Whether `re` matches somewhere in `text`.
bool Found(const re2::RE2& re, const std::string& text);

// Whether `re` matches somewhere in `text` with a first group, whose text goes to `group`.
bool FoundGroup(const re2::RE2& re, const std::string& text, std::string* group);

}  // namespace hpo
