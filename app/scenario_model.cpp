// /model: a catalog name or an object, read by workloads' model_from_json.
#include "scenario_parts.hpp"
#include "sim/error.hpp"
#include "workloads/model_json.hpp"

namespace ctwin {

void normalise_model(Json& root) {
  if (root.is_object() && root.contains("model") && root["model"].is_string()) {
    root["model"] = Json{{"preset", root["model"]}};
  }
}

ModelSpec read_model(const Json& root, const std::string& file, const CatalogEntries& models) {
  if (!root.contains("model")) throw InputError(file, "/model", "missing required key", "a model name or object");
  const Json& mj = root["model"];
  if (!mj.is_object()) {
    throw InputError(file, "/model", "found " + shown(mj), "a catalog model name or a JSON object");
  }
  return model_from_json(JsonObject(mj, "/model", file), models);
}

}  // namespace ctwin
