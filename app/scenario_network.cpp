// /network: fidelity, and NCCL's algorithm and protocol for the step's collectives.
#include "scenario_parts.hpp"

namespace ctwin {
namespace {

// /network/algo and /network/protocol: one name for every collective into `all`, or an object
// naming one per operation ({"all_reduce": "tree", "all_gather": "ring"}) into `by_op`, as
// NCCL_ALGO and NCCL_PROTO. `parse` maps a name.
template <class T>
void read_nccl_choice(const ParamReader& n, const char* key, T& all, std::array<T, kCollectiveOps>& by_op,
                      bool (*parse)(std::string_view, T&)) {
  if (!n.has(key)) return;
  if (!n.object().raw(key).is_object()) {
    parse(n.choice(key), all);
    return;
  }
  const ParamDecl& d = n.decl(key);
  const std::vector<std::string> names(d.choices.begin(), d.choices.end());
  const JsonObject per_op = n.object().object(key);
  per_op.only({"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv"});
  for (std::size_t i = 0; i < by_op.size(); ++i) {
    const char* op = to_string(static_cast<CollectiveOp>(i));
    if (per_op.has(op)) parse(per_op.choice(op, names), by_op[i]);
  }
}

}  // namespace

void read_network(const JsonObject& top, Scenario& sc) {
  if (!top.has("network")) return;
  const JsonObject no = top.object("network");
  const ParamReader n(no, network_params);
  sc.fidelity = n.choice("fidelity", fidelity_names);
  CollectiveOptions o;
  o.where_applicable = true;
  read_nccl_choice(n, "algo", o.algo, o.algo_by_op, parse_collective_algo);
  read_nccl_choice(n, "protocol", o.protocol, o.protocol_by_op, parse_protocol);
  sc.collectives = o;
}

}  // namespace ctwin
