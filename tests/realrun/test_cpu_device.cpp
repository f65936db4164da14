// The CPU backend's Device: in-order streams, events and cross-stream waits, kernels planned from
// an OpCost's FLOPs and geometry, and collectives between thread-ranks that fail loudly.
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "realrun/cpu_collectives.hpp"
#include "realrun/cpu_device.hpp"
#include "realrun/cpu_kernels.hpp"

#include "tolerance.hpp"

using namespace ctwin;
using namespace ctwin::realrun;

TEST_CASE("a stream that waits for another's event starts only after that stream's sleep") {
  BackendOptions opt;
  opt.ranks = 1;
  auto devs = make_cpu_devices(opt);
  auto& d = dynamic_cast<CpuDevice&>(*devs[0]);
  // Stream 1: a, sleep 0.2 s, b. Stream 0 waits for b, then records c. Stream 1 is in order, so
  // b is at least 0.2 s after a; c comes after b only because of the wait (without it stream 0
  // records c at once, about 0.2 s before b).
  const EventHandle a = d.record(1);
  d.launch_sleep(1, 0.2);
  const EventHandle b = d.record(1);
  d.wait(0, b);
  const EventHandle c = d.record(0);
  d.synchronize();
  CHECK(d.elapsed_s(a, b) >= 0.2);
  CHECK(d.elapsed_s(b, c) >= 0.0);
  CHECK(d.elapsed_s(a, c) >= 0.2);
  // In order on one stream: two sleeps of 0.05 s between e0 and e2, each between its events.
  const EventHandle e0 = d.record(2);
  d.launch_sleep(2, 0.05);
  const EventHandle e1 = d.record(2);
  d.launch_sleep(2, 0.05);
  const EventHandle e2 = d.record(2);
  d.synchronize();
  CHECK(d.elapsed_s(e0, e1) >= 0.05);
  CHECK(d.elapsed_s(e1, e2) >= 0.05);
  CHECK(d.elapsed_s(e0, e2) >= 0.1);
}

TEST_CASE("a rank that skips a collective makes its peer's device fail naming the rank and the communicator") {
  BackendOptions opt;
  opt.ranks = 2;
  auto devs = make_cpu_devices(opt);
  const CommSpec spec{4, {0, 1}, "tp"};
  {
    std::vector<std::jthread> t;
    for (int r = 0; r < 2; ++r) t.emplace_back([&, r] { devs[r]->create_comm(spec, 0.2); });
  }
  devs[0]->collective(0, CollectiveRequest{CollectiveOp::all_reduce, 4, 4096});
  std::string msg;
  try {
    devs[0]->synchronize();
  } catch (const CollectiveTimeout& e) {
    msg = e.what();
  }
  CHECK(msg.find("rank 1 never joined all_reduce on communicator 'tp'") != std::string::npos);
  // The error stays: later calls on the broken device report it too.
  CHECK_THROWS_AS(devs[0]->synchronize(), CollectiveTimeout);
}

TEST_CASE("a communicator a member never creates times out naming that member") {
  BackendOptions opt;
  opt.ranks = 3;
  auto devs = make_cpu_devices(opt);
  const CommSpec spec{0, {0, 1, 2}, "dp"};
  std::string msg;
  {
    std::vector<std::jthread> t;
    for (int r = 0; r < 2; ++r) {
      t.emplace_back([&, r] {
        try {
          devs[r]->create_comm(spec, 0.2);
        } catch (const CollectiveTimeout& e) {
          if (r == 0) msg = e.what();
        }
      });
    }
  }
  CHECK(msg.find("rank 2 never joined create_comm on communicator 'dp'") != std::string::npos);
}

TEST_CASE("collectives on devices move real data: the ranks' all-reduce and send/recv complete in order") {
  BackendOptions opt;
  opt.ranks = 2;
  auto devs = make_cpu_devices(opt);
  std::atomic<int> failures{0};
  {
    std::vector<std::jthread> t;
    for (int r = 0; r < 2; ++r) {
      t.emplace_back([&, r] {
        try {
          devs[r]->create_comm(CommSpec{0, {0, 1}, "dp"}, 10);
          devs[r]->create_comm(CommSpec{1, {0, 1}, "pp"}, 10);
          for (double bytes : {4.0, 1000.0, 65536.0}) {
            devs[r]->collective(1, CollectiveRequest{CollectiveOp::all_reduce, 0, bytes});
            devs[r]->collective(1, CollectiveRequest{CollectiveOp::all_gather, 0, bytes});
            devs[r]->collective(1, CollectiveRequest{CollectiveOp::reduce_scatter, 0, bytes});
            devs[r]->collective(1, CollectiveRequest{CollectiveOp::all_to_all, 0, bytes});
            devs[r]->collective(1, CollectiveRequest{CollectiveOp::broadcast, 0, bytes});
            devs[r]->collective(2, CollectiveRequest{CollectiveOp::send_recv, 1, bytes, 1 - r, r == 0});
          }
          devs[r]->synchronize();
        } catch (const std::exception&) {
          ++failures;
        }
      });
    }
  }
  CHECK(failures == 0);  // 18 collectives per rank, none timed out or mismatched
}

TEST_CASE("CPU kernels run the op's FLOPs: GEMM counts, attention width and causality, streaming sizes") {
  OpCost g{OpKind::gemm, 2 * 2.0 * 64 * 32 * 16, 0, 64, 32, 16};  // a backward op: dgrad + wgrad
  CpuKernelPlan p = plan_cpu_kernel(g);
  CHECK(p.m == 64);
  CHECK(p.n == 32);
  CHECK(p.k == 16);
  CHECK(p.count == 2);
  OpCost gg{OpKind::grouped_gemm, 2.0 * 64 * 32 * 16, 0, 64, 32, 16, 4};
  p = plan_cpu_kernel(gg);
  CHECK(p.m == 16);  // 64 rows over 4 experts
  CHECK(p.count == 4);
  // Causal self-attention: 2 sequences of 256 tokens, each query over 128 keys on average;
  // FLOPs 4 x pairs x 64 (QK^T and PV at width 64).
  OpCost att{OpKind::attention, 4.0 * 512 * 128 * 64, 0};
  att.query_tokens = 512;
  att.attended_pairs = 512 * 128;
  att.kv_tokens = 512;
  p = plan_cpu_kernel(att);
  CHECK(p.causal);
  CHECK(p.seq == 256);
  CHECK(p.width == 64);
  // Decode: 8 queries over 100 cached tokens each.
  OpCost dec{OpKind::attention, 4.0 * 800 * 32, 0};
  dec.query_tokens = 8;
  dec.attended_pairs = 800;
  dec.kv_tokens = 800;
  p = plan_cpu_kernel(dec);
  CHECK_FALSE(p.causal);
  CHECK(p.window == 100);
  CHECK(p.width == 32);
  OpCost norm{OpKind::norm, 600, 1200};
  p = plan_cpu_kernel(norm);
  CHECK(p.elements == 100);
  CHECK(p.passes == 3);
  // They run (a tiny case of each, on this thread).
  CpuWorkspace ws;
  for (const OpCost& op : {g, gg, att, dec, norm}) run_cpu_kernel(op, ws);
  CHECK_THROWS_AS(run_cpu_kernel(OpCost{OpKind::gemm, 2e12, 0, 1e5, 1e5, 1e2}, ws, 1e9), std::invalid_argument);
}
