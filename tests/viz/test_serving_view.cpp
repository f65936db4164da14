// How the viewer shows a serving trace (workloads/serving_trace.hpp): its kinds have fixed,
// distinct colours, a group of request slots too tall for a screen starts collapsed into one
// utilization row, and its summary figures read as words.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "sim/trace.hpp"
#include "viz/colors.hpp"
#include "viz/text_format.hpp"
#include "viz/timeline_model.hpp"

using namespace ctwin;
using namespace ctwin::viz;

namespace {

// A replica lane and `slots` request lanes, one busy event each, and a queue counter.
Trace serving_like(std::uint32_t slots) {
  Trace t;
  t.add_lane("replica", "gpu 0", "replica", 0, 0);
  for (std::uint32_t s = 0; s < slots; ++s) t.add_lane("requests", "slot " + std::to_string(s), "requests", 1, s);
  const auto name = t.intern("req"), kind = t.intern("decode");
  for (std::uint32_t l = 0; l <= slots; ++l) t.events.push_back(TraceEvent{0, 1000, 0, 0, l, name, kind, kNoIndex});
  TraceCounterTrack c;
  c.process = t.intern("replica");
  c.name = t.intern("queue_length");
  c.samples = {{0, 3}, {500, 1}};
  t.counters.push_back(c);
  return t;
}

}  // namespace

TEST_CASE("serving view: batch and request kinds have fixed colours, distinct from each other") {
  const std::string_view kinds[] = {"prefill", "decode", "mixed", "queued", "rejected"};
  const auto known = known_kinds();
  for (std::size_t i = 0; i < std::size(kinds); ++i) {
    CAPTURE(kinds[i]);
    CHECK(std::find(known.begin(), known.end(), kinds[i]) != known.end());
    for (std::size_t j = i + 1; j < std::size(kinds); ++j) CHECK(kind_color(kinds[i]) != kind_color(kinds[j]));
  }
  CHECK(kind_color("mixed") == rgba(175, 122, 197));
}

TEST_CASE("serving view: more request slots than kAutoCollapseLanes start collapsed, fewer stay open") {
  {
    TimelineModel m(serving_like(kAutoCollapseLanes + 1));
    REQUIRE(m.groups().size() == 2);
    CHECK_FALSE(m.groups()[0].collapsed);
    CHECK(m.groups()[1].collapsed);
    // header, the GPU lane, its counter; header and the requests' one utilization row.
    REQUIRE(m.rows().size() == 5);
    CHECK(m.rows()[2].kind == RowKind::counter);
    CHECK(m.rows()[4].kind == RowKind::summary);
    CHECK(m.row_of_lane(kAutoCollapseLanes) == 4);
    m.set_collapsed(1, false);
    CHECK(m.rows().size() == 4 + kAutoCollapseLanes + 1);
  }
  TimelineModel m(serving_like(kAutoCollapseLanes));
  CHECK_FALSE(m.groups()[1].collapsed);
  CHECK(m.rows().size() == 4 + kAutoCollapseLanes);
}

TEST_CASE("serving view: the summary's serving figures are labelled in words") {
  CHECK(summary_label("ttft_p99_s") == "time to first token p99");
  CHECK(summary_label("tpot_p50_s") == "time per output token p50");
  CHECK(summary_label("goodput_requests_per_second") == "goodput (requests per second meeting every SLO)");
  CHECK(summary_label("kv_peak_utilization") == "KV cache peak utilization");
  CHECK(summary_label("gpu_idle_s") == "GPU idle");
}
