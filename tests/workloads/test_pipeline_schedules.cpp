// Pipeline schedules checked against hand-worked orders written out literally.
//
// Notation: "F3" is the forward of micro-batch 3, "B3" its backward, "W3" its deferred
// weight-gradient pass (zero-bubble); "F3.1" is micro-batch 3 on model chunk 1 (interleaved).
// References: GPipe (Huang et al. 2019): all forwards, then all backwards. 1F1B /
// PipeDream-Flush (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on
// GPU Clusters Using Megatron-LM", Fig. 4 top): stage s of p runs p - s - 1 warm-up forwards,
// then alternates one forward one backward, then drains. Interleaved 1F1B (same paper, Fig. 4
// bottom; Megatron-LM megatron/core/pipeline_parallel/schedules.py,
// forward_backward_pipelining_with_interleaving): (p - s - 1) * 2 + (v - 1) * p warm-up chunk
// forwards (all of them when that reaches m v); chunk-forward k runs chunk (k mod pv) / p and
// micro-batch (k / pv) * p + k mod p; backward k runs chunk v - 1 - (k mod pv) / p.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "workloads/pipeline_schedule.hpp"

using namespace ctwin;

namespace {

using Pass = PipelineSlot::Pass;

// "F0 F1 B0 F2.1" -> slots.
std::vector<PipelineSlot> parse(const std::string& text) {
  std::vector<PipelineSlot> out;
  std::istringstream in(text);
  std::string tok;
  while (in >> tok) {
    PipelineSlot s;
    s.pass = static_cast<Pass>(tok[0]);
    const auto dot = tok.find('.');
    s.micro_batch = std::stoi(tok.substr(1, dot == std::string::npos ? std::string::npos : dot - 1));
    s.chunk = dot == std::string::npos ? 0 : std::stoi(tok.substr(dot + 1));
    out.push_back(s);
  }
  return out;
}

std::string show(const std::vector<PipelineSlot>& order, bool chunks = false) {
  std::ostringstream out;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (i > 0) out << ' ';
    out << static_cast<char>(order[i].pass) << order[i].micro_batch;
    if (chunks) out << '.' << order[i].chunk;
  }
  return out.str();
}

// Runs every stage's order against the pipeline's data dependencies, one slot per stage per
// round when its inputs are ready: the forward of virtual stage u needs the forward of u - 1;
// the backward of u needs the backward of u + 1 (and u's own forward); a weight pass needs
// its own backward. Virtual stage u = chunk * pp + stage. Returns false on a deadlock.
bool executable(const std::vector<std::vector<PipelineSlot>>& orders, int pp, int v) {
  std::set<std::tuple<char, int, int>> done;  // (pass, micro-batch, virtual stage)
  std::vector<std::size_t> next(orders.size(), 0);
  const int last = pp * v - 1;
  for (;;) {
    bool progress = false, finished = true;
    for (int st = 0; st < pp; ++st) {
      if (next[st] == orders[st].size()) continue;
      finished = false;
      const auto& s = orders[st][next[st]];
      const int u = s.chunk * pp + st;
      bool ready = false;
      if (s.pass == Pass::forward) ready = u == 0 || done.count({'F', s.micro_batch, u - 1});
      if (s.pass == Pass::backward) {
        ready = done.count({'F', s.micro_batch, u}) && (u == last || done.count({'B', s.micro_batch, u + 1}));
      }
      if (s.pass == Pass::weight) ready = done.count({'B', s.micro_batch, u});
      if (!ready) continue;
      done.insert({static_cast<char>(s.pass), s.micro_batch, u});
      ++next[st];
      progress = true;
    }
    if (finished) return true;
    if (!progress) return false;
  }
}

std::vector<std::vector<PipelineSlot>> all_stages(PipelineSchedule sc, int pp, int m, int v = 1) {
  std::vector<std::vector<PipelineSlot>> o;
  for (int s = 0; s < pp; ++s) o.push_back(pipeline_order(sc, pp, s, m, v));
  return o;
}

int warmup_forwards(const std::vector<PipelineSlot>& order) {
  int n = 0;
  for (const auto& s : order) {
    if (s.pass != Pass::forward) break;
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("GPipe on 2 stages, 4 micro-batches: every stage runs F0..F3 then B0..B3, holding all 4") {
  for (int stage : {0, 1}) {
    const auto o = pipeline_order(PipelineSchedule::gpipe, 2, stage, 4);
    CHECK(show(o) == "F0 F1 F2 F3 B0 B1 B2 B3");
    CHECK(max_in_flight(o) == 4);
  }
}

TEST_CASE("1F1B on 4 stages, 8 micro-batches: stage 0 runs 3 warm-up forwards and holds 4 micro-batches") {
  const auto o = pipeline_order(PipelineSchedule::one_f_one_b, 4, 0, 8);
  CHECK(show(o) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  CHECK(warmup_forwards(o) == 4);  // 3 warm-up forwards plus the first of the steady state
  CHECK(max_in_flight(o) == 4);
}

TEST_CASE("1F1B on 4 stages, 8 micro-batches: stages 1, 2, 3 run 2, 1, 0 warm-up forwards") {
  const auto s1 = pipeline_order(PipelineSchedule::one_f_one_b, 4, 1, 8);
  const auto s2 = pipeline_order(PipelineSchedule::one_f_one_b, 4, 2, 8);
  const auto s3 = pipeline_order(PipelineSchedule::one_f_one_b, 4, 3, 8);
  CHECK(show(s1) == "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  CHECK(show(s2) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7");
  CHECK(show(s3) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
}

TEST_CASE("1F1B: stage s of p holds p - s micro-batches (p=2,3,4; m=4,8)") {
  for (int pp : {2, 3, 4}) {
    for (int m : {4, 8}) {
      for (int s = 0; s < pp; ++s) {
        CAPTURE(pp);
        CAPTURE(m);
        CAPTURE(s);
        CHECK(max_in_flight(pipeline_order(PipelineSchedule::one_f_one_b, pp, s, m)) == pp - s);
      }
    }
  }
}

TEST_CASE("1F1B on 3 stages, 4 micro-batches: stage 0 F0 F1 F2 B0 F3 B1 B2 B3, stage 1 F0 F1 B0 F2 B1 F3 B2 B3") {
  CHECK(show(pipeline_order(PipelineSchedule::one_f_one_b, 3, 0, 4)) == "F0 F1 F2 B0 F3 B1 B2 B3");
  CHECK(show(pipeline_order(PipelineSchedule::one_f_one_b, 3, 1, 4)) == "F0 F1 B0 F2 B1 F3 B2 B3");
  CHECK(show(pipeline_order(PipelineSchedule::one_f_one_b, 3, 2, 4)) == "F0 B0 F1 B1 F2 B2 F3 B3");
}

TEST_CASE("1F1B with fewer micro-batches than stages (p=4, m=2): stage 0 holds both, stage 2 holds 2, stage 3 one") {
  CHECK(show(pipeline_order(PipelineSchedule::one_f_one_b, 4, 0, 2)) == "F0 F1 B0 B1");
  CHECK(max_in_flight(pipeline_order(PipelineSchedule::one_f_one_b, 4, 0, 2)) == 2);
  CHECK(max_in_flight(pipeline_order(PipelineSchedule::one_f_one_b, 4, 2, 2)) == 2);
  CHECK(max_in_flight(pipeline_order(PipelineSchedule::one_f_one_b, 4, 3, 2)) == 1);
}

TEST_CASE("interleaved on 2 stages, 2 chunks, 4 micro-batches: stage 0 runs 4 warm-up chunk forwards") {
  // warm-up = (2 - 0 - 1) * 2 + (2 - 1) * 2 = 4; micro-batches go in groups of p = 2 per chunk.
  const auto s0 = pipeline_order(PipelineSchedule::interleaved, 2, 0, 4, 2);
  CHECK(show(s0, true) == "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  // 5 chunk-forwards = 2.5 stage micro-batches = p (1 + (p - 1) / (p v)) = 2 (1 + 1/4).
  CHECK(max_in_flight(s0) == 5);
  // Stage 1: warm-up = 0 + (2 - 1) * 2 = 2.
  const auto s1 = pipeline_order(PipelineSchedule::interleaved, 2, 1, 4, 2);
  CHECK(show(s1, true) == "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
  CHECK(max_in_flight(s1) == 3);
}

TEST_CASE("interleaved on 4 stages, 2 chunks, 8 micro-batches: stage 0 runs 10 warm-up chunk forwards") {
  const auto s0 = pipeline_order(PipelineSchedule::interleaved, 4, 0, 8, 2);
  CHECK(show(s0, true) ==
        "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 F4.0 F5.0 "
        "F6.0 B0.1 F7.0 B1.1 F4.1 B2.1 F5.1 B3.1 F6.1 B0.0 F7.1 B1.0 "
        "B2.0 B3.0 B4.1 B5.1 B6.1 B7.1 B4.0 B5.0 B6.0 B7.0");
  CHECK(warmup_forwards(s0) == 11);  // 10 warm-up plus the first steady-state forward
  // Megatron's activation factor (Korthikanti et al. 2022, Sec. 4.2.3): stage 0 holds
  // p (1 + (p - 1) / (p v)) = 4 * 11/8 = 5.5 stage micro-batches = 11 chunk forwards.
  CHECK(max_in_flight(s0) == 11);
}

TEST_CASE("interleaved, 2 chunks: stage s holds 2(p-s-1) + p(v-1) + 1 chunk forwards (p=2,4; m=8)") {
  for (int pp : {2, 4}) {
    for (int s = 0; s < pp; ++s) {
      CAPTURE(pp);
      CAPTURE(s);
      const auto o = pipeline_order(PipelineSchedule::interleaved, pp, s, 8, 2);
      CHECK(warmup_forwards(o) == 2 * (pp - s - 1) + pp * (2 - 1) + 1);
      CHECK(max_in_flight(o) == 2 * (pp - s - 1) + pp * (2 - 1) + 1);
    }
  }
}

TEST_CASE(
    "interleaved with as many micro-batches as stages (p=2, m=2, v=2): the last stage still warms up 2(p-s-1) + "
    "p(v-1)") {
  // Current Megatron-LM (schedules.py get_pp_rank_microbatches at d98e8a64dd) has no all-forwards
  // rule for m == p: stage 1 warms up 0 + 2 = 2 chunk forwards, stage 0 all 4 (2 + 2 reaches m v).
  const auto s1 = pipeline_order(PipelineSchedule::interleaved, 2, 1, 2, 2);
  CHECK(show(s1, true) == "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0");
  CHECK(max_in_flight(s1) == 3);
  const auto s0 = pipeline_order(PipelineSchedule::interleaved, 2, 0, 2, 2);
  CHECK(show(s0, true) == "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0");
}

TEST_CASE("interleaved with one chunk per stage is 1F1B") {
  for (int s = 0; s < 4; ++s) {
    CHECK(pipeline_order(PipelineSchedule::interleaved, 4, s, 8, 1) ==
          pipeline_order(PipelineSchedule::one_f_one_b, 4, s, 8));
  }
}

TEST_CASE("every stage runs each (micro-batch, chunk) forward and backward exactly once, backward after forward") {
  struct Case {
    PipelineSchedule sc;
    int pp, m, v;
  };
  for (const Case& c : {Case{PipelineSchedule::gpipe, 3, 4, 1}, Case{PipelineSchedule::one_f_one_b, 4, 8, 1},
                        Case{PipelineSchedule::one_f_one_b, 4, 2, 1}, Case{PipelineSchedule::interleaved, 2, 4, 2},
                        Case{PipelineSchedule::interleaved, 4, 8, 2}, Case{PipelineSchedule::interleaved, 2, 4, 4}}) {
    for (int s = 0; s < c.pp; ++s) {
      CAPTURE(static_cast<int>(c.sc));
      CAPTURE(c.pp);
      CAPTURE(s);
      const auto o = pipeline_order(c.sc, c.pp, s, c.m, c.v);
      CHECK(o.size() == static_cast<std::size_t>(2 * c.m * c.v));
      std::map<std::pair<int, int>, int> fpos, bpos;
      for (std::size_t i = 0; i < o.size(); ++i) {
        auto& where = o[i].pass == Pass::forward ? fpos : bpos;
        CHECK(where.count({o[i].micro_batch, o[i].chunk}) == 0);
        where[{o[i].micro_batch, o[i].chunk}] = static_cast<int>(i);
      }
      CHECK(fpos.size() == static_cast<std::size_t>(c.m * c.v));
      CHECK(bpos.size() == static_cast<std::size_t>(c.m * c.v));
      for (const auto& [k, b] : bpos) CHECK(fpos.at(k) < b);
    }
  }
}

TEST_CASE("the stages' orders together run to completion under pipeline data dependencies (no deadlock)") {
  CHECK(executable(all_stages(PipelineSchedule::gpipe, 4, 8), 4, 1));
  CHECK(executable(all_stages(PipelineSchedule::one_f_one_b, 2, 4), 2, 1));
  CHECK(executable(all_stages(PipelineSchedule::one_f_one_b, 3, 4), 3, 1));
  CHECK(executable(all_stages(PipelineSchedule::one_f_one_b, 4, 8), 4, 1));
  CHECK(executable(all_stages(PipelineSchedule::one_f_one_b, 4, 2), 4, 1));
  CHECK(executable(all_stages(PipelineSchedule::interleaved, 2, 4, 2), 2, 2));
  CHECK(executable(all_stages(PipelineSchedule::interleaved, 4, 8, 2), 4, 2));
  CHECK(executable(all_stages(PipelineSchedule::interleaved, 2, 2, 2), 2, 2));
  CHECK(executable(all_stages(PipelineSchedule::interleaved, 3, 6, 3), 3, 3));
}

TEST_CASE("the deadlock checker itself rejects a stage that runs a backward before its successor's") {
  // Stage 0 insists on B0 before stage 1 has run it while stage 1 waits for F1: a cycle.
  const std::vector<std::vector<PipelineSlot>> bad = {parse("F0 B0 F1 B1"), parse("F0 F1 B0 B1")};
  CHECK_FALSE(executable(bad, 2, 1));
}

TEST_CASE("max_in_flight counts forwards whose backward has not run; weight passes free nothing") {
  CHECK(max_in_flight(parse("F0 F1 B0 F2 B1 B2")) == 2);
  CHECK(max_in_flight(parse("F0 B0 W0 F1 B1 W1")) == 1);
  // A weight pass keeps nothing alive beyond its backward: F0 F1 B0 W0 F2 F3 peaks at 3.
  CHECK(max_in_flight(parse("F0 F1 B0 W0 F2 F3 B1 W1 B2 W2 B3 W3")) == 3);
}

TEST_CASE("zero-bubble on 2 stages, 2 micro-batches at equal costs: hand-worked ZB-H1 order") {
  // The greedy at tf = tb = tw = 1: stage 1 runs F0 at t=1, B0 at 2, F1 at 3, B1 at 4, then
  // its W passes; stage 0 fills the wait for B1 (t = 4..5) with W0 (Qi et al. 2024, ZB-H1).
  const auto o = zero_bubble_orders(2, 2, 1, 1, 1);
  REQUIRE(o.size() == 2);
  CHECK(show(o[0]) == "F0 F1 B0 W0 B1 W1");
  CHECK(show(o[1]) == "F0 B0 F1 B1 W0 W1");
}

TEST_CASE("zero-bubble: each stage runs every F, B and W once, B after F, W after B, at most p - s in flight") {
  for (int pp : {2, 3, 4}) {
    for (int m : {4, 8}) {
      for (double tw : {0.5, 1.0}) {
        const auto orders = zero_bubble_orders(pp, m, 1.0, 1.0, tw);
        REQUIRE(orders.size() == static_cast<std::size_t>(pp));
        CHECK(executable(orders, pp, 1));
        for (int s = 0; s < pp; ++s) {
          CAPTURE(pp);
          CAPTURE(m);
          CAPTURE(s);
          const auto& o = orders[s];
          CHECK(o.size() == static_cast<std::size_t>(3 * m));
          std::map<std::pair<char, int>, int> pos;
          for (std::size_t i = 0; i < o.size(); ++i) {
            const std::pair<char, int> key{static_cast<char>(o[i].pass), o[i].micro_batch};
            CHECK(pos.count(key) == 0);
            pos[key] = static_cast<int>(i);
          }
          for (int mb = 0; mb < m; ++mb) {
            CHECK(pos.at({'F', mb}) < pos.at({'B', mb}));
            CHECK(pos.at({'B', mb}) < pos.at({'W', mb}));
          }
          // ZB-H1 keeps 1F1B's activation memory: stage s holds at most p - s micro-batches.
          CHECK(max_in_flight(o) <= pp - s);
          CHECK(max_in_flight(o) == std::min(pp - s, m));
        }
      }
    }
  }
}

TEST_CASE("the zero-bubble order needs costs: pipeline_order refuses it") {
  CHECK_THROWS_AS(pipeline_order(PipelineSchedule::zero_bubble, 2, 0, 4), std::invalid_argument);
}
