#include "client/cli/external_commands.h"

#include <cstdio>

#include "client/cli/cli.h"
#include "client/table.h"
#include "hpo/v1/states.h"

namespace hpo::client::cli {

ExternalCommands::ExternalCommands(CLI::App& app, int& rc) : rc_(rc) {
  CLI::App* ask = app.add_subcommand(
      "ask",
      "a new trial of a sweep with backend: external, for you to run: prints its id, number, "
      "parameters, token, endpoint and the CA to trust there (tls_ca_data) as JSON. Report "
      "with HPO_TRIAL_ID, HPO_TRIAL_TOKEN, HPO_ENDPOINT and HPO_TLS_CA_DATA set to those (hpo "
      "report, the Python client); end it with hpo tell");
  ask->add_option("sweep", ask_.sweep, "sweep id")->required();
  ask->callback([this] { Ask(); });
  CLI::App* tell = app.add_subcommand(
      "tell", "how a trial of a sweep with backend: external ended (one you got from hpo ask)");
  tell->add_option("trial", tell_.trial, "trial id")->required();
  tell->add_option("--state", tell_.state, "completed or failed")
      ->required()
      ->check(CLI::IsMember({"completed", "failed"}));
  tell->add_option("--message", tell_.message, "why (shown with the trial)");
  tell->callback([this] { Tell(); });
}

void ExternalCommands::Ask() {
  auto c = Connect();
  absl::StatusOr<v1::AskResponse> asked = c->Ask(ask_.sweep);
  if (!asked.ok()) {
    rc_ = Fail(asked.status());
    return;
  }
  const v1::Trial& t = asked->trial();
  nlohmann::json out = {{"trial_id", t.id()},
                        {"number", t.number()},
                        {"sweep_id", t.sweep_id()},
                        {"params", ParamsJson(t)},
                        {"token", asked->token()},
                        {"endpoint", asked->endpoint()},
                        {"tls_ca_data", asked->tls_ca_data()}};
  std::printf("%s\n", out.dump().c_str());
}

void ExternalCommands::Tell() {
  v1::TellRequest req;
  req.set_trial_id(tell_.trial);
  req.set_state(tell_.state == "completed" ? v1::TRIAL_STATE_COMPLETED : v1::TRIAL_STATE_FAILED);
  req.set_message(tell_.message);
  auto c = Connect();
  absl::StatusOr<v1::Trial> trial = c->Tell(req);
  if (!trial.ok()) {
    rc_ = Fail(trial.status());
    return;
  }
  std::printf("trial %lld %s\n", static_cast<long long>(trial->id()),
              v1::StateName(trial->state()).c_str());
}

}  // namespace hpo::client::cli
