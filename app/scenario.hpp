// Scenario files: JSON parsed here, once, into typed structs. Every key is documented in
// docs/scenarios.md; every error names the file, the JSON pointer, what was found and
// what is expected (InputError, exit status 2).
#pragma once

#include <string>
#include <vector>

#include "topology/catalog.hpp"
#include "topology/cluster.hpp"
#include "topology/collective.hpp"
#include "workloads/model.hpp"
#include "workloads/training.hpp"

namespace ctwin {

enum class NetworkFidelity { analytical, flow };

// A published measurement a validation scenario reproduces (/validation).
struct ValidationTarget {
  std::string source;
  // "tflops_per_gpu" (model FLOPs), "hardware_tflops_per_gpu" (with recomputation, as
  // Megatron-LM's papers count), "step_time_s", "tokens_per_s_per_gpu", "mfu"
  std::string metric;
  double published = 0;
  std::string notes;
  bool present() const { return !metric.empty(); }
};

struct Scenario {
  std::string file;                                        // where it came from, for messages
  std::string name;                                        // /name
  std::string kind;                                        // /kind: "training" (serving later)
  std::uint64_t seed = 1;                                  // /seed
  ClusterSpec cluster;                                     // /cluster
  ModelSpec model;                                         // /model
  TrainingConfig training;                                 // /training
  NetworkFidelity fidelity = NetworkFidelity::analytical;  // /network/fidelity
  CollectiveOptions collectives;                           // /network/algo, /network/protocol
  ValidationTarget validation;                             // /validation
};

// A "--set /json/pointer=value" override. The value is parsed as JSON when it is valid
// JSON (numbers, true, {"a":1}), else taken as a string.
struct Override {
  std::string pointer;
  std::string value;
};

Override parse_override(const std::string& text);

// Reads, applies overrides, validates and converts. Throws InputError.
Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides = {});
// The same from text (path is used in messages only).
Scenario parse_scenario(const std::string& text, const std::string& path, const std::vector<Override>& overrides = {});

// The embedded catalogs (topology/catalog/gpus.json, workloads/catalog/models.json).
GpuCatalog builtin_gpus();
ModelCatalog builtin_models();

}  // namespace ctwin
