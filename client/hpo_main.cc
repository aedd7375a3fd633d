// hpo: the command line of hpod. `hpo --help` lists the commands; each group of them is a file
// of client/cli/. Exit codes: client/cli/cli.h.

#include "CLI/CLI.hpp"
#include "client/cli/change_commands.h"
#include "client/cli/cli.h"
#include "client/cli/daemon_commands.h"
#include "client/cli/external_commands.h"
#include "client/cli/sweep_commands.h"
#include "client/cli/trial_commands.h"
#include "client/cli/trial_side_commands.h"
#include "client/cli/user_commands.h"
#include "client/cli/watch_commands.h"
#include "common/version.h"

int main(int argc, char** argv) {
  CLI::App app{
      "hpo: submit, watch and inspect hyperparameter sweeps run by hpod.\n"
      "The daemon is found (and started when needed) through $HPO_DATA_DIR (default ~/.hpo)."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("hpo ") + hpo::kVersion);
  int rc = 0;
  hpo::client::cli::DaemonCommands daemon(app, rc);
  hpo::client::cli::SweepCommands sweeps(app, rc);
  hpo::client::cli::ChangeCommands changes(app, rc);
  hpo::client::cli::ExternalCommands external(app, rc);
  hpo::client::cli::TrialCommands trials(app, rc);
  hpo::client::cli::WatchCommands watch(app, rc);
  hpo::client::cli::UserCommands users(app, rc);
  hpo::client::cli::TrialSideCommands trial_side(app, rc);
  if (!hpo::client::cli::KnownSubcommands(app, argc, argv)) return hpo::client::cli::kExitUsage;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);  // prints the help, the version or the error
    return code == 0 ? 0 : hpo::client::cli::kExitUsage;
  }
  return rc;
}
