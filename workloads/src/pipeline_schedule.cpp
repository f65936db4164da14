#include "workloads/pipeline_schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace ctwin {

std::vector<PipelineSlot> pipeline_order(PipelineSchedule schedule, int pp, int stage, int micro_batches,
                                         int virtual_stages) {
  using P = PipelineSlot::Pass;
  std::vector<PipelineSlot> s;
  const int m = micro_batches, v = virtual_stages;
  if (schedule == PipelineSchedule::gpipe) {
    for (int i = 0; i < m; ++i) s.push_back({i, 0, P::forward});
    for (int i = 0; i < m; ++i) s.push_back({i, 0, P::backward});
    return s;
  }
  if (schedule == PipelineSchedule::interleaved && v > 1) {
    const int total = m * v;
    // Megatron-LM's warm-up (get_pp_rank_microbatches in schedules.py): 2(p - s - 1) + p(v - 1)
    // chunk forwards, all of them when that reaches m x v. Older versions also ran every forward
    // first whenever m == p; current Megatron does not, and its measured memory agrees
    // (docs/validation.md, "Memory against measured runs").
    const int warm = std::min((pp - stage - 1) * 2 + (v - 1) * pp, total);
    auto mb_of = [&](int k) { return (k / (pp * v)) * pp + k % pp; };
    auto fchunk = [&](int k) { return (k % (pp * v)) / pp; };
    auto bchunk = [&](int k) { return v - 1 - (k % (pp * v)) / pp; };
    for (int k = 0; k < warm; ++k) s.push_back({mb_of(k), fchunk(k), P::forward});
    for (int k = 0; k < total - warm; ++k) {
      s.push_back({mb_of(warm + k), fchunk(warm + k), P::forward});
      s.push_back({mb_of(k), bchunk(k), P::backward});
    }
    for (int k = total - warm; k < total; ++k) s.push_back({mb_of(k), bchunk(k), P::backward});
    return s;
  }
  if (schedule == PipelineSchedule::zero_bubble) {
    throw std::invalid_argument("pipeline_order: the zero-bubble order depends on costs; use zero_bubble_orders");
  }
  const int warm = std::min(pp - stage - 1, m);
  for (int i = 0; i < warm; ++i) s.push_back({i, 0, P::forward});
  for (int i = 0; i < m - warm; ++i) {
    s.push_back({warm + i, 0, P::forward});
    s.push_back({i, 0, P::backward});
  }
  for (int i = m - warm; i < m; ++i) s.push_back({i, 0, P::backward});
  return s;
}

std::vector<std::vector<PipelineSlot>> zero_bubble_orders(int pp, int micro_batches, double tf, double tb, double tw) {
  using P = PipelineSlot::Pass;
  const int m = micro_batches;
  constexpr double kNever = 1e300;
  std::vector<std::vector<double>> f_done(pp, std::vector<double>(m, kNever)), b_done = f_done;
  std::vector<double> free_at(pp, 0);
  std::vector<int> next_f(pp, 0), next_b(pp, 0), next_w(pp, 0);
  std::vector<std::vector<PipelineSlot>> order(pp);
  auto done = [&](int i) { return next_f[i] == m && next_b[i] == m && next_w[i] == m; };
  for (;;) {
    // Each stage's earliest possible action; run the stage that can act first.
    int best = -1;
    double best_t = kNever;
    P best_pass = P::forward;
    for (int i = 0; i < pp; ++i) {
      if (done(i)) continue;
      const double t = free_at[i];
      double rb = kNever, rf = kNever;
      if (next_b[i] < next_f[i]) rb = i == pp - 1 ? f_done[i][next_b[i]] : b_done[i + 1][next_b[i]];
      if (next_f[i] < m && next_f[i] - next_b[i] < pp - i) rf = i == 0 ? 0.0 : f_done[i - 1][next_f[i]];
      double when;
      P pass;
      if (rb <= t) {
        when = t, pass = P::backward;
      } else if (rf <= t) {
        when = t, pass = P::forward;
      } else if (next_w[i] < next_b[i]) {
        when = t, pass = P::weight;
      } else if (std::min(rb, rf) < kNever) {
        when = std::min(rb, rf), pass = rb <= rf ? P::backward : P::forward;
      } else {
        continue;
      }
      if (when < best_t) best = i, best_t = when, best_pass = pass;
    }
    if (best < 0) break;
    const int i = best;
    if (best_pass == P::forward) {
      f_done[i][next_f[i]] = best_t + tf;
      order[i].push_back({next_f[i]++, 0, P::forward});
      free_at[i] = best_t + tf;
    } else if (best_pass == P::backward) {
      b_done[i][next_b[i]] = best_t + tb;
      order[i].push_back({next_b[i]++, 0, P::backward});
      free_at[i] = best_t + tb;
    } else {
      order[i].push_back({next_w[i]++, 0, P::weight});
      free_at[i] = best_t + tw;
    }
  }
  return order;
}

int max_in_flight(const std::vector<PipelineSlot>& order) {
  int held = 0, peak = 0;
  for (const auto& s : order) {
    if (s.pass == PipelineSlot::Pass::forward) {
      peak = std::max(peak, ++held);
    } else if (s.pass == PipelineSlot::Pass::backward) {
      --held;
    }
  }
  return peak;
}

}  // namespace ctwin
