// Each subcommand lives in its own file and registers itself on the CLI11 app; its callback
// stores the action that main() runs after parsing.
#pragma once

#include <functional>

#include "CLI/CLI.hpp"

namespace tfdata::cmd {

void AddRunCommand(CLI::App& app, std::function<int()>* action);
void AddBenchCommand(CLI::App& app, std::function<int()>* action);
void AddDispatcherCommand(CLI::App& app, std::function<int()>* action);
void AddWorkerCommand(CLI::App& app, std::function<int()>* action);
void AddRegisterCommand(CLI::App& app, std::function<int()>* action);
void AddReadCommand(CLI::App& app, std::function<int()>* action);
void AddLocalCommand(CLI::App& app, std::function<int()>* action);
void AddStatusCommand(CLI::App& app, std::function<int()>* action);

}  // namespace tfdata::cmd
