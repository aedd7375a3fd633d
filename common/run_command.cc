#include "common/run_command.h"

#include <sys/wait.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/shell_quote.h"

namespace hpo {

std::pair<int, std::string> RunCommand(const std::vector<std::string>& argv) {
  std::string cmd;
  for (const std::string& a : argv) absl::StrAppend(&cmd, cmd.empty() ? "" : " ", ShellQuote(a));
  absl::StrAppend(&cmd, " 2>&1");
  std::string said;
  int rc = -1;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) said.append(buf, n);
    int status = ::pclose(p);
    rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return {rc, said};
}

}  // namespace hpo
