// Flow-level network: concurrent flows share links by max-min fairness (progressive
// filling, Bertsekas and Gallager, Data Networks, Section 6.5.2). When flows start or end,
// rates are recomputed only for the flows connected to them through shared links, once per
// instant however many changed; each flow's completion is an engine event, rescheduled when
// its rate changes. Knows nothing of GPUs:
// topology/ maps ranks and routes onto LinkIds.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "sim/engine.hpp"
#include "sim/id.hpp"
#include "sim/time.hpp"

namespace ctwin {

struct LinkTag;
struct FlowTag;
using LinkId = Id<LinkTag>;
using FlowId = Id<FlowTag>;

class FlowNetwork {
 public:
  // batch: reshare once per instant (the default); false reshares at every single change,
  // the naive baseline of `ctwin bench network`.
  explicit FlowNetwork(Engine& engine, bool batch = true) : engine_(engine), batch_(batch) {}
  FlowNetwork(const FlowNetwork&) = delete;
  FlowNetwork& operator=(const FlowNetwork&) = delete;

  // A link (one direction) of `bytes_per_s` capacity.
  LinkId add_link(double bytes_per_s);
  // Changes a link's capacity before any flow crosses it (a degraded link); throws
  // std::logic_error once flows are active on it.
  void set_capacity(LinkId link, double bytes_per_s);

  // Starts moving `bytes` along `path` after `latency`; on_done runs when the last byte lands.
  // A path of no links completes after the latency alone. `max_bytes_per_s` bounds the flow's own
  // rate (a variable's upper bound in the max-min program, as SimGrid's): what the sender itself
  // cannot exceed whatever the links offer (one NCCL channel's copy rate, a protocol's ceiling).
  // The capacity it leaves unused goes to the other flows on its links.
  FlowId start(std::vector<LinkId> path, double bytes, std::function<void()> on_done, Time latency = {},
               double max_bytes_per_s = std::numeric_limits<double>::infinity());

  double rate_bytes_per_s(FlowId f) const { return flows_.at(f.value).rate; }
  // Per link: its capacity, and the bytes of every flow started across it so far (what the run
  // asks of it; the busiest-link report divides them by capacity x run time).
  std::size_t link_count() const { return links_.size(); }
  double link_capacity(LinkId l) const { return links_.at(l.value).capacity; }
  double link_bytes(LinkId l) const { return links_.at(l.value).bytes; }
  std::size_t active_flows() const { return active_; }
  std::uint64_t reshares() const { return reshares_; }
  std::uint64_t flows_reshared() const { return flows_reshared_; }

 private:
  struct Link {
    double capacity = 0;
    std::vector<std::uint32_t> flows;  // active flows crossing this link
    double bytes = 0;                  // of every flow started across it
  };
  struct Flow {
    std::vector<std::uint32_t> links;
    double remaining = 0;                                       // bytes
    double rate = 0;                                            // bytes per second
    double max_rate = std::numeric_limits<double>::infinity();  // the flow's own bound
    Time updated{};
    EventId done;
    std::function<void()> on_done;
    bool active = false;
  };

  void attach(std::uint32_t f);
  void finish(std::uint32_t f);
  // Changes at one instant are batched: one reshare runs after every event of that instant.
  void mark_dirty(std::uint32_t f);
  void run_pending_reshare();
  // Recomputes max-min rates for the flows connected to `seeds` and reschedules completions.
  void reshare(const std::vector<std::uint32_t>& seeds);

  Engine& engine_;
  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::size_t active_ = 0;
  std::uint64_t reshares_ = 0;
  std::uint64_t flows_reshared_ = 0;
  // Scratch, reused between reshares.
  std::vector<std::uint32_t> mark_flow_, mark_link_;
  std::uint32_t epoch_ = 0;
  std::vector<std::uint32_t> dirty_;
  bool reshare_pending_ = false;
  bool batch_ = true;
};

}  // namespace ctwin
