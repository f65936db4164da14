// The CPU backend's MPI communicators (realrun/cpu_mpi.hpp) over three MPI processes, each
// collective's result against its closed form. main() (mpi_main.cpp) runs every case under
// mpirun -np 3; each process is one member.
#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "realrun/cpu_collectives.hpp"
#include "realrun/cpu_mpi.hpp"

using namespace ctwin::realrun;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

constexpr double kTimeout = 20;

}  // namespace

TEST_CASE("mpi: ring all-reduce sums every member's buffer; chunks of an uneven length included") {
  const int me = world_rank();
  auto c = make_mpi_comm({0, 1, 2}, "all", kTimeout);
  c->join(me, "create");
  // 10 elements over 3 members: chunks of 3, 3 and 4.
  std::vector<float> d(10);
  for (int i = 0; i < 10; ++i) d[i] = static_cast<float>((me + 1) * (i + 1));
  c->all_reduce(me, d);
  for (int i = 0; i < 10; ++i) CHECK(d[i] == static_cast<float>(6 * (i + 1)));  // (1 + 2 + 3)(i + 1)
}

TEST_CASE("mpi: all-gather fills every chunk with its owner's; reduce-scatter leaves member i chunk i's sum") {
  const int me = world_rank();
  auto c = make_mpi_comm({0, 1, 2}, "all", kTimeout);
  std::vector<float> d(10, -1.0f);
  auto [b, e] = chunk_bounds(d.size(), 3, static_cast<std::size_t>(me));
  for (std::size_t i = b; i < e; ++i) d[i] = static_cast<float>(100 * me + static_cast<int>(i));
  c->all_gather(me, d);
  for (int owner = 0; owner < 3; ++owner) {
    const auto [ob, oe] = chunk_bounds(d.size(), 3, static_cast<std::size_t>(owner));
    for (std::size_t i = ob; i < oe; ++i) CHECK(d[i] == static_cast<float>(100 * owner + static_cast<int>(i)));
  }
  std::vector<float> r(11);
  for (int i = 0; i < 11; ++i) r[i] = static_cast<float>((me + 1) * (i + 1));
  c->reduce_scatter(me, r);
  std::tie(b, e) = chunk_bounds(r.size(), 3, static_cast<std::size_t>(me));
  for (std::size_t i = b; i < e; ++i) CHECK(r[i] == static_cast<float>(6 * (static_cast<int>(i) + 1)));
}

TEST_CASE("mpi: all-to-all sends chunk j to member j; broadcast and reduce at a root that is not member 0") {
  const int me = world_rank();
  auto c = make_mpi_comm({0, 1, 2}, "all", kTimeout);
  std::vector<float> send(9), recv(9, -1.0f);
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 3; ++k) send[static_cast<std::size_t>(3 * j + k)] = static_cast<float>(1000 * me + 10 * j + k);
  c->all_to_all(me, send, recv);
  // Chunk j of ours came from member j's chunk `me`.
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 3; ++k)
      CHECK(recv[static_cast<std::size_t>(3 * j + k)] == static_cast<float>(1000 * j + 10 * me + k));

  std::vector<float> b(5, static_cast<float>(me));
  c->broadcast(me, b, 1);
  for (float x : b) CHECK(x == 1.0f);

  std::vector<float> r(5, static_cast<float>(me + 1));
  c->reduce(me, r, 2);
  for (float x : r) CHECK(x == (me == 2 ? 6.0f : static_cast<float>(me + 1)));
}

TEST_CASE("mpi: a communicator lists its members in its own order: ranks {2, 0}, rank 2 is member 0") {
  const int me = world_rank();
  if (me == 1) return;  // no member; creation is collective over the members only
  auto c = make_mpi_comm({2, 0}, "pair", kTimeout);
  const int member = c->member_of(me);
  CHECK(member == (me == 2 ? 0 : 1));
  // A pair: the sender's buffer is copied into the receiver's.
  std::vector<float> d(7, static_cast<float>(me));
  c->send_recv(member, d, member == 0);
  for (float x : d) CHECK(x == 2.0f);
  // Eager posts are taken in the order posted, while the poster goes on.
  if (member == 0) {
    c->post(member, std::vector<float>(4, 7.0f));
    c->post(member, std::vector<float>(4, 8.0f));
  } else {
    std::vector<float> first(4), second(4);
    c->take(member, first);
    c->take(member, second);
    CHECK(first == std::vector<float>(4, 7.0f));
    CHECK(second == std::vector<float>(4, 8.0f));
  }
  c->join(member, "end");
}

TEST_CASE("mpi: send_recv over three members is a ring step: each buffer becomes its left neighbour's") {
  const int me = world_rank();
  auto c = make_mpi_comm({0, 1, 2}, "ring", kTimeout);
  std::vector<float> d(6, static_cast<float>(10 * me));
  c->send_recv(me, d, true);
  for (float x : d) CHECK(x == static_cast<float>(10 * ((me + 2) % 3)));
}

TEST_CASE("mpi: a member that never arrives ends the call in a timeout naming its rank, and aborts the communicator") {
  const int me = world_rank();
  if (me == 2) return;
  auto c = make_mpi_comm({0, 1}, "dp", 0.5);
  c->join(me, "create");
  if (me == 1) return;  // rank 1 never joins the all-reduce
  std::vector<float> d(8, 1.0f);
  const auto t0 = std::chrono::steady_clock::now();
  std::string what;
  try {
    c->all_reduce(0, d);
  } catch (const CollectiveTimeout& e) {
    what = e.what();
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(what.find("rank(s) 1") != std::string::npos);
  CHECK(what.find("all_reduce") != std::string::npos);
  CHECK(what.find("'dp'") != std::string::npos);
  CHECK(waited >= 0.5);
  CHECK(waited < 10);
  // Aborted: the next call throws at once, without waiting out the timeout again.
  const auto t1 = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(c->all_reduce(0, d), CollectiveTimeout);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() < 0.25);
}
