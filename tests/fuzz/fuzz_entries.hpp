// The fuzz targets' entry points (docs/reliability.md), shared by the libFuzzer drivers of
// tests/fuzz/ and by the replay test of the normal suite (tests/app/test_fuzz_replay.cpp), so a
// saved input runs through exactly the code that found it. Each takes the raw bytes of one
// input. Bad input must end as InputError (exit 2), or TimeOverflow / OutputError; anything
// else escaping, a crash, a sanitizer report, a hang or a huge allocation is a finding.
#pragma once

#include <unistd.h>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "calibrate/fit.hpp"
#include "calibrate/measurements.hpp"
#include "calibrate/readers.hpp"
#include "scenario.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "sim/output_file.hpp"
#include "sim/time.hpp"
#include "sim/trace.hpp"
#include "sweep.hpp"
#include "topology/catalog_json.hpp"
#include "topology/cluster.hpp"
#include "topology/cluster_json.hpp"
#include "topology/collective.hpp"
#include "viz/timeline_model.hpp"
#include "workloads/kv_cache.hpp"
#include "workloads/model_json.hpp"
#include "workloads/profile.hpp"
#include "workloads/serving_memory.hpp"
#include "workloads/serving_router.hpp"
#include "workloads/serving_run.hpp"
#include "workloads/serving_traffic.hpp"
#include "workloads/serving_traffic_params.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin::fuzz {

// Where scenario inputs claim to live: relative hf_config and cluster files resolve beside the
// test scenarios (tests/app/scenarios), so the fuzzer reaches them.
inline std::string scenario_path(const std::string& source_dir) {
  return source_dir + "/tests/app/scenarios/fuzz-input.json";
}

// A simulation small enough for milliseconds: the simulated GPUs (one data-parallel replica) times
// layers times micro-batches times steps. Larger inputs stop after validation.
inline bool tiny_enough(const Scenario& sc) {
  const auto* job = std::get_if<TrainingJob>(&sc.job);
  if (!job) return false;
  const auto& p = job->training.parallel;
  const double gpus = static_cast<double>(sc.cluster.nodes) * sc.cluster.gpus_per_node;
  const double replica = static_cast<double>(p.tp) * p.pp * p.cp * std::max(p.ep, 1);
  const double work = replica * std::max(job->model.layers, 1) * std::max(job->training.grad_accum(), 1) *
                      std::max(job->training.noise.steps, 1) * std::max(p.virtual_stages, 1);
  return gpus <= 4096 && replica <= 64 && work <= 20000;
}

// Bounds of a fuzzed serving run: milliseconds, not the hour a scenario may ask for.
inline constexpr std::int64_t kFuzzServingRequests = 200;
inline constexpr std::int64_t kFuzzServingIterations = 100000;
inline constexpr std::int64_t kFuzzServingBlocks = std::int64_t{1} << 20;  // GPU and host each

struct StopServing {};  // thrown by the iteration hook at the bound

// A serving scenario as `ctwin run` simulates it, its traffic cut to kFuzzServingRequests and the
// run stopped after kFuzzServingIterations iterations; a KV cache of more blocks than the bound
// (its arrays are allocated up front) stops after validation and sizing.
inline void run_serving_scenario(const Scenario& sc) {
  const ServingJob& job = serving_job(sc);
  TrafficSpec traffic = job.traffic;
  if (traffic.requests < 0 || traffic.requests > kFuzzServingRequests) traffic.requests = kFuzzServingRequests;
  const KvCapacity cap = kv_capacity(job.deployment, job.scheduler);
  if (!cap.refusal.empty() || cap.num_gpu_blocks > kFuzzServingBlocks || cap.num_cpu_blocks > kFuzzServingBlocks)
    return;
  std::int64_t iterations = 0;
  ServingHooks hooks;
  hooks.on_iteration = [&iterations](const IterationRecord&) {
    if (++iterations >= kFuzzServingIterations) throw StopServing{};
  };
  try {
    (void)run_serving_replica(job.deployment, job.scheduler, traffic, hooks);
  } catch (const StopServing&) {
  }
}

// The library behind `ctwin run`: parse, validate, build the cluster, simulate a tiny step (or a
// tiny serving run).
inline void run_scenario(std::string_view bytes, const std::string& path) {
  const Scenario sc = parse_scenario(std::string(bytes), path);
  // /sweep is read by `ctwin sweep` alone: its axes, ranges and auto space.
  (void)read_sweep_spec(parse_json(std::string(bytes), path), path);
  if (const auto* tj = std::get_if<TrainingJob>(&sc.job); tj && tj->auto_layout) return;
  if (sc.kind == JobKind::serving) return run_serving_scenario(sc);
  if (!tiny_enough(sc)) return;
  const Cluster cluster = build_cluster(sc.cluster);
  TrainingOptions opt = training_options(sc);
  opt.fold = true;
  opt.trace = true;
  const TrainingResult r = simulate_training(training_job(sc).model, training_job(sc).training, cluster, opt);
  std::ostringstream out;
  write_trace_binary(r.trace, out);
}

// A HuggingFace config.json, read as `"model": {"hf_config": PATH}` does (from a file: the
// importer opens it itself). `dir` is a writable scratch folder.
inline void run_hf_config(std::string_view bytes, const std::filesystem::path& dir) {
  const auto file = dir / ("ctwin-fuzz-hf-" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  struct Remove {
    std::filesystem::path p;
    ~Remove() {
      std::error_code ec;
      std::filesystem::remove(p, ec);
    }
  } remove{file};
  const std::string scenario = (dir / "fuzz-scenario.json").string();
  const Json model = {{"hf_config", file.string()}};
  const CatalogEntries models = merged_catalog(builtin_models_json(), "builtin models", nullptr, scenario, "models");
  const ModelSpec m = model_from_json(JsonObject(model, "/model", scenario), models);
  (void)count_parameters(m);
}

// A cluster description (`ctwin cluster --write`, a scenario's {"cluster": {"file": ...}}).
inline void run_cluster_json(std::string_view bytes) {
  const std::string file = "fuzz-cluster.json";
  const Json j = parse_json(std::string(bytes), file);
  if (!j.is_object()) throw InputError(file, "", "not an object");
  const CatalogEntries gpus = merged_catalog(builtin_gpus_json(), "builtin gpus", nullptr, file, "gpus");
  const ClusterSpec spec = cluster_from_json(JsonObject(j, "", file), gpus);
  (void)cluster_to_json(spec);
  if (static_cast<double>(spec.nodes) * spec.gpus_per_node > 4096) return;
  (void)build_cluster(spec);
}

// A calibration profile (`ctwin profile`, a scenario's {"profile": {"file": ...}}): parsed,
// written back, and applied to a cluster, whose collective model then reads its NCCL tables.
// What `ctwin calibrate` reads, told apart by content as load_any_measurements does (realrun's
// measurements, a Kineto trace, nccl-tests text), then fitted: the compute fits on an H100's
// peaks, the alpha-beta fits and the measured tables.
inline void run_measurements(std::string_view bytes) {
  const std::string text(bytes);
  const auto first = text.find_first_not_of(" \t\r\n");
  calibrate::Measurements m;
  if (first != std::string::npos && text[first] == '{') {
    m = text.find("\"traceEvents\"") != std::string::npos
            ? calibrate::parse_kineto_trace(text, "fuzz-trace.json")
            : calibrate::parse_measurements(text, "fuzz-measurements.json");
  } else {
    m = calibrate::parse_nccl_tests(text, "fuzz-nccl-tests.txt");
  }
  (void)calibrate::measurements_to_json(m);
  const auto gpus = builtin_gpus();
  const auto it = gpus.gpus.find("H100-SXM");
  if (it == gpus.gpus.end()) return;
  Profile p = builtin_profile(it->first);
  (void)calibrate::fit_compute(m.ops, it->second, Dtype::bf16, p, "fuzz");
  (void)calibrate::fit_alpha_beta_groups(m.collectives, 8);
  (void)calibrate::measured_tables(m, 8);
}

inline void run_profile(std::string_view bytes) {
  const Profile p = parse_profile(std::string(bytes), "fuzz-profile.json");
  (void)profile_to_json(p);
  ClusterSpec spec;
  if (!preset_cluster("dgx-h100", 2, builtin_gpus(), spec)) return;
  apply_profile(p, spec);
  CollectiveCall call;
  call.op = CollectiveOp::all_reduce;
  for (int r = 0; r < 16; ++r) call.ranks.emplace_back(r);
  call.bytes = 1 << 20;
  (void)estimate_collective(build_cluster(spec), call);
}

// What a loaded trace goes through: both writers, and the viewer's model (index, busy-time
// prefix sums, layout, utilization grid: its time arithmetic) with a query over the whole span.
inline void check_trace(const Trace& t) {
  std::ostringstream bin;
  write_trace_binary(t, bin);
  std::ostringstream chrome;
  write_chrome_trace(t, chrome);
  const viz::TimelineModel model{Trace(t)};
  for (std::uint32_t lane = 0; lane < t.lanes.size() && lane < 64; ++lane) {
    (void)model.visible_range(lane, 0, 9.3e18);
    (void)model.busy_before(lane, 9.3e18);
  }
}

inline void run_trace_binary(std::string_view bytes) {
  std::istringstream in{std::string(bytes)};
  check_trace(read_trace_binary(in, "fuzz.ctt"));
}

inline void run_chrome_trace(std::string_view bytes) {
  std::istringstream in{std::string(bytes)};
  check_trace(read_chrome_trace(in, "fuzz.json"));
}

// A request trace in the Azure layout: parsed, then replayed (at a time scale from its first byte,
// so scaled arrival arithmetic is reached too) for up to 100,000 requests.
inline void run_request_trace(std::string_view bytes) {
  // The other data file /traffic reads, a list of lengths (an empirical distribution's file),
  // from the same bytes: both are lines of numbers, so one corpus serves both.
  try {
    (void)parse_length_samples(std::string(bytes), "fuzz.txt");
  } catch (const InputError&) {
  }
  TrafficSpec s;
  s.arrival.process = ArrivalProcess::trace;
  s.arrival.trace = std::make_shared<const std::vector<TraceRow>>(parse_request_trace(std::string(bytes), "fuzz.csv"));
  s.arrival.time_scale = bytes.empty() || bytes.front() == 'T' ? 1.0 : 0.5 + static_cast<unsigned char>(bytes[0]);
  s.requests = 100000;
  s.prefix.shared_tokens = 64;
  s.prefix.share_ratio = 0.5;
  const auto src = make_traffic(s);
  while (src->next_arrival()) (void)src->pop();
}

// A request trace in the Mooncake JSONL layout: parsed (at a block size from the first byte, so
// the bound on hash ids per prompt moves), then replayed through both prefix caches and the
// prefix-aware router for up to 20,000 requests: every page key and route is computed from the
// hash views the source hands out.
inline void run_mooncake_trace(std::string_view bytes) {
  const std::int32_t block_tokens = bytes.empty() || bytes.front() == '{' ? 512 : 16 << (bytes[0] & 3);
  auto t = parse_mooncake_trace(std::string(bytes), "fuzz.jsonl", block_tokens);
  TrafficSpec s;
  s.arrival.process = ArrivalProcess::trace;
  s.arrival.trace = std::make_shared<const std::vector<TraceRow>>(std::move(t.rows));
  s.arrival.trace_blocks = std::make_shared<const PrefixBlockPool>(std::move(t.blocks));
  s.requests = 20000;
  const auto src = make_traffic(s);
  auto lru = make_kv_cache(4096, 16, 0, PrefixCaching::hash_lru);
  auto radix = make_kv_cache(4096, 16, 0, PrefixCaching::radix);
  RouterSpec rs{.policy = RouterPolicy::prefix_aware};
  rs.max_tree_tokens = 1 << 16;
  Router router(rs, -1, 1);
  router.add_replica();
  router.add_replica();
  const std::vector<RouterReplicaView> views(2, {true, ReplicaLoad{}});
  while (src->next_arrival()) {
    const Request r = src->pop();
    (void)router.route(r, views);
    for (auto* c : {lru.get(), radix.get()}) {
      const std::int64_t tokens = std::min<std::int64_t>(r.prompt_tokens, 4096 * 16 / 2);
      if (c->allocate(r, tokens)) c->release(r);
    }
  }
}

// Open findings (tests/fuzz/regressions/*/*.known) that a fuzz run steps over, so it can look
// for others; each goes when its fix lands. CTWIN_FUZZ_STRICT=1 turns them back into findings.
// The replay test never steps over them.
inline bool known_finding(const std::exception&) {
  // No finding is open. A new one that cannot be fixed at once is matched here (and its input
  // saved as .known) so fuzz runs can look past it.
  return false;
}

// Runs one entry: returns when it ended normally or with an expected error, else rethrows.
template <class F>
void expected_outcome(F&& f, bool step_over_known = false) {
  try {
    f();
  } catch (const InputError&) {
  } catch (const TimeOverflow&) {
  } catch (const OutputError&) {
  } catch (const std::exception& e) {
    if (!step_over_known || !known_finding(e)) throw;
  }
}

// The fuzz drivers step over known findings unless CTWIN_FUZZ_STRICT=1.
inline bool fuzz_steps_over_known() {
  static const bool strict = [] {
    const char* v = std::getenv("CTWIN_FUZZ_STRICT");
    return v && std::string(v) == "1";
  }();
  return !strict;
}

}  // namespace ctwin::fuzz
