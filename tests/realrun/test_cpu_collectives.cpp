#include <doctest/doctest.h>

#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "realrun/cpu_collectives.hpp"
#include "realrun/cuda_backend.hpp"

#include "tolerance.hpp"

using namespace ctwin::realrun;
using ctwin::test::abs_approx;

TEST_CASE("the CPU ring all-reduce sums every rank's buffer into every rank") {
  for (int n : {1, 2, 3, 8}) {
    const std::size_t len = 1000;  // not a multiple of n: uneven chunks
    std::vector<std::vector<float>> data(n, std::vector<float>(len));
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < len; ++i) data[r][i] = static_cast<float>(r + 1) * static_cast<float>(i % 7);
    }
    std::vector<std::span<float>> spans(data.begin(), data.end());
    const std::size_t sent = ring_all_reduce(spans);
    // Closed form: sum over r of (r+1) * (i % 7) = n(n+1)/2 * (i % 7).
    bool ok = true;
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < len; ++i) ok = ok && data[r][i] == static_cast<float>(n * (n + 1) / 2 * (i % 7));
    }
    CHECK(ok);
    // Each rank sends 2(n-1)/n of the buffer: the all-reduce bus factor. Chunks are whole
    // elements, so each of the 2(n-1) chunks sent is within one float of len/n.
    const double expected = n == 1 ? 0.0 : 2.0 * (n - 1) / n * len * sizeof(float);
    CHECK(static_cast<double>(sent) == abs_approx(expected, 2.0 * (n - 1) * sizeof(float)));  // bytes
  }
}

TEST_CASE("the GPU backend is reported as built exactly when CUDA was found at configure time") {
#ifdef CTWIN_HAVE_CUDA
  CHECK(gpu_backend_built());
#else
  CHECK_FALSE(gpu_backend_built());
#endif
}

namespace {

// Runs fn(member) on one thread per member and joins them.
template <class Fn>
void on_ranks(int n, Fn fn) {
  std::vector<std::jthread> t;
  for (int r = 0; r < n; ++r) t.emplace_back(fn, r);
}

std::vector<int> iota_ranks(int n) {
  std::vector<int> r(static_cast<std::size_t>(n));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

// The rank whose chunk holds element i of a buffer of len split over n (chunk c starts at c*len/n).
int owner(std::size_t i, std::size_t len, int n) {
  int c = 0;
  while (c + 1 < n && (static_cast<std::size_t>(c) + 1) * len / static_cast<std::size_t>(n) <= i) ++c;
  return c;
}

}  // namespace

TEST_CASE("shared-memory collectives give the closed-form sums and gathers on 2-4 ranks and odd sizes") {
  for (int n : {2, 3, 4}) {
    for (std::size_t len : {std::size_t{1}, std::size_t{7}, std::size_t{1001}}) {
      CAPTURE(n);
      CAPTURE(len);
      ShmComm comm(iota_ranks(n), "dp", 10.0);
      std::vector<std::vector<float>> ar(n), ag(n), rs(n), bc(n);
      for (int r = 0; r < n; ++r) {
        ar[r].resize(len);
        ag[r].assign(len, -1.0f);
        rs[r].resize(len);
        bc[r].assign(len, -5.0f);
        for (std::size_t i = 0; i < len; ++i) {
          ar[r][i] = static_cast<float>((r + 1) * static_cast<int>(i % 5) + static_cast<int>(i));
          rs[r][i] = static_cast<float>((r + 1) * static_cast<int>(i % 9));
          if (r == 0) bc[r][i] = static_cast<float>(3 * i);
        }
        const auto [lo, hi] = chunk_bounds(len, static_cast<std::size_t>(n), static_cast<std::size_t>(r));
        for (std::size_t i = lo; i < hi; ++i) ag[r][i] = static_cast<float>(1000 * r) + static_cast<float>(i);
      }
      on_ranks(n, [&](int r) {
        comm.all_reduce(r, ar[r]);
        comm.all_gather(r, ag[r]);
        comm.reduce_scatter(r, rs[r]);
        comm.broadcast(r, bc[r]);
      });
      const int tri = n * (n + 1) / 2;  // sum over r of (r + 1)
      bool all_reduce_ok = true, all_gather_ok = true, reduce_scatter_ok = true, broadcast_ok = true;
      for (int r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < len; ++i) {
          const int ii = static_cast<int>(i);
          all_reduce_ok &= ar[r][i] == static_cast<float>(tri * (ii % 5) + n * ii);
          all_gather_ok &= ag[r][i] == static_cast<float>(1000 * owner(i, len, n) + ii);
          if (owner(i, len, n) == r) reduce_scatter_ok &= rs[r][i] == static_cast<float>(tri * (ii % 9));
          broadcast_ok &= bc[r][i] == static_cast<float>(3 * ii);
        }
      }
      CHECK(all_reduce_ok);
      CHECK(all_gather_ok);
      CHECK(reduce_scatter_ok);
      CHECK(broadcast_ok);
    }
  }
}

TEST_CASE("all-to-all sends chunk j of rank i to chunk i of rank j; send/recv copies the sender's buffer") {
  for (int n : {2, 3, 4}) {
    CAPTURE(n);
    const std::size_t len = static_cast<std::size_t>(5 * n);  // chunks of 5
    ShmComm comm(iota_ranks(n), "ep", 10.0);
    std::vector<std::vector<float>> send(n, std::vector<float>(len)), recv(n, std::vector<float>(len, -1.0f));
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < len; ++i) send[r][i] = static_cast<float>(100 * r) + static_cast<float>(i);
    }
    on_ranks(n, [&](int r) { comm.all_to_all(r, send[r], recv[r]); });
    bool ok = true;
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < n; ++i) {
        for (std::size_t t = 0; t < 5; ++t) {
          // recv[j] chunk i = send[i] chunk j
          ok &= recv[j][5 * i + t] == static_cast<float>(100 * i + 5 * j + static_cast<int>(t));
        }
      }
    }
    CHECK(ok);
  }
  ShmComm pair({3, 7}, "pp", 10.0);
  CHECK(pair.member_of(7) == 1);
  CHECK(pair.member_of(5) == -1);
  std::vector<float> a(13, 2.5f), b(13, 0.0f);
  on_ranks(2, [&](int r) { pair.send_recv(r, r == 0 ? std::span<float>(a) : std::span<float>(b), r == 0); });
  CHECK(b == std::vector<float>(13, 2.5f));
  CHECK(a == std::vector<float>(13, 2.5f));
}

TEST_CASE("a rank that never joins a collective times out with a message naming it and the communicator") {
  ShmComm comm({0, 1, 2}, "dp", 0.2);
  std::vector<float> x(8, 1.0f), y(8, 1.0f);
  std::string e0, e1;
  on_ranks(2, [&](int r) {
    try {
      comm.all_reduce(r, r == 0 ? std::span<float>(x) : std::span<float>(y));
    } catch (const CollectiveTimeout& e) {
      (r == 0 ? e0 : e1) = e.what();
    }
  });
  CHECK(e0.find("rank 2 never joined all_reduce on communicator 'dp' (ranks 0, 1, 2)") != std::string::npos);
  CHECK(e1 == e0);
  // Aborted: the late rank fails at once instead of waiting for peers that have gone.
  CHECK_THROWS_AS(comm.all_reduce(2, x), CollectiveTimeout);
}

TEST_CASE("eager point-to-point: messages arrive in the order posted, a missing sender times out naming it") {
  ShmComm pair({0, 1}, "pp", 0.2);
  std::vector<float> a(6, 1.0f), b(6, 2.0f), got(6, 0.0f);
  pair.post(0, a);  // returns at once: no receiver yet
  pair.post(0, b);
  pair.take(1, got);
  CHECK(got == a);
  pair.take(1, got);
  CHECK(got == b);
  std::string msg;
  try {
    pair.take(1, got);
  } catch (const CollectiveTimeout& e) {
    msg = e.what();
  }
  CHECK(msg.find("rank 0 never sent to rank 1 on communicator 'pp'") != std::string::npos);
}

TEST_CASE("send/recv over more than two ranks is a ring step: each rank gets its left neighbour's buffer") {
  const int n = 3;
  ShmComm ring(iota_ranks(n), "cp", 10.0);
  std::vector<std::vector<float>> d(n);
  for (int r = 0; r < n; ++r) d[r].assign(5, static_cast<float>(10 * r));
  on_ranks(n, [&](int r) { ring.send_recv(r, d[r], true); });
  CHECK(d[0] == std::vector<float>(5, 20.0f));  // from rank 2
  CHECK(d[1] == std::vector<float>(5, 0.0f));
  CHECK(d[2] == std::vector<float>(5, 10.0f));
}
