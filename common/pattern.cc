#include "common/pattern.h"

#include "re2/re2.h"

namespace hpo {

absl::StatusOr<std::shared_ptr<const re2::RE2>> CompilePattern(const std::string& pattern,
                                                               bool ignore_case) {
  RE2::Options options(RE2::Quiet);  // the reason goes into the error, not to stderr
  options.set_case_sensitive(!ignore_case);
  auto re = std::make_shared<const re2::RE2>(pattern, options);
  if (!re->ok()) return absl::InvalidArgumentError(re->error());
  return re;
}

int Groups(const re2::RE2& re) { return re.NumberOfCapturingGroups(); }

bool Found(const re2::RE2& re, const std::string& text) { return RE2::PartialMatch(text, re); }

bool FoundGroup(const re2::RE2& re, const std::string& text, std::string* group) {
  return re.NumberOfCapturingGroups() >= 1 && RE2::PartialMatch(text, re, group);
}

}  // namespace hpo
