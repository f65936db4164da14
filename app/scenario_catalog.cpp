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
  ScenarioCatalogs out{merged_catalog(builtin_gpus_json(), "gpus.json", cat_gpus, top.file(), "gpus"),
                       merged_catalog(builtin_models_json(), "models.json", cat_models, top.file(), "models")};
  if (cat_gpus && cat_gpus->is_object()) {
    // A builtin GPU's bandwidth given in another spelling (hbm_gbps over hbm_gbyte_per_s)
    // replaces the builtin value: drop the builtin's spelling, then restore what the scenario set.
    for (const auto& [name, v] : cat_gpus->items()) {
      const auto it = out.gpus.find(name);
      if (it == out.gpus.end() || !builtin_gpus_json().contains(name)) continue;
      drop_other_spellings(it->second.value, v, gpu_params);
      it->second.value.merge_patch(v);
    }
  }
  return out;
}

}  // namespace ctwin
