// The colour of each op kind: a fixed table for the kinds ClusterTwin writes, a stable hash
// for any other.
#include <array>
#include <cstdint>
#include <string_view>

#include "viz/colors.hpp"

namespace ctwin::viz {

namespace {

struct KindColor {
  std::string_view kind;
  std::uint32_t color;
};

// Compute kinds warm, collectives cool, point-to-point green, housekeeping grey. The kinds
// are the strings the simulator writes as TraceEvent::kind: OpKind's names
// (workloads/include/workloads/compute_model.hpp) and CollectiveOp's
// (topology/include/topology/collective.hpp), and the serving trace's batch and request kinds;
// tests/viz keeps the list in step.
constexpr std::array<KindColor, 25> kKindTable{{
    {"gemm", rgba(230, 126, 34)},
    {"grouped_gemm", rgba(176, 88, 16)},
    {"attention", rgba(231, 76, 60)},
    {"elementwise", rgba(241, 196, 15)},
    {"norm", rgba(205, 170, 110)},
    {"embedding", rgba(190, 110, 180)},
    {"loss", rgba(170, 80, 130)},
    {"optimizer", rgba(155, 89, 182)},
    {"all_reduce", rgba(52, 152, 219)},
    {"all_gather", rgba(26, 188, 156)},
    {"reduce_scatter", rgba(72, 120, 230)},
    {"reduce", rgba(110, 100, 220)},
    {"all_to_all", rgba(0, 170, 210)},
    {"broadcast", rgba(100, 180, 255)},
    {"send", rgba(46, 204, 113)},
    {"recv", rgba(39, 174, 96)},
    {"send_recv", rgba(88, 214, 141)},
    {"memcpy", rgba(149, 165, 166)},
    {"prefill", rgba(236, 112, 99)},
    {"decode", rgba(93, 173, 226)},
    {"request", rgba(130, 224, 170)},
    {"idle", rgba(90, 95, 105)},
    // Serving traces (workloads/serving_trace.hpp): a batch of both prefill and decode between
    // their colours, a request waiting in the queue pale, a rejected one dark red.
    {"mixed", rgba(175, 122, 197)},
    {"queued", rgba(210, 215, 220)},
    {"rejected", rgba(146, 43, 33)},
}};

constexpr std::array<std::uint32_t, 10> kFallback{
    rgba(255, 159, 128), rgba(128, 222, 234), rgba(197, 225, 165), rgba(255, 204, 128), rgba(179, 157, 219),
    rgba(244, 143, 177), rgba(129, 212, 250), rgba(230, 238, 156), rgba(188, 170, 164), rgba(159, 168, 218),
};

std::array<std::string_view, kKindTable.size()> make_known_kinds() {
  std::array<std::string_view, kKindTable.size()> a{};
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = kKindTable[i].kind;
  return a;
}
const std::array<std::string_view, kKindTable.size()> kKnownKinds = make_known_kinds();

}  // namespace

std::uint32_t kind_color(std::string_view kind) {
  for (const auto& k : kKindTable) {
    if (k.kind == kind) return k.color;
  }
  std::uint32_t h = 2166136261u;  // FNV-1a: stable across runs and platforms
  for (char c : kind) h = (h ^ static_cast<std::uint8_t>(c)) * 16777619u;
  return kFallback[h % kFallback.size()];
}

std::span<const std::string_view> known_kinds() { return kKnownKinds; }

}  // namespace ctwin::viz
