#include <doctest/doctest.h>

#include <vector>

#include "sim/flow.hpp"

#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

TEST_CASE("one flow on one link takes latency plus bytes over bandwidth") {
  Engine e;
  FlowNetwork net(e);
  auto l = net.add_link(100e9);
  Time done{};
  net.start(
      {l}, 1e9, [&] { done = e.now(); }, microseconds(5));
  e.run();
  CHECK(done.seconds() == rel_approx(5e-6 + 1e9 / 100e9, 1e-9));
}

TEST_CASE("two flows share a link equally; the survivor speeds up when one ends") {
  // 1 GB/s link; A moves 1 GB and B 3 GB from t=0. Both run at 0.5 GB/s until A ends at 2 s
  // with B at 1 GB done; B then runs alone at 1 GB/s and ends at 4 s.
  Engine e;
  FlowNetwork net(e);
  auto l = net.add_link(1e9);
  Time a{}, b{};
  net.start({l}, 1e9, [&] { a = e.now(); });
  net.start({l}, 3e9, [&] { b = e.now(); });
  e.run();
  CHECK(a.seconds() == rel_approx(2.0, 1e-9));
  CHECK(b.seconds() == rel_approx(4.0, 1e-9));
}

TEST_CASE("max-min fairness: a flow limited elsewhere leaves its share to the others") {
  // Link 1 (1 GB/s) carries a and b; link 2 (3 GB/s) carries b and c. Progressive filling
  // fixes link 1 first at 0.5 each; c takes what link 2 has left: 3 - 0.5 = 2.5 GB/s.
  Engine e;
  FlowNetwork net(e);
  auto l1 = net.add_link(1e9), l2 = net.add_link(3e9);
  auto a = net.start({l1}, 1e12, [] {});
  auto b = net.start({l1, l2}, 1e12, [] {});
  auto c = net.start({l2}, 1e12, [] {});
  e.run_until(Time{1});
  CHECK(net.rate_bytes_per_s(a) == rel_approx(0.5e9, 1e-9));
  CHECK(net.rate_bytes_per_s(b) == rel_approx(0.5e9, 1e-9));
  CHECK(net.rate_bytes_per_s(c) == rel_approx(2.5e9, 1e-9));
}

TEST_CASE("the textbook linear network: a long flow gets 1/2 of every link it shares") {
  // Bertsekas and Gallager, Data Networks, Section 6.5.2: links A-B, B-C, C-D of capacity 1;
  // flow 0 crosses all three, flows 1, 2, 3 one link each: all four get 1/2.
  Engine e;
  FlowNetwork net(e);
  std::vector<LinkId> l{net.add_link(1), net.add_link(1), net.add_link(1)};
  std::vector<FlowId> f;
  f.push_back(net.start(l, 100, [] {}));
  for (auto x : l) f.push_back(net.start({x}, 100, [] {}));
  e.run_until(Time{1});
  for (auto id : f) CHECK(net.rate_bytes_per_s(id) == rel_approx(0.5, 1e-9));
}

TEST_CASE("resharing touches only the flows connected to the change") {
  Engine e;
  FlowNetwork net(e);
  auto a = net.add_link(1e9), b = net.add_link(1e9);
  for (int i = 0; i < 10; ++i) net.start({a}, 1e9, [] {});
  e.run_until(Time{1});
  const auto before = net.flows_reshared();
  net.start({b}, 1e9, [] {});  // a disjoint link: its component is itself alone
  e.run_until(Time{2});
  CHECK(net.flows_reshared() - before == 1);
}

TEST_CASE("max-min with unequal capacities: bottlenecks freeze in order of their fair share") {
  // Hand-worked: link X (cap 6) carries a, b, c; link Y (cap 2) carries c and d. Y's share 1 is
  // the smallest: c = d = 1. X then has 5 left for a and b: 2.5 each. When d (2 bytes) ends at
  // 2 s, c is limited by X only: X's share over a, b, c is 2 each.
  Engine e;
  FlowNetwork net(e);
  auto x = net.add_link(6), y = net.add_link(2);
  auto a = net.start({x}, 100, [] {});
  auto b = net.start({x}, 100, [] {});
  auto c = net.start({x, y}, 100, [] {});
  auto d = net.start({y}, 2, [] {});
  e.run_until(Time{1});
  CHECK(net.rate_bytes_per_s(c) == rel_approx(1, 1e-9));
  CHECK(net.rate_bytes_per_s(d) == rel_approx(1, 1e-9));
  CHECK(net.rate_bytes_per_s(a) == rel_approx(2.5, 1e-9));
  CHECK(net.rate_bytes_per_s(b) == rel_approx(2.5, 1e-9));
  e.run_until(seconds(2.5));
  CHECK(net.rate_bytes_per_s(a) == rel_approx(2, 1e-9));
  CHECK(net.rate_bytes_per_s(c) == rel_approx(2, 1e-9));
}

TEST_CASE("a flow's own rate bound caps it and leaves the rest of the link to the others") {
  // 1 GB/s link; a is bounded at 0.2 GB/s and moves 0.4 GB, b is unbounded and moves 1.6 GB.
  // Progressive filling fixes a at its bound (below the 0.5 fair share); b takes the other
  // 0.8 GB/s. a ends at 0.4 / 0.2 = 2 s, with b at 1.6 GB done: b ends at 2 s too.
  Engine e;
  FlowNetwork net(e);
  auto l = net.add_link(1e9);
  Time a{}, b{};
  net.start(
      {l}, 0.4e9, [&] { a = e.now(); }, {}, 0.2e9);
  net.start({l}, 1.6e9, [&] { b = e.now(); });
  e.run();
  CHECK(a.seconds() == rel_approx(2.0, 1e-9));
  CHECK(b.seconds() == rel_approx(2.0, 1e-9));
  // A bound above the fair share does not bind: two flows of 1 GB, one bounded at 0.9 GB/s,
  // share equally and both end at 2 s.
  Engine e2;
  FlowNetwork net2(e2);
  auto l2 = net2.add_link(1e9);
  Time c{}, d{};
  net2.start(
      {l2}, 1e9, [&] { c = e2.now(); }, {}, 0.9e9);
  net2.start({l2}, 1e9, [&] { d = e2.now(); });
  e2.run();
  CHECK(c.seconds() == rel_approx(2.0, 1e-9));
  CHECK(d.seconds() == rel_approx(2.0, 1e-9));
  // A bounded flow alone on a wide link moves at its bound: 1 GB at 0.25 GB/s on 100 GB/s is 4 s.
  Engine e3;
  FlowNetwork net3(e3);
  auto l3 = net3.add_link(100e9);
  Time g{};
  net3.start(
      {l3}, 1e9, [&] { g = e3.now(); }, {}, 0.25e9);
  e3.run();
  CHECK(g.seconds() == rel_approx(4.0, 1e-9));
}

TEST_CASE("link bytes: every flow started counts its bytes on each link of its path, once") {
  // Flows A (2 GB over l1, l2) and B (1 GB over l2): l1 carried 2 GB, l2 3 GB, l3 nothing,
  // whether or not they have finished.
  Engine e;
  FlowNetwork net(e);
  const auto l1 = net.add_link(1e9), l2 = net.add_link(4e9), l3 = net.add_link(2e9);
  net.start({l1, l2}, 2e9, [] {});
  net.start(
      {l2}, 1e9, [] {}, microseconds(3));
  CHECK(net.link_bytes(l2) == rel_approx(3e9, 1e-12));
  e.run();
  CHECK(net.link_count() == 3);
  CHECK(net.link_bytes(l1) == rel_approx(2e9, 1e-12));
  CHECK(net.link_bytes(l2) == rel_approx(3e9, 1e-12));
  CHECK(net.link_bytes(l3) == 0);
  CHECK(net.link_capacity(l2) == rel_approx(4e9, 1e-12));
}
