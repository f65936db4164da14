#include "workloads/serving_disagg.hpp"

#include <algorithm>
#include <stdexcept>

#include "sim/engine.hpp"
#include "sim/flow.hpp"
#include "workloads/serving_memory.hpp"

namespace ctwin {
namespace {

constexpr Time kUnset{-1};

// A share of the stream with every request cut to its prefill (output_tokens 1, the first token
// from prefill); the original output lengths kept by id for the decode pass.
class PrefillOnly final : public TrafficSource {
 public:
  PrefillOnly(std::unique_ptr<TrafficSource> inner, std::vector<std::int32_t>& outputs)
      : inner_(std::move(inner)), outputs_(outputs) {}
  std::optional<Time> next_arrival() const override { return inner_->next_arrival(); }
  Request pop() override {
    Request r = inner_->pop();
    const auto i = static_cast<std::size_t>(r.id);
    if (outputs_.size() <= i) outputs_.resize(i + 1, 0);
    outputs_[i] = r.output_tokens;
    r.output_tokens = 1;
    return r;
  }
  std::int64_t skip(std::int64_t n) override { return inner_->skip(n); }
  bool exhausted() const override { return inner_->exhausted(); }
  const std::vector<RequestClass>& classes() const override { return inner_->classes(); }

 private:
  std::unique_ptr<TrafficSource> inner_;
  std::vector<std::int32_t>& outputs_;
};

// A decode replica's requests, known in advance, in arrival order.
class ListSource final : public TrafficSource {
 public:
  ListSource(std::vector<Request> rs, const std::vector<RequestClass>& classes)
      : rs_(std::move(rs)), classes_(classes) {}
  std::optional<Time> next_arrival() const override {
    if (next_ == rs_.size()) return std::nullopt;
    return rs_[next_].arrival;
  }
  Request pop() override { return rs_[next_++]; }
  bool exhausted() const override { return next_ == rs_.size(); }
  const std::vector<RequestClass>& classes() const override { return classes_; }

 private:
  std::vector<Request> rs_;
  std::size_t next_ = 0;
  const std::vector<RequestClass>& classes_;
};

struct PrefillDone {  // a request whose prefill completed, waiting for its KV to land
  RequestRecord rec;  // the prefill pool's record (output_tokens 1)
  int replica = 0;
  int decode_replica = 0;
  Time leave{};  // its KV's first byte leaves (after_prefill: the first token)
  Time ready{};  // its KV on the decode pool
};

// Layerwise streaming of one request's KV (KvTransferMode::layerwise): its prefill span split into
// `steps` (iterations x layers) of equal time and bytes. The stream carries all but the last
// step's bytes from the first step's end at most at the production rate; the tail, the last
// step's, goes once the stream is through.
struct LayerwisePlan {
  Time stream_start{};
  double stream_bytes = 0, tail_bytes = 0, max_rate = 0;
};
LayerwisePlan layerwise_plan(Time first_scheduled, Time first_token, double bytes, std::int64_t steps) {
  const double span = (first_token - first_scheduled).seconds();
  LayerwisePlan p;
  if (steps < 2 || !(span > 0)) {  // nothing to overlap: whole, at the first token
    p.stream_start = first_token;
    p.tail_bytes = bytes;
    return p;
  }
  const double step_bytes = bytes / static_cast<double>(steps);
  p.stream_start = first_scheduled + seconds(span / static_cast<double>(steps));
  p.stream_bytes = bytes - step_bytes;
  p.tail_bytes = step_bytes;
  p.max_rate = bytes / span;
  return p;
}

}  // namespace

KvLink default_kv_link(const ClusterSpec& c, int prefill_replica_gpus, int prefill_replicas, int decode_replica_gpus,
                       int decode_replicas) {
  KvLink l;
  const long long all = 1ll * prefill_replica_gpus * prefill_replicas + 1ll * decode_replica_gpus * decode_replicas;
  l.same_node = all <= c.gpus_per_node;
  const double per_gpu_gbyte_per_s =
      l.same_node ? (c.intra_gbyte_per_s > 0 ? c.intra_gbyte_per_s : c.gpu.pcie_gbyte_per_s) : c.nic_gbyte_per_s;
  l.bytes_per_s = per_gpu_gbyte_per_s * 1e9 * std::min(prefill_replica_gpus, decode_replica_gpus);
  l.decode_bytes_per_s = per_gpu_gbyte_per_s * 1e9 * decode_replica_gpus;
  l.latency_s = (l.same_node ? c.intra_latency_us : c.inter_latency_us) * 1e-6;
  return l;
}

double kv_transfer_s(double bytes, double bytes_per_s, double latency_s) { return bytes / bytes_per_s + latency_s; }

DisaggregatedRun run_disaggregated(const DisaggregationSpec& spec, const SchedulerConfig& prefill_sched,
                                   const SchedulerConfig& decode_sched, const TrafficSpec& traffic, ServingLoop loop,
                                   const DisaggHooks& observe) {
  if (spec.prefill_replicas < 1 || spec.decode_replicas < 1)
    throw std::invalid_argument("run_disaggregated: each pool needs at least one replica");
  if (!(spec.link_bytes_per_s > 0) || spec.link_latency_s < 0 || spec.decode_link_bytes_per_s < 0)
    throw std::invalid_argument("run_disaggregated: the KV link needs a bandwidth > 0 and a latency >= 0");
  DisaggregatedRun run;
  run.prefill_gpus = spec.prefill.gpus() * spec.prefill_replicas;
  run.decode_gpus = spec.decode.gpus() * spec.decode_replicas;
  run.kv_bytes_per_token = kv_bytes_per_token(spec.decode);
  run.prefill_capacity = kv_capacity(spec.prefill, prefill_sched);
  run.decode_capacity = kv_capacity(spec.decode, decode_sched);
  if (!run.prefill_capacity.refusal.empty() || !run.decode_capacity.refusal.empty()) return run;

  // (1) The prefill pool, prefill-only requests behind a round-robin split.
  std::vector<std::int32_t> outputs;  // original output_tokens by request id
  auto shares = make_round_robin_shares(traffic, spec.prefill_replicas);
  const std::vector<RequestClass> classes = shares.front()->classes();
  std::vector<PrefillDone> done;
  std::vector<ServingResult> prefill_results;
  ServingLatencyHistograms user;  // the merged, user-visible latencies
  std::vector<RequestRecord> rejected;
  const bool layerwise = spec.kv_transfer == KvTransferMode::layerwise;
  std::vector<std::vector<Time>> iteration_starts(layerwise ? static_cast<std::size_t>(spec.prefill_replicas) : 0);
  for (int k = 0; k < spec.prefill_replicas; ++k) {
    PrefillOnly src(std::move(shares[static_cast<std::size_t>(k)]), outputs);
    ServingHooks hooks;
    hooks.on_request = [&](const RequestRecord& r) {
      if (observe.on_request) observe.on_request(0, k, r);
      if (!r.rejected) done.push_back({.rec = r, .replica = k});
    };
    if (observe.on_iteration || layerwise) {
      hooks.on_iteration = [&, k](const IterationRecord& it) {
        if (layerwise) iteration_starts[static_cast<std::size_t>(k)].push_back(it.start);
        if (observe.on_iteration) observe.on_iteration(0, k, it);
      };
    }
    prefill_results.push_back(run_serving_replica(spec.prefill, prefill_sched, src, traffic.seed, hooks, loop).result);
  }
  ServingLatencyHistograms prefill_hist;
  for (const PrefillDone& d : done) prefill_hist.record(d.rec);
  run.prefill_pool = merge_serving_results(prefill_results, prefill_hist);

  // (2) The transfers: each request's KV leaves when its prompt completes (layerwise: streams from
  // its first layer's end), prefill replica -> decode replica (round-robin by request id), as
  // max-min flows over the two replicas' links.
  const ModelSpec& model = spec.prefill.model;
  const auto layers = static_cast<std::int64_t>(model.layers > 0 ? model.layers : model.generic_layers.size());
  const auto n_dec = static_cast<std::size_t>(spec.decode_replicas);
  {
    Engine engine;
    FlowNetwork net(engine);
    std::vector<LinkId> egress, ingress;
    for (int k = 0; k < spec.prefill_replicas; ++k) egress.push_back(net.add_link(spec.link_bytes_per_s));
    if (spec.decode_link_bytes_per_s > 0)
      for (std::size_t k = 0; k < n_dec; ++k) ingress.push_back(net.add_link(spec.decode_link_bytes_per_s));
    struct Ctx {
      FlowNetwork* net;
      std::vector<PrefillDone>* done;
      const std::vector<LinkId>* egress;
      const std::vector<LinkId>* ingress;
      Engine* engine;
      Time latency;
      const ServingDeployment* decode;  // the KV a prompt carries: kv_bytes_of_context
      int in_flight = 0;
      int peak = 0;
      std::vector<LayerwisePlan> plans{};  // layerwise: by index into done
      std::vector<LinkId> path(std::size_t i) const {
        const PrefillDone& x = (*done)[i];
        std::vector<LinkId> p{(*egress)[static_cast<std::size_t>(x.replica)]};
        if (!ingress->empty()) p.push_back((*ingress)[static_cast<std::size_t>(x.decode_replica)]);
        return p;
      }
      void land(std::size_t i) {
        (*done)[i].ready = engine->now();
        --in_flight;
      }
      // Layerwise, once the stream is through: the last step's bytes, when they exist (the first
      // token, plus the latency the stream already paid).
      void tail(std::size_t i) {
        Ctx* c = this;
        engine->schedule_at(std::max(engine->now(), (*done)[i].rec.first_token + latency),
                            [c, i] { c->net->start(c->path(i), c->plans[i].tail_bytes, [c, i] { c->land(i); }); });
      }
    } ctx{&net, &done, &egress, &ingress, &engine, seconds(spec.link_latency_s), &spec.decode};
    for (std::size_t i = 0; i < done.size(); ++i) {
      PrefillDone& d = done[i];
      d.decode_replica = static_cast<int>(static_cast<std::size_t>(d.rec.request.id) % n_dec);
      d.leave = d.rec.first_token;
      if (outputs[static_cast<std::size_t>(d.rec.request.id)] < 2) {  // one output token: nothing to move
        d.ready = d.rec.first_token;
        continue;
      }
      const double bytes = kv_bytes_of_context(spec.decode, d.rec.request.prompt_tokens);
      if (layerwise) {
        // The replica's iterations that started within the prompt's span: one chunk of it each.
        const std::vector<Time>& st = iteration_starts[static_cast<std::size_t>(d.replica)];
        const auto chunks = std::lower_bound(st.begin(), st.end(), d.rec.first_token) -
                            std::lower_bound(st.begin(), st.end(), d.rec.first_scheduled);
        if (ctx.plans.empty()) ctx.plans.resize(done.size());
        LayerwisePlan& p = ctx.plans[i];
        p = layerwise_plan(d.rec.first_scheduled, d.rec.first_token, bytes, std::max<std::int64_t>(chunks, 1) * layers);
        d.leave = p.stream_start;
        run.kv_transfer_bytes += bytes;
        run.kv_transfer_busy_s += bytes / spec.link_bytes_per_s;
        ++run.kv_transfers;
        Ctx* c = &ctx;
        engine.schedule_at(p.stream_start, [c, i] {
          c->peak = std::max(c->peak, ++c->in_flight);
          const LayerwisePlan& q = c->plans[i];
          if (q.stream_bytes <= 0) {  // nothing streamed ahead: whole at the first token, as after_prefill
            c->net->start(
                c->path(i), q.tail_bytes, [c, i] { c->land(i); }, c->latency);
            return;
          }
          c->net->start(
              c->path(i), q.stream_bytes, [c, i] { c->tail(i); }, c->latency, q.max_rate);
        });
        continue;
      }
      run.kv_transfer_bytes += bytes;
      run.kv_transfer_busy_s += bytes / spec.link_bytes_per_s;
      ++run.kv_transfers;
      Ctx* c = &ctx;
      engine.schedule_at(d.rec.first_token, [c, i] {
        PrefillDone& x = (*c->done)[i];
        std::vector<LinkId> path{(*c->egress)[static_cast<std::size_t>(x.replica)]};
        if (!c->ingress->empty()) path.push_back((*c->ingress)[static_cast<std::size_t>(x.decode_replica)]);
        c->peak = std::max(c->peak, ++c->in_flight);
        const double b = kv_bytes_of_context(*c->decode, x.rec.request.prompt_tokens);
        c->net->start(
            std::move(path), b,
            [c, i] {
              (*c->done)[i].ready = c->engine->now();
              --c->in_flight;
            },
            c->latency);
      });
    }
    engine.run();
    run.kv_peak_concurrent_transfers = ctx.peak;
    if (observe.on_transfer)
      for (const PrefillDone& d : done)
        if (outputs[static_cast<std::size_t>(d.rec.request.id)] >= 2)
          observe.on_transfer(d.replica, d.decode_replica, d.rec.request.id, d.leave, d.ready,
                              kv_bytes_of_context(spec.decode, d.rec.request.prompt_tokens));
  }

  // (3) The decode pool: each replica's requests in the order their KV lands (ties by id),
  // renumbered so each decode replica sees ids rising with arrival.
  std::stable_sort(done.begin(), done.end(), [](const PrefillDone& a, const PrefillDone& b) {
    return a.ready != b.ready ? a.ready < b.ready : a.rec.request.id < b.rec.request.id;
  });
  std::vector<std::vector<Request>> lists(n_dec);
  std::vector<std::size_t> by_decode_id;  // decode id -> index into done
  std::vector<Time> decode_admitted(done.size(), kUnset), decode_finish(done.size(), kUnset);
  for (std::size_t i = 0; i < done.size(); ++i) {
    Request r = done[i].rec.request;
    r.output_tokens = outputs[static_cast<std::size_t>(r.id)];
    if (r.output_tokens < 2) continue;  // one output token: done at the prefill
    r.id = static_cast<std::int64_t>(by_decode_id.size());
    r.arrival = done[i].ready;
    r.prefilled = true;
    lists[static_cast<std::size_t>(done[i].decode_replica)].push_back(r);
    by_decode_id.push_back(i);
  }
  // The decode pool's host costs were paid at the prefill pool (the API server saw the request).
  ServingDeployment decode = spec.decode;
  decode.overhead.request_overhead_us = 0;
  std::vector<ServingResult> decode_results;
  ServingLatencyHistograms decode_hist;
  std::int64_t decode_rejected = 0;
  for (std::size_t k = 0; k < n_dec; ++k) {
    ListSource src(std::move(lists[k]), classes);
    ServingHooks hooks;
    if (observe.on_iteration)
      hooks.on_iteration = [&, k](const IterationRecord& it) { observe.on_iteration(1, static_cast<int>(k), it); };
    hooks.on_request = [&](const RequestRecord& r) {
      if (observe.on_request) observe.on_request(1, static_cast<int>(k), r);
      decode_hist.record(r);
      if (r.rejected) {
        ++decode_rejected;
        return;
      }
      const std::size_t i = by_decode_id[static_cast<std::size_t>(r.request.id)];
      decode_admitted[i] = r.first_scheduled;
      decode_finish[i] = r.finish;
    };
    decode_results.push_back(run_serving_replica(decode, decode_sched, src, traffic.seed, hooks, loop).result);
  }
  run.decode_pool = merge_serving_results(decode_results, decode_hist);

  // The user's view, request by request.
  QuantileHistogram pq, pf, tr, ov, dq;
  ServingResult& m = run.merged;
  for (std::size_t i = 0; i < done.size(); ++i) {
    const PrefillDone& d = done[i];
    RequestRecord u = d.rec;
    u.request.output_tokens = outputs[static_cast<std::size_t>(u.request.id)];
    const bool decoded = u.request.output_tokens >= 2;
    if (decoded && decode_finish[i] == kUnset) continue;  // rejected by the decode pool
    u.finish = decoded ? decode_finish[i] : d.rec.first_token;
    const double ttft = (u.first_token - u.request.arrival).seconds();
    const double e2e = (u.finish - u.request.arrival).seconds();
    const double tpot =
        decoded ? (u.finish - u.first_token).seconds() / static_cast<double>(u.request.output_tokens - 1) : 0;
    const RequestClass& c = classes.at(static_cast<std::size_t>(u.request.cls));
    u.met_slo = (c.ttft_slo_s <= 0 || ttft <= c.ttft_slo_s) && (c.tpot_slo_s <= 0 || tpot <= c.tpot_slo_s) &&
                (c.e2e_slo_s <= 0 || e2e <= c.e2e_slo_s);
    user.record(u);
    ++m.completed_requests;
    m.input_tokens += u.request.prompt_tokens;
    m.output_tokens += u.request.output_tokens;
    pq.add((u.first_scheduled - u.received).seconds());
    pf.add((u.first_token - u.first_scheduled).seconds());
    if (decoded) {
      tr.add((d.ready - u.first_token).seconds());
      if (layerwise) ov.add((u.first_token - d.leave).seconds());
      dq.add((decode_admitted[i] - d.ready).seconds());
    }
  }
  run.prefill_queueing_s = latency_summary(pq);
  run.prefill_s = latency_summary(pf);
  run.transfer_s = latency_summary(tr);
  if (layerwise) run.transfer_overlapped_s = latency_summary(ov);
  run.decode_queueing_s = latency_summary(dq);

  // Counts are the requests', GPU time and iterations both pools'.
  std::vector<ServingResult> both = prefill_results;
  both.insert(both.end(), decode_results.begin(), decode_results.end());
  ServingResult sum = merge_serving_results(both, user);
  sum.arrived_requests = run.prefill_pool.arrived_requests;
  sum.rejected_requests = run.prefill_pool.rejected_requests + decode_rejected;
  sum.completed_requests = m.completed_requests;
  sum.input_tokens = m.input_tokens;
  sum.output_tokens = m.output_tokens;
  if (sum.makespan_s > 0) {
    sum.requests_per_s = static_cast<double>(sum.completed_requests) / sum.makespan_s;
    sum.input_tokens_per_s = static_cast<double>(sum.input_tokens) / sum.makespan_s;
    sum.output_tokens_per_s = static_cast<double>(sum.output_tokens) / sum.makespan_s;
  }
  const auto judged = sum.completed_requests + sum.rejected_requests;
  sum.slo_attainment = judged ? static_cast<double>(user.met_slo) / static_cast<double>(judged) : 0;
  m = sum;
  return run;
}

}  // namespace ctwin
