// /cluster: inline keys (topology's cluster_from_json), or /cluster/file, a cluster description
// written by `ctwin cluster --write` (or, later, by realrun's discovery); keys beside it
// override the file's.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "scenario_parts.hpp"
#include "sim/error.hpp"
#include "topology/cluster_json.hpp"
#include "workloads/profile.hpp"

namespace ctwin {

ClusterSpec read_cluster(const JsonObject& top, const CatalogEntries& gpus) {
  const std::string& path = top.file();
  Json cluster_json = top.has("cluster") ? top.raw("cluster") : Json();
  std::string cluster_file = path;
  std::string cluster_ptr = "/cluster";
  if (cluster_json.is_object() && cluster_json.contains("file")) {
    const JsonObject co = top.object("cluster");
    namespace fs = std::filesystem;
    fs::path f(co.string("file"));
    if (f.is_relative()) f = fs::path(path).parent_path() / f;
    std::ifstream in(f);
    if (!in) co.fail("file", "cannot open \"" + f.string() + "\"", "a cluster description from ctwin cluster --write");
    std::ostringstream ss;
    ss << in.rdbuf();
    Json described = parse_json(ss.str(), f.string());
    if (!described.is_object()) throw InputError(f.string(), "", "found " + shown(described), "a JSON object");
    Json overrides = cluster_json;
    overrides.erase("file");
    if (!overrides.empty()) {
      described.merge_patch(overrides);
    } else {
      cluster_file = f.string();  // errors point into the description file itself
      cluster_ptr = "";
    }
    cluster_json = std::move(described);
  }
  if (!top.has("cluster")) top.object("cluster");  // the missing-key error
  // A cluster without a preset: its GPU generation's link figures from the shipped profile
  // (workloads/catalog/profiles), the values the presets carry; keys the user wrote win.
  const auto generation_defaults = [](ClusterSpec& c) { apply_profile(builtin_profile(c.gpu.name), c); };
  return cluster_from_json(JsonObject(cluster_json, cluster_ptr, cluster_file), gpus, generation_defaults);
}

}  // namespace ctwin
