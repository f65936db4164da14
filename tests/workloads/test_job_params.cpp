// /job read from JSON: every key lands in its JobSpec field, the declared defaults are the
// struct's, and each bad value is one InputError at its JSON pointer.
#include <doctest/doctest.h>

#include <string>

#include "sim/error.hpp"
#include "tolerance.hpp"
#include "workloads/job_params.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

const std::string kFile = "scenario.json";

JobSpec job(const std::string& text) {
  const Json j = Json::parse(text);
  return read_job_spec(JsonObject(j, "/job", kFile));
}

template <class F>
std::string error_path(F f) {
  try {
    f();
  } catch (const InputError& e) {
    CHECK(e.file == kFile);
    return e.path;
  }
  return "";
}

double decl_default(std::span<const ParamDecl> table, const char* key) { return param_decl(table, key).def; }

}  // namespace

TEST_CASE("/job: the declared defaults are the engine's defaults") {
  const JobSpec s = job(R"({"train_tokens": 1e12})");
  const JobSpec d;
  CHECK(s.train_tokens == 1e12);
  CHECK(s.nodes_per_switch == decl_default(job_params, "nodes_per_switch"));
  CHECK(s.nodes_per_switch == d.nodes_per_switch);
  CHECK(d.detection.nccl_timeout_s == decl_default(job_detection_params, "nccl_timeout_s"));
  CHECK(d.detection.heartbeat_interval_s == decl_default(job_detection_params, "heartbeat_interval_s"));
  CHECK(d.detection.heartbeat_misses == decl_default(job_detection_params, "heartbeat_misses"));
  CHECK(d.detection.watchdog_s == decl_default(job_detection_params, "watchdog_s"));
  CHECK(d.restart.reschedule_with_spare_s == decl_default(job_restart_params, "reschedule_with_spare_s"));
  CHECK(d.restart.reschedule_without_spare_s == decl_default(job_restart_params, "reschedule_without_spare_s"));
  CHECK(d.restart.repair_s == decl_default(job_restart_params, "repair_s"));
  CHECK(d.restart.container_start_s == decl_default(job_restart_params, "container_start_s"));
  CHECK(d.restart.nccl_init_base_s == decl_default(job_restart_params, "nccl_init_base_s"));
  CHECK(d.restart.nccl_init_per_rank_s == decl_default(job_restart_params, "nccl_init_per_rank_s"));
  CHECK(d.checkpoint.interval_steps == decl_default(job_checkpoint_params, "interval_steps"));
  CHECK(d.checkpoint.interval_s == decl_default(job_checkpoint_params, "interval_s"));
  CHECK(d.checkpoint.storage_every == decl_default(job_checkpoint_params, "storage_every"));
  CHECK(d.storage.write_bytes_per_s == decl_default(job_storage_params, "write_gbyte_per_s") * 1e9);
  CHECK(d.storage.read_bytes_per_s == decl_default(job_storage_params, "read_gbyte_per_s") * 1e9);
  CHECK(d.storage.per_client_bytes_per_s == decl_default(job_storage_params, "per_client_gbyte_per_s") * 1e9);
  CHECK(d.elasticity.spare_nodes == decl_default(job_elasticity_params, "spare_nodes"));
  CHECK(d.elasticity.min_dp == decl_default(job_elasticity_params, "min_dp"));
  CHECK(d.stragglers.slow_onset_per_node_day == decl_default(job_straggler_params, "slow_onset_per_node_day"));
  CHECK(d.stragglers.diurnal_amplitude == decl_default(job_straggler_params, "diurnal_amplitude"));
  CHECK(d.stragglers.diurnal_peak_hour == decl_default(job_straggler_params, "diurnal_peak_hour"));
  CHECK(d.data_loader.prefetch_batches == decl_default(job_data_loader_params, "prefetch_batches"));
  CHECK(d.monte_carlo.replications == decl_default(job_monte_carlo_params, "replications"));
  CHECK(d.monte_carlo.search_points == decl_default(job_monte_carlo_params, "search_points"));
  CHECK(d.monte_carlo.search_replications == decl_default(job_monte_carlo_params, "search_replications"));
  // Everything the reader filled equals the struct's default.
  CHECK(s.detection.nccl_timeout_s == d.detection.nccl_timeout_s);
  CHECK(s.restart.nccl_init_per_rank_s == d.restart.nccl_init_per_rank_s);
  CHECK(s.checkpoint.mode == CheckpointMode::sync);
  CHECK(s.elasticity.policy == ElasticPolicy::hot_spare);
  CHECK(s.elasticity.keep_global_batch);
  for (int c = 0; c < kFailureCauses; ++c) CHECK(s.causes[c].rate == d.causes[c].rate);
}

TEST_CASE("/job: every key read into the JobSpec") {
  const JobSpec s = job(R"({"train_steps": 5000, "nodes_per_switch": 8,
      "failure_rates": {"gpu": {"rate_per_node_day": 0.002, "distribution": "weibull", "weibull_shape": 0.7,
                                "scope": "node", "detected_by": "heartbeat"},
                        "link_flap": {"rate_per_node_day": 0.01, "absorbed": true, "retry_s": 12},
                        "planned": {"rate_per_job_day": 0.5}},
      "failures": [{"at_s": 3600, "cause": "switch", "nodes": 4, "first_node": 8}, {"at_s": 10, "cause": "user"}],
      "detection": {"nccl_timeout_s": 120, "heartbeat_interval_s": 5, "heartbeat_misses": 4, "watchdog_s": 15},
      "restart": {"reschedule_with_spare_s": 60, "reschedule_without_spare_s": 1800, "repair_s": 7200,
                  "container_start_s": 30, "nccl_init_base_s": 2, "nccl_init_per_rank_s": 0.001},
      "checkpoint": {"interval_steps": 100, "interval_s": 900, "mode": "in_memory", "storage_every": 5},
      "storage": {"write_gbyte_per_s": 1000, "read_gbyte_per_s": 3000, "per_client_gbyte_per_s": 2},
      "elasticity": {"policy": "shrink", "spare_nodes": 4, "keep_global_batch": false, "min_dp": 2},
      "stragglers": {"slow_node_fraction": 0.01, "slowdown": 1.3, "evict_after_slow_steps": 50,
                     "slow_onset_per_node_day": 0.002, "diurnal_amplitude": 0.015, "diurnal_peak_hour": 13.5},
      "data_loader": {"workers": 8, "decode_s_per_sample": 0.01, "read_gbyte_per_s": 2, "bytes_per_sample": 1e6,
                      "prefetch_batches": 0},
      "monte_carlo": {"replications": 100, "seed": 42, "search_points": 5, "search_replications": 8}})");
  CHECK(s.train_steps == 5000);
  CHECK(s.train_tokens == 0);
  CHECK(s.nodes_per_switch == 8);
  const FailureCauseSpec& g = s.causes[static_cast<int>(FailureCause::gpu)];
  CHECK(g.rate == 0.002);
  CHECK(g.unit == RateUnit::per_node_day);
  CHECK(g.distribution == FailureDistribution::weibull);
  CHECK(g.weibull_shape == 0.7);
  CHECK(g.scope == FailureScope::node);
  CHECK(g.detected_by == DetectedBy::heartbeat);
  const FailureCauseSpec& f = s.causes[static_cast<int>(FailureCause::link_flap)];
  CHECK(f.absorbed);
  CHECK(f.retry_s == 12);
  CHECK(s.causes[static_cast<int>(FailureCause::planned)].unit == RateUnit::per_job_day);
  CHECK(s.causes[static_cast<int>(FailureCause::planned)].rate == 0.5);
  // Causes not named keep Llama 3's defaults.
  CHECK(s.causes[static_cast<int>(FailureCause::hbm)].rate == default_failure_causes()[1].rate);
  REQUIRE(s.failures.size() == 2);
  CHECK(s.failures[0].at_s == 3600);
  CHECK(s.failures[0].cause == FailureCause::network_switch);
  CHECK(s.failures[0].nodes == 4);
  CHECK(s.failures[0].first_node == 8);
  CHECK(s.failures[1].nodes == -1);  // the cause's scope
  CHECK(s.detection.nccl_timeout_s == 120);
  CHECK(s.detection.heartbeat_interval_s == 5);
  CHECK(s.detection.heartbeat_misses == 4);
  CHECK(s.detection.watchdog_s == 15);
  CHECK(s.restart.reschedule_with_spare_s == 60);
  CHECK(s.restart.reschedule_without_spare_s == 1800);
  CHECK(s.restart.repair_s == 7200);
  CHECK(s.restart.container_start_s == 30);
  CHECK(s.restart.nccl_init_base_s == 2);
  CHECK(s.restart.nccl_init_per_rank_s == 0.001);
  CHECK(s.checkpoint.interval_steps == 100);
  CHECK(s.checkpoint.interval_s == 900);
  CHECK(s.checkpoint.mode == CheckpointMode::in_memory);
  CHECK(s.checkpoint.storage_every == 5);
  CHECK(s.storage.write_bytes_per_s == rel_approx(1e12, 1e-15));
  CHECK(s.storage.read_bytes_per_s == rel_approx(3e12, 1e-15));
  CHECK(s.storage.per_client_bytes_per_s == rel_approx(2e9, 1e-15));
  CHECK(s.elasticity.policy == ElasticPolicy::shrink);
  CHECK(s.elasticity.spare_nodes == 4);
  CHECK(!s.elasticity.keep_global_batch);
  CHECK(s.elasticity.min_dp == 2);
  CHECK(s.stragglers.slow_node_fraction == 0.01);
  CHECK(s.stragglers.slowdown == 1.3);
  CHECK(s.stragglers.evict_after_slow_steps == 50);
  CHECK(s.stragglers.slow_onset_per_node_day == 0.002);
  CHECK(s.stragglers.diurnal_amplitude == 0.015);
  CHECK(s.stragglers.diurnal_peak_hour == 13.5);
  CHECK(s.data_loader.workers == 8);
  CHECK(s.data_loader.decode_s_per_sample == 0.01);
  CHECK(s.data_loader.read_bytes_per_s == rel_approx(2e9, 1e-15));
  CHECK(s.data_loader.bytes_per_sample == 1e6);
  CHECK(s.data_loader.prefetch_batches == 0);
  CHECK(s.monte_carlo.replications == 100);
  CHECK(s.monte_carlo.seed == 42);
  CHECK(s.monte_carlo.search_points == 5);
  CHECK(s.monte_carlo.search_replications == 8);
}

TEST_CASE("/job: each bad value is an InputError at its JSON pointer") {
  CHECK(error_path([] { job(R"({})"); }) == "/job/train_tokens");
  CHECK(error_path([] { job(R"({"train_tokens": 1e9, "train_steps": 10})"); }) == "/job/train_steps");
  CHECK(error_path([] { job(R"({"train_tokens": 0})"); }) == "/job/train_tokens");
  CHECK(error_path([] { job(R"({"train_steps": 10, "checkpont": {}})"); }) == "/job/checkpont");
  CHECK(error_path([] { job(R"({"train_steps": 10, "checkpoint": {"mode": "lazy"}})"); }) == "/job/checkpoint/mode");
  CHECK(error_path([] { job(R"({"train_steps": 10, "failure_rates": {"gpus": {}}})"); }) == "/job/failure_rates/gpus");
  CHECK(error_path([] {
          job(R"({"train_steps": 10, "failure_rates": {"gpu": {"rate_per_gpu_day": 1, "rate_per_node_day": 1}}})");
        }) == "/job/failure_rates/gpu/rate_per_node_day");
  CHECK(error_path([] { job(R"({"train_steps": 10, "failure_rates": {"gpu": {"weibull_shape": 0.5}}})"); }) ==
        "/job/failure_rates/gpu/weibull_shape");
  CHECK(error_path([] { job(R"({"train_steps": 10, "failure_rates": {"gpu": {"absorbed": true}}})"); }) ==
        "/job/failure_rates/gpu/absorbed");
  CHECK(error_path([] { job(R"({"train_steps": 10, "failures": [{"at_s": 5, "cause": "meteor"}]})"); }) ==
        "/job/failures/0/cause");
  CHECK(error_path([] { job(R"({"train_steps": 10, "failures": [{"cause": "gpu"}]})"); }) == "/job/failures/0/at_s");
  CHECK(error_path([] { job(R"({"train_steps": 10, "failures": {"at_s": 1}})"); }) == "/job/failures");
  CHECK(error_path([] { job(R"({"train_steps": 10, "elasticity": {"min_dp": 0}})"); }) == "/job/elasticity/min_dp");
  CHECK(error_path([] { job(R"({"train_steps": 10, "stragglers": {"slowdown": 0.5}})"); }) ==
        "/job/stragglers/slowdown");
  CHECK(error_path([] { job(R"({"train_steps": 10, "data_loader": {"workers": 4}})"); }) == "/job/data_loader");
  CHECK(error_path([] { job(R"({"train_steps": 10, "stragglers": {"diurnal_amplitude": 1.5}})"); }) ==
        "/job/stragglers/diurnal_amplitude");
  CHECK(error_path([] { job(R"({"train_steps": 10, "stragglers": {"diurnal_amplitude": -0.01}})"); }) ==
        "/job/stragglers/diurnal_amplitude");
  CHECK(error_path([] { job(R"({"train_steps": 10, "stragglers": {"diurnal_peak_hour": 25}})"); }) ==
        "/job/stragglers/diurnal_peak_hour");
  CHECK(error_path([] { job(R"({"train_steps": 10, "stragglers": {"slow_onset_per_node_day": -1}})"); }) ==
        "/job/stragglers/slow_onset_per_node_day");
  CHECK(error_path([] { job(R"({"train_steps": 10, "stragglers": {"slow_onset_per_node_day": "often"}})"); }) ==
        "/job/stragglers/slow_onset_per_node_day");
}

TEST_CASE("/job's tables name every path the reader reads") {
  const std::vector<ParamTable> t = job_param_tables();
  CHECK(t.size() == 11);
  CHECK(t[0].path == "/job");
  CHECK(!params_markdown(t).empty());
}
