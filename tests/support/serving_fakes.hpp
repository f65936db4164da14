// Serving test doubles beside FakeKvCache: a traffic source of hand-made requests and a
// closed-form iteration cost, so expected latencies can be worked by hand.
#pragma once

#include <vector>

#include "workloads/serving_types.hpp"

namespace ctwin::test {

// Requests given in arrival order (ids are reassigned 0, 1, 2, ...).
class VectorSource final : public TrafficSource {
 public:
  explicit VectorSource(std::vector<Request> rs, std::vector<RequestClass> cls = {RequestClass{}})
      : rs_(std::move(rs)), cls_(std::move(cls)) {
    for (std::size_t i = 0; i < rs_.size(); ++i) rs_[i].id = static_cast<std::int64_t>(i);
  }
  std::optional<Time> next_arrival() const override {
    if (next_ >= rs_.size()) return std::nullopt;
    return rs_[next_].arrival;
  }
  Request pop() override { return rs_[next_++]; }
  void completed(const Request&, Time) override { ++completed_; }
  bool exhausted() const override { return next_ >= rs_.size(); }
  const std::vector<RequestClass>& classes() const override { return cls_; }
  std::int64_t completed_count() const { return completed_; }

 private:
  std::vector<Request> rs_;
  std::vector<RequestClass> cls_;
  std::size_t next_ = 0;
  std::int64_t completed_ = 0;
};

inline Request req(double arrival_s, std::int32_t prompt, std::int32_t output, std::int32_t cls = 0) {
  Request r;
  r.arrival = seconds(arrival_s);
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  r.cls = cls;
  return r;
}

// total = a + b * query tokens + c * K/V tokens read; prefill and decode split by their tokens.
struct LinearCost final : IterationCostModel {
  double a_s = 1e-3, b_s = 1e-5, c_s = 1e-7;
  IterationTime iteration(const BatchShape& s) const override {
    IterationTime t;
    t.overhead_s = a_s;
    t.prefill_s = b_s * static_cast<double>(s.prefill_tokens) + c_s * s.prefill_kv_tokens;
    t.decode_s = b_s * static_cast<double>(s.decode_tokens) + c_s * s.decode_kv_tokens;
    t.total_s = t.overhead_s + t.prefill_s + t.decode_s;
    return t;
  }
  double prefill(double tokens, double kv) const { return a_s + b_s * tokens + c_s * kv; }
};

}  // namespace ctwin::test
