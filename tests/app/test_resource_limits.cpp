// ctwin run's resource limits: a run whose estimated host memory exceeds --max-memory (or 90% of
// MemAvailable), or whose trace would not fit on its file system, is refused before it simulates,
// with exit 2 and a message that names the estimate and what to do (docs/resource-limits.md).
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "ctwin_cli.hpp"
#include "host_resources.hpp"
#include "sim/error.hpp"
#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::cli;
using ctwin::test::rel_approx;
using ctwin::test::Run;
using ctwin::test::temp_dir;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Llama-3-70B as scenarios/llama3-70b-1024xh100.json lays it out (TP8 PP4, interleaved), on
// 1,024 nodes: DP 256, 8,192 GPUs, 16 micro-batches per replica.
const std::string k8192 =
    "run scenarios/llama3-70b-1024xh100.json --set /cluster/nodes=1024 --set /training/parallelism/dp=256 "
    "--set /training/global_batch=4096";

}  // namespace

TEST_CASE("a run over --max-memory is refused before simulating: exit 2, the estimate, and folding suggested") {
  const auto trace = temp_dir() / "refused.ctt";
  const Run r = cli("run scenarios/quickstart.json --no-fold --max-memory 1M --trace " + trace.string());
  CHECK(r.status == kExitBadInput);
  CHECK(r.out.empty());
  CHECK(has(r.err, "needs an estimated"));
  CHECK(has(r.err, "over the limit of 1.0 MiB (--max-memory)"));
  CHECK(has(r.err, "refused before simulating"));
  CHECK(has(r.err, "of 8 simulated GPUs (every data-parallel replica)"));
  CHECK(has(r.err, "trace events"));
  // What to do: fold (one replica of 1 GPU stands for all 8), drop the trace, fewer micro-batches.
  CHECK(has(r.err, "drop --no-fold: folded (one data-parallel replica of 1 GPUs stands for all 8)"));
  CHECK(has(r.err, "drop --trace"));
  CHECK(has(r.err, "fewer micro-batches per replica (4 now)"));
  CHECK_FALSE(std::filesystem::exists(trace));
  // Folded already, there is no folding to suggest.
  const Run folded = cli("run scenarios/quickstart.json --max-memory 1K");
  CHECK(folded.status == kExitBadInput);
  CHECK(has(folded.err, "of 1 simulated GPUs:"));
  CHECK_FALSE(has(folded.err, "--no-fold"));
  CHECK_FALSE(has(folded.err, "drop --trace"));
}

TEST_CASE("the limit is the estimate itself: a byte less is refused, the estimate runs") {
  const Run r = cli("run scenarios/quickstart.json --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto est = j["resources"]["host_bytes_estimate"].get<std::uint64_t>();
  REQUIRE(est > 0);
  CHECK(cli("run scenarios/quickstart.json --max-memory " + std::to_string(est)).status == 0);
  const Run less = cli("run scenarios/quickstart.json --max-memory " + std::to_string(est - 1));
  CHECK(less.status == kExitBadInput);
  CHECK(has(less.err, "needs an estimated " + human_bytes(static_cast<double>(est))));
}

TEST_CASE("the 8,192-GPU --no-fold run is refused up front; folded it runs") {
  const auto t0 = std::chrono::steady_clock::now();
  const Run r = cli(k8192 + " --no-fold --max-memory 4G");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r.status == kExitBadInput);
  CHECK(has(r.err, "of 8192 simulated GPUs (every data-parallel replica)"));
  // 16 micro-batches x 32 GPUs x 256 replicas: tens of millions of ops, gigabytes.
  CHECK(has(r.err, "GiB of host memory, over the limit of 4.0 GiB"));
  CHECK(has(r.err, "drop --no-fold: folded (one data-parallel replica of 32 GPUs stands for all 256)"));
  CHECK(s < 10.0);  // the run itself allocates for tens of seconds; the estimate takes a fraction of one
  const Run folded = cli(k8192 + " --json --max-memory 4G");
  REQUIRE(folded.status == 0);
  const auto j = nlohmann::json::parse(folded.out);
  CHECK(j["resources"]["simulated_gpus"] == 4);  // one replica's 4 stages, each TP group of 8 folded into one rank
  CHECK(j["resources"]["host_bytes_estimate"].get<double>() < 4.0 * (1 << 30));
}

TEST_CASE("--json reports the estimate, equal to what the run counted; the trace estimate to the file written") {
  const auto trace = temp_dir() / "est.json";
  const Run r = cli("run scenarios/llama3-70b-1024xh100.json --json --trace " + trace.string());
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& res = j["resources"];
  CHECK(res["simulated_gpus"] == j["simulation"]["simulated_gpus"]);
  CHECK(res["ops"] == j["simulation"]["tasks"]);
  const double written = static_cast<double>(std::filesystem::file_size(trace));
  CHECK(res["trace_bytes_estimate"].get<double>() == rel_approx(written, 0.03));
  CHECK(res["host_bytes_estimate"].get<double>() > 0);
  // Without --trace there is no trace to estimate; the text report names the estimate.
  CHECK(nlohmann::json::parse(cli("run scenarios/quickstart.json --json").out)["resources"]["trace_bytes_estimate"] ==
        0);
  CHECK(has(cli("run scenarios/quickstart.json").out, "host memory: an estimated "));
}

TEST_CASE("a trace that would not fit on its file system is refused before simulating") {
  // /proc has no free space at all.
  const Run r = cli("run scenarios/quickstart.json --trace /proc/ctwin-test.json");
  CHECK(r.status == kExitBadInput);
  CHECK(has(r.err, "--trace: the trace needs an estimated"));
  CHECK(has(r.err, "has 0 B free"));
  CHECK(has(r.err, "as .ctt"));
}

TEST_CASE("--max-memory reads sizes with units and rejects the rest, naming the flag") {
  CHECK(parse_bytes("512M", "--max-memory") == 512.0 * 1024 * 1024);
  CHECK(parse_bytes("8G", "--max-memory") == 8.0 * 1024 * 1024 * 1024);
  CHECK(cli("run scenarios/quickstart.json --max-memory 8G").status == 0);
  for (const char* bad : {"lots", "8Q", "-1G", "0"}) {
    CAPTURE(bad);
    const Run r = cli(std::string("run scenarios/quickstart.json --max-memory ") + bad);
    CHECK(r.status == kExitBadInput);
    CHECK(has(r.err, "--max-memory"));
    CHECK(r.out.empty());
  }
}

TEST_CASE("MemAvailable is read from /proc/meminfo in KiB; sizes print in powers of 1024") {
  CHECK(parse_mem_available("MemTotal:       24000000 kB\nMemFree:  1 kB\nMemAvailable:   2048 kB\n") == 2048u * 1024);
  CHECK_FALSE(parse_mem_available("MemTotal: 1 kB\n").has_value());
  const auto host = host_available_memory();
  REQUIRE(host.has_value());
  CHECK(*host > 0);
  CHECK(human_bytes(100) == "100 B");
  CHECK(human_bytes(1024.0 * 1024) == "1.0 MiB");
  CHECK(human_bytes(5.5 * 1024 * 1024 * 1024) == "5.5 GiB");
  CHECK(human_bytes(300.0 * 1024 * 1024) == "300 MiB");
  const auto free = free_space_for(temp_dir() / "x.ctt");
  REQUIRE(free.has_value());
  CHECK(*free > 0);
  CHECK(free_space_for("/proc/x.ctt") == std::optional<std::uint64_t>(0));
}
