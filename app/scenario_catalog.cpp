// /catalog: a scenario's own GPU and model entries, merged onto the builtin catalogs.
#include "scenario_parts.hpp"
#include "topology/catalog_json.hpp"
#include "workloads/model_json.hpp"

namespace ctwin {

ScenarioCatalogs read_catalogs(const JsonObject& top) {
  const Json* cat_gpus = nullptr;
  const Json* cat_models = nullptr;
  if (top.has("catalog")) {
    const JsonObject c = top.object("catalog");
    c.only({"gpus", "models"});
    if (c.has("gpus")) cat_gpus = &c.raw("gpus");
    if (c.has("models")) cat_models = &c.raw("models");
  }
  return ScenarioCatalogs{merged_catalog(builtin_gpus_json(), "gpus.json", cat_gpus, top.file(), "gpus"),
                          merged_catalog(builtin_models_json(), "models.json", cat_models, top.file(), "models")};
}

}  // namespace ctwin
