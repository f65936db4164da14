// /cluster: inline keys (topology's cluster_from_json), or /cluster/file, a cluster description
// written by `ctwin cluster --write` (or, later, by realrun's discovery); keys beside it
// override the file's.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "scenario_parts.hpp"
#include "sim/error.hpp"
#include "topology/cluster_json.hpp"
#include "workloads/profile.hpp"

namespace ctwin {

ClusterSpec read_cluster(const JsonObject& top, const CatalogEntries& gpus, const std::optional<Profile>& profile,
                         std::vector<std::string>* warnings) {
  const std::string& path = top.file();
  Json cluster_json = top.has("cluster") ? top.raw("cluster") : Json();
  std::string cluster_file = path;
  std::string cluster_ptr = "/cluster";
  if (cluster_json.is_object() && cluster_json.contains("file")) {
    const JsonObject co = top.object("cluster");
    namespace fs = std::filesystem;
    fs::path f(co.string("file"));
    if (f.is_relative()) f = fs::path(path).parent_path() / f;
    Json described = parse_json(
        read_input_file(f.string(), co.file(), co.child("file"), "a cluster description from ctwin cluster --write"),
        f.string());
    if (!described.is_object()) throw InputError(f.string(), "", "found " + shown(described), "a JSON object");
    Json overrides = cluster_json;
    overrides.erase("file");
    if (!overrides.empty()) {
      drop_other_spellings(described, overrides, cluster_params);
      described.merge_patch(overrides);
    } else {
      cluster_file = f.string();  // errors point into the description file itself
      cluster_ptr = "";
    }
    cluster_json = std::move(described);
  }
  if (!top.has("cluster")) top.object("cluster");  // the missing-key error
  // Link figures: the scenario's /profile on any cluster; else, on a cluster without a preset,
  // its GPU generation's shipped profile (workloads/catalog/profiles), the values the presets
  // carry. Keys the user wrote under /cluster win either way.
  const bool custom = !cluster_json.is_object() || !cluster_json.contains("preset");
  const auto link_defaults = [&](ClusterSpec& c) {
    if (profile) {
      apply_profile(*profile, c);
    } else if (custom) {
      apply_profile(builtin_profile(c.gpu.name), c);
    }
  };
  std::vector<std::string> found;
  ClusterSpec c = cluster_from_json(JsonObject(cluster_json, cluster_ptr, cluster_file), gpus, link_defaults, &found);
  if (warnings) {
    // A description file's keys sit at its top: name the file.
    for (auto& w : found) warnings->push_back(cluster_ptr.empty() ? cluster_file + ": " + w : w);
  }
  return c;
}

std::optional<Profile> read_profile(const JsonObject& top) {
  if (!top.has("profile")) return std::nullopt;
  const Json& v = top.raw("profile");
  if (v.is_string()) {
    const std::string name = v.get<std::string>();
    const auto names = builtin_profile_names();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      const std::string guess = closest(name, names);
      top.fail("profile",
               "unknown profile \"" + name + "\"" + (guess.empty() ? "" : "; did you mean \"" + guess + "\"?"),
               "one of " + list_of(names) + ", or {\"file\": PATH}");
    }
    return builtin_profile(name);
  }
  if (!v.is_object() || !v.contains("file")) {
    top.fail("profile", "found " + shown(v), "a shipped profile's name, or {\"file\": PATH}");
  }
  const JsonObject po = top.object("profile");
  namespace fs = std::filesystem;
  fs::path f(po.string("file"));
  if (f.is_relative()) f = fs::path(top.file()).parent_path() / f;
  return parse_profile(
      read_input_file(f.string(), po.file(), po.child("file"), "a profile JSON file (docs/profiles.md)"), f.string());
}

}  // namespace ctwin
