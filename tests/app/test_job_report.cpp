// `ctwin run` on a scenario with a /job (docs/jobs.md): the job report against hand-worked values
// (one scheduled failure), the --json object against the table, determinism, bad /job input, the
// shrunk configurations' step times against the same layouts written as scenarios, and the
// job-level trace.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "scenario.hpp"
#include "sim/trace.hpp"
#include "tolerance.hpp"
#include "workloads/memory.hpp"

using ctwin::test::abs_approx;
using ctwin::test::cli;
using ctwin::test::rel_approx;
using ctwin::test::Run;
using ctwin::test::temp_dir;

namespace {

const char* kOneFailure = "tests/app/scenarios/job-one-failure.json";

nlohmann::json run_json(const std::string& args) {
  const Run r = cli("run " + args + " --json");
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

std::string fresh(const std::string& name) {
  const auto p = temp_dir() / name;
  std::filesystem::remove(p);
  return p.string();
}

// The text after `label` on the table's line that starts with it (two-space indent), trimmed.
std::string table_value(const std::string& out, const std::string& label) {
  const auto at = out.find("\n  " + label);
  if (at == std::string::npos) return "";
  const auto begin = out.find_first_not_of(' ', at + 3 + label.size());
  return out.substr(begin, out.find('\n', begin) - begin);
}

std::string percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100 * f);
  return buf;
}

// The bad scenario: job-one-failure.json with `pointer` set to `value` (a --set override).
Run bad(const std::string& set) { return cli("run " + std::string(kOneFailure) + " --json --set " + set); }

void check_refused(const Run& r, const std::string& file, const std::string& pointer) {
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find("internal error") == std::string::npos);
  CHECK(r.err.find("error: " + file) != std::string::npos);
  CHECK(r.err.find(pointer) != std::string::npos);
}

}  // namespace

TEST_CASE(
    "one scheduled failure: lost time is the hand sum of work since the checkpoint, watchdog, spare, restart, load") {
  const auto j = run_json(kOneFailure);
  const auto& job = j["job"];
  const double s = j["step_time_s"].get<double>();
  const double bytes = job["checkpoint"]["bytes_per_gpu"].get<double>();
  // Sync checkpoint every 100 steps: each rank writes its bytes at the 1 GB/s per-client limit
  // (16 ranks x bytes over the 100 GB/s aggregate is shorter), so C = bytes / 1 GB/s.
  const double c = bytes / 1e9;
  CHECK(job["checkpoint"]["cost_s"].get<double>() == rel_approx(c, 1e-12));
  // Periods of 100 steps + C; the failure at 290 s falls in the 10th period's training: the work
  // lost is what trained since the 9th checkpoint ended.
  const double period = 100 * s + c;
  const double ended = std::floor(290 / period) * period;
  REQUIRE(290 - ended < 100 * s);
  const double lost_work = 290 - ended;
  const double detection = 30;                 // watchdog_s (the gpu cause is detected by the watchdog)
  const double reschedule = 120;               // a hot spare swapped in
  const double restart = 60 + 5 + 0.002 * 16;  // container start + NCCL init for 16 ranks
  const double load = std::max(bytes / 1e9, 16 * bytes / 200e9);  // per-client read vs the aggregate
  const auto& lost = job["lost_s"];
  CHECK(lost["lost_work"].get<double>() == rel_approx(lost_work, 1e-9));
  CHECK(lost["detection"].get<double>() == rel_approx(detection, 1e-12));
  CHECK(lost["reschedule"].get<double>() == rel_approx(reschedule, 1e-12));
  CHECK(lost["restart"].get<double>() == rel_approx(restart, 1e-12));
  CHECK(lost["checkpoint_load"].get<double>() == rel_approx(load, 1e-12));
  const double failure = lost_work + detection + reschedule + restart + load;
  CHECK(job["lost_by_failure_cause_s"]["gpu"].get<double>() == rel_approx(failure, 1e-9));
  CHECK(job["interruptions"]["total"] == 1);
  CHECK(job["interruptions"]["by_cause"]["gpu"] == 1);
  // The whole job: 2,000 steps, the checkpoints taken (every 100 steps, the ones re-done after the
  // failure included) and the failure.
  const double ckpts = job["checkpoint"]["checkpoints"].get<double>();
  CHECK(lost["checkpoint"].get<double>() == rel_approx(ckpts * c, 1e-9));
  CHECK(job["time_to_train_s"].get<double>() == rel_approx(2000 * s + ckpts * c + failure, 1e-9));
  CHECK(lost["total"].get<double>() == rel_approx(ckpts * c + failure, 1e-9));
  CHECK(job["effective_training_time_ratio"].get<double>() ==
        rel_approx(2000 * s / (2000 * s + ckpts * c + failure), 1e-9));
}

TEST_CASE("--json's job object carries the issue's keys, consistent with the table" * doctest::test_suite("slow")) {
  const std::string sc = "scenarios/job-llama3-70b-1024xh100-elastic.json";
  const auto j = run_json(sc);
  const Run text = cli("run " + sc);
  REQUIRE(text.status == 0);
  const auto& job = j["job"];
  for (const char* k : {"effective_training_time_ratio", "time_to_train_days", "interruptions", "lost_s",
                        "checkpoint_overhead_fraction", "optimal_checkpoint_interval_s", "monte_carlo"}) {
    CAPTURE(k);
    CHECK(job.contains(k));
  }
  CHECK(job["interruptions"].contains("total"));
  CHECK(job["interruptions"].contains("by_cause"));
  // The table shows the JSON's figures.
  CHECK(table_value(text.out, "ETTR (productive / wall)") == percent(job["effective_training_time_ratio"]));
  char days[64];
  std::snprintf(days, sizeof days, "%.2f days", job["time_to_train_days"].get<double>());
  CHECK(table_value(text.out, "time to train").rfind(days, 0) == 0);
  std::string interruptions = std::to_string(job["interruptions"]["total"].get<int>());
  CHECK(table_value(text.out, "interruptions").rfind(interruptions + " (", 0) == 0);
  long long by_cause = 0;
  for (const auto& [cause, n] : job["interruptions"]["by_cause"].items()) {
    by_cause += n.get<long long>();
    if (n.get<long long>() > 0) {
      CHECK(table_value(text.out, "interruptions").find(cause + " " + std::to_string(n.get<long long>())) !=
            std::string::npos);
    }
  }
  // Means rounded per cause: their sum is within one per cause of the rounded total.
  CHECK(std::abs(by_cause - job["interruptions"]["total"].get<long long>()) <= 11);
  // The Monte Carlo's quantiles, in order, printed.
  const auto& mc = job["monte_carlo"];
  CHECK(mc["replications"] == 200);
  CHECK(mc["time_to_train_days"]["p10"].get<double>() <= mc["time_to_train_days"]["p50"].get<double>());
  CHECK(mc["time_to_train_days"]["p50"].get<double>() <= mc["time_to_train_days"]["p90"].get<double>());
  char q[96];
  std::snprintf(q, sizeof q, "%.2f / %.2f / %.2f days", mc["time_to_train_days"]["p10"].get<double>(),
                mc["time_to_train_days"]["p50"].get<double>(), mc["time_to_train_days"]["p90"].get<double>());
  CHECK(text.out.find(q) != std::string::npos);
  // The recommended interval is the search's best, one of the intervals tried.
  const double best = job["optimal_checkpoint_interval_s"].get<double>();
  CHECK(best == job["checkpoint"]["simulated_best_interval_s"].get<double>());
  bool tried = false;
  for (const auto& row : job["checkpoint"]["search"]) tried = tried || row["interval_s"].get<double>() == best;
  CHECK(tried);
  // Lost time by what it went to sums to the total, and ETTR is productive over wall.
  double sum = 0;
  for (const auto& [k, v] : job["lost_s"].items())
    if (k != "total") sum += v.get<double>();
  CHECK(sum == rel_approx(job["lost_s"]["total"].get<double>(), 1e-9));
  CHECK(job["effective_training_time_ratio"].get<double>() ==
        rel_approx(job["productive_s"].get<double>() / job["time_to_train_s"].get<double>(), 0.01));
}

TEST_CASE("the same seed twice gives byte-identical --json; another seed another job" * doctest::test_suite("slow")) {
  const std::string sc = "scenarios/job-llama3-70b-1024xh100-wait.json";
  const Run a = cli("run " + sc + " --json"), b = cli("run " + sc + " --json");
  REQUIRE(a.status == 0);
  CHECK(a.out == b.out);
  const Run c = cli("run " + sc + " --json --set /job/monte_carlo/seed=8");
  REQUIRE(c.status == 0);
  CHECK(c.out != a.out);
}

TEST_CASE("a shrunk job's step times are the shrunk layouts' own, simulated as scenarios" *
          doctest::test_suite("slow")) {
  // Llama-3-70B TP8 PP4 (4 nodes a replica), 512 sequences, interleaved: at DP 31 the batch is
  // kept with ceil(512 / 31) = 17 micro-batches a replica, rounded up to 20 for the interleaved
  // schedule, on 124 nodes; the same layout written as a scenario must give the same step.
  const std::string sc = "scenarios/job-llama3-70b-1024xh100-elastic.json";
  const auto j = run_json(sc);
  const auto& configs = j["job"]["configurations"];
  REQUIRE(configs.size() >= 2);
  CHECK(configs[0]["dp"] == 32);
  CHECK(configs[0]["step_s"].get<double>() == j["step_time_s"].get<double>());
  int checked = 0;
  for (const auto& c : configs) {
    const int dp = c["dp"].get<int>();
    if (dp == 32 || c["slow_gpus"] != 0 || c["background_write"] == true) continue;
    if (dp != 31 && dp != 28) continue;
    const int accum = ((512 + dp - 1) / dp + 3) / 4 * 4;
    const auto alone = run_json(sc + " --set /cluster/nodes=" + std::to_string(4 * dp) +
                                " --set /training/parallelism/dp=" + std::to_string(dp) +
                                " --set /training/global_batch=" + std::to_string(accum * dp));
    CAPTURE(dp);
    CHECK(c["step_s"].get<double>() == rel_approx(alone["step_time_s"].get<double>(), 1e-12));
    ++checked;
  }
  CHECK(checked >= 1);
  CHECK(j["job"]["resizes"].get<int>() > 0);
}

TEST_CASE("bad /job input exits 2 naming the file and the JSON path") {
  check_refused(bad("/job/checkpont={}"), kOneFailure, "/job/checkpont");
  check_refused(bad("/job/checkpoint/mode=bogus"), kOneFailure, "/job/checkpoint/mode");
  check_refused(bad("/job/failure_rates/gpu/rate_per_gpu_day=-1"), kOneFailure,
                "/job/failure_rates/gpu/rate_per_gpu_day");
  check_refused(bad("/job/failures/0/cause=meteor"), kOneFailure, "/job/failures/0/cause");
  check_refused(bad("/job=3"), kOneFailure, "/job");
  // /job belongs to training: a serving scenario with one names it.
  check_refused(cli("run scenarios/serving-llama3-8b-h100.json --json --set /job/train_steps=10"),
                "scenarios/serving-llama3-8b-h100.json", "/job");
  // What the engine refuses on this layout (min_dp above the replicas) names /job too.
  check_refused(bad("/job/elasticity={\"policy\":\"shrink\",\"min_dp\":17}"), kOneFailure, "/job");
}

TEST_CASE("--trace with /job: the job's lanes hold its timeline, the first step beside it") {
  const std::string f = fresh("job.ctt");
  const auto j = run_json(std::string(kOneFailure) + " --trace " + f);
  const ctwin::Trace t = ctwin::read_trace_file(f);
  std::map<std::string, std::uint32_t> lane;
  for (std::uint32_t i = 0; i < t.lanes.size(); ++i)
    if (t.str(t.lanes[i].process) == "job") lane[t.str(t.lanes[i].thread)] = i;
  for (const char* l : {"training", "checkpoints", "failures", "detection", "restarts", "elastic"}) {
    CAPTURE(l);
    CHECK(lane.count(l) == 1);
  }
  std::map<std::string, int> count;
  std::map<std::string, double> seconds;
  for (const auto& e : t.events) {
    if (t.str(t.lanes[e.lane].process) != "job") continue;
    const std::string key = t.str(t.lanes[e.lane].thread) + "/" + t.str(e.kind);
    ++count[key];
    seconds[key] += static_cast<double>(e.dur_ps) * 1e-12;
  }
  const auto& job = j["job"];
  CHECK(count["failures/failure"] == 1);
  CHECK(count["detection/detection"] == 1);
  CHECK(seconds["detection/detection"] == abs_approx(30, 1e-9));  // s
  CHECK(seconds["restarts/reschedule"] == abs_approx(120, 1e-9));
  CHECK(seconds["restarts/restart"] == abs_approx(job["lost_s"]["restart"].get<double>(), 1e-9));
  CHECK(seconds["restarts/load"] == abs_approx(job["lost_s"]["checkpoint_load"].get<double>(), 1e-9));
  CHECK(count["checkpoints/checkpoint"] == job["checkpoint"]["checkpoints"].get<int>());
  CHECK(seconds["checkpoints/checkpoint"] == abs_approx(job["lost_s"]["checkpoint"].get<double>(), 1e-6));
  // The failure at 290 s, on the failures lane.
  for (const auto& e : t.events) {
    if (e.lane == lane["failures"]) CHECK(e.start_ps == 290'000'000'000'000);
  }
  // Training segments, and the job's lanes tile its wall time (training + stalls + recovery).
  CHECK(seconds["training/train"] + seconds["checkpoints/checkpoint"] + seconds["detection/detection"] +
            seconds["restarts/reschedule"] + seconds["restarts/restart"] + seconds["restarts/load"] ==
        abs_approx(job["time_to_train_s"].get<double>(), 1e-6));
  // The first step's GPUs in their own lanes, at the job's start.
  int step_lanes = 0;
  for (const auto& l : t.lanes) step_lanes += t.str(l.group).rfind("first step / ", 0) == 0;
  CHECK(step_lanes > 0);
}

TEST_CASE("a job longer than a trace's 106 days is refused naming --trace and the limit") {
  const std::string f = fresh("long.ctt");
  // 40 million steps of about 0.29 s: about 134 days.
  const Run r =
      cli("run " + std::string(kOneFailure) + " --set /job/train_steps=40000000 --set /job/failures=[] --trace " + f);
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find("--trace") != std::string::npos);
  CHECK(r.err.find("106.75 days") != std::string::npos);
  CHECK(!std::filesystem::exists(f));
  // Without --trace the same job runs.
  CHECK(cli("run " + std::string(kOneFailure) + " --set /job/train_steps=40000000 --set /job/failures=[] --json")
            .status == 0);
}

TEST_CASE("with /training/noise the job's step is the mean of the simulated steps") {
  const auto j = run_json(std::string(kOneFailure) + R"( --set '/training/noise={"steps": 4, "kernel_jitter": 0.05}')");
  const auto& steps = j["steps"]["step_times_s"];
  REQUIRE(steps.size() == 4);
  double mean = 0;
  for (const auto& s : steps) mean += s.get<double>() / 4;
  CHECK(steps[0].get<double>() != steps[1].get<double>());
  CHECK(j["job"]["configurations"][0]["step_s"].get<double>() == rel_approx(mean, 1e-12));
  CHECK(j["job"]["step_s"].get<double>() == rel_approx(mean, 1e-12));
}

TEST_CASE("--trace of an elastic job: a resize instant per resize, the dp counter at each shrunk size" *
          doctest::test_suite("slow")) {
  const std::string f = fresh("elastic.ctt");
  const auto j =
      run_json("scenarios/job-llama3-70b-1024xh100-elastic.json --set /job/monte_carlo/replications=1 --trace " + f);
  const ctwin::Trace t = ctwin::read_trace_file(f);
  int resizes = 0;
  for (const auto& e : t.events) {
    if (t.str(t.lanes[e.lane].process) != "job" || t.str(t.lanes[e.lane].thread) != "elastic") continue;
    if (t.str(e.kind) == "resize") {
      ++resizes;
      CHECK(e.dur_ps == 0);
    }
  }
  CHECK(resizes == j["job"]["resizes"].get<int>());
  REQUIRE(resizes > 0);
  // The counter of replicas steps down from 32 and every value is a configuration simulated.
  const ctwin::TraceCounterTrack* dp = nullptr;
  for (const auto& c : t.counters)
    if (t.str(c.process) == "job" && t.str(c.name) == "dp_replicas") dp = &c;
  REQUIRE(dp != nullptr);
  REQUIRE(!dp->samples.empty());
  CHECK(dp->samples.front().second == 32);
  bool below = false;
  for (const auto& [at, v] : dp->samples) {
    below = below || v < 32;
    bool simulated = false;
    for (const auto& c : j["job"]["configurations"]) simulated = simulated || c["dp"].get<double>() == v;
    CHECK(simulated);
  }
  CHECK(below);
}

TEST_CASE("slow GPUs: the job asks for the slow configuration, re-simulated slower, and reports the straggler time") {
  // 1 of the 2 nodes holds a slow GPU (1.2x) from the start and is never evicted: every step runs
  // slow, and the straggler time is the steps times the difference of the two simulated steps.
  const auto j =
      run_json(std::string(kOneFailure) +
               R"( --set /job/failures=[] --set '/job/stragglers={"slow_node_fraction": 0.5, "slowdown": 1.2}')");
  const auto& configs = j["job"]["configurations"];
  double healthy = 0, slow = 0;
  for (const auto& c : configs) {
    if (c["dp"] != 16 || c["background_write"] == true) continue;
    (c["slow_gpus"].get<int>() == 0 ? healthy : slow) = c["step_s"].get<double>();
  }
  REQUIRE(healthy > 0);
  REQUIRE(slow > 0);
  CHECK(healthy == j["step_time_s"].get<double>());
  CHECK(slow > 1.1 * healthy);  // data parallel on 2 nodes: compute-bound, most of the 1.2x shows
  CHECK(slow <= 1.2 * healthy * (1 + 1e-9));
  CHECK(j["job"]["lost_s"]["stragglers"].get<double>() == rel_approx(2000 * (slow - healthy), 1e-9));
}

namespace ctwin {
TEST_CASE("shrink: the job never runs a replica count whose shrunk layout would not fit; below it, it waits") {
  // Llama-3-70B, ZeRO-3, full recomputation on 4 nodes at DP 32 (one GPU a replica): the model
  // state is 16 bytes a parameter over the replicas, 35 GB a GPU at DP 32, twice that at DP 16.
  // Two nodes fail (8 replicas each): DP 24 fits, DP 16 would not, so the job waits there.
  const std::string sets =
      R"( --set /cluster/nodes=4 --set /model=\"llama3-70b\" --set /training/micro_batch=1)"
      R"( --set /training/global_batch=32 --set /training/recompute=\"full\")"
      R"( --set '/training/parallelism={"tp": 1, "pp": 1, "dp": 32, "zero_stage": 3}')"
      R"( --set '/job/elasticity={"policy": "shrink", "min_dp": 1}' --set /job/restart/repair_s=1e6)"
      R"( --set '/job/failures=[{"at_s": 290, "cause": "host", "first_node": 0}, {"at_s": 600, "cause": "host", "first_node": 1}]')";
  const auto j = run_json(std::string(kOneFailure) + sets);
  const int floor = j["job"]["shrink_memory_floor_dp"].get<int>();
  CAPTURE(floor);
  // The memory model at the floor and one below, on the shrunk layout (the batch kept: 32
  // sequences over d replicas, ceil(32 / d) micro-batches each).
  const Scenario sc =
      load_scenario(test::source_dir() + "/" + kOneFailure,
                    {parse_override("/cluster/nodes=4"), parse_override("/model=\"llama3-70b\""),
                     parse_override("/training/micro_batch=1"), parse_override("/training/global_batch=32"),
                     parse_override("/training/recompute=\"full\""),
                     parse_override(R"(/training/parallelism={"tp": 1, "pp": 1, "dp": 32, "zero_stage": 3})")});
  const TrainingJob& tj = training_job(sc);
  const auto fits = [&](int d) {
    TrainingConfig c = tj.training;
    c.parallel.dp = d;
    c.global_batch = (32 + d - 1) / d * d;
    return !estimate_memory(tj.model, c, sc.cluster.gpu.hbm_bytes).oom;
  };
  CHECK(fits(32));
  CHECK(fits(floor));
  CHECK_FALSE(fits(floor - 1));
  // 16 N bytes over d replicas beside ~20 GB of the rest: the floor lies between 16 and 24.
  CHECK(floor > 16);
  CHECK(floor <= 24);
  bool at_24 = false;
  for (const auto& c : j["job"]["configurations"]) {
    CHECK(c["dp"].get<int>() >= floor);
    at_24 = at_24 || c["dp"].get<int>() == 24;
  }
  CHECK(at_24);
}
}  // namespace ctwin
