// ctwin params: every scenario key with its type, default, bounds, unit, meaning and source,
// printed from the parameter tables the loader reads through (docs/scenarios.md holds the
// --markdown output between its generated markers).
#include <cstdio>

#include "cli.hpp"
#include "commands.hpp"
#include "scenario.hpp"
#include "sim/error.hpp"

namespace ctwin {

int cmd_params(const Args& args) {
  const std::string usage =
      "usage: ctwin params [--markdown]\n\n"
      "Prints every scenario key: type and bounds, default, unit, meaning and source.";
  auto p = parse_args(args, usage, {{"--markdown", "", "Markdown tables, as in docs/scenarios.md"}});
  if (!p) return kExitOk;
  const std::string text =
      p->has("--markdown") ? params_markdown(scenario_param_tables()) : params_text(scenario_param_tables());
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace ctwin
