// ctwin profile: a shipped calibration profile as JSON, every key with its source, to edit and
// load back through a scenario's /profile {"file": ...} (docs/profiles.md).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli.hpp"
#include "commands.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "workloads/profile.hpp"

namespace ctwin {

int cmd_profile(const Args& args) {
  const std::string usage =
      "usage: ctwin profile NAME [--write FILE [--force]]\n\n"
      "Prints a shipped calibration profile (A100, B200, H100, H200, L40S) as JSON, every key with\n"
      "its source, or writes it to FILE; a scenario loads it back with \"profile\": {\"file\": \"FILE\"}.";
  auto p = parse_args(
      args, usage, {{"--write", "FILE", "write the profile to FILE"}, {"--force", "", "overwrite FILE if it exists"}});
  if (!p) return kExitOk;
  const auto names = builtin_profile_names();
  if (p->positional.size() != 1) throw InputError("", "NAME", "expected one profile name", "one of " + list_of(names));
  const std::string& name = p->positional[0];
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw InputError("", "NAME", "unknown profile \"" + name + "\"", "one of " + list_of(names));
  }
  const std::string text = profile_to_json(builtin_profile(name)) + "\n";
  if (const auto out = p->get("--write")) {
    write_output_file(*out, text, p->has("--force"));
    std::printf("wrote %s\n", out->c_str());
  } else {
    std::fputs(text.c_str(), stdout);
  }
  return kExitOk;
}

}  // namespace ctwin
