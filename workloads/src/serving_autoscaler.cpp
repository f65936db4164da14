#include "workloads/serving_autoscaler.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace ctwin {

ScalingRules default_scale_up_rules() {
  return {.stabilization_window_s = 0,
          .policies = {{ScalingPolicyType::percent, 100, 15}, {ScalingPolicyType::pods, 4, 15}},
          .select = SelectPolicy::max};
}

ScalingRules default_scale_down_rules() {
  return {
      .stabilization_window_s = 300, .policies = {{ScalingPolicyType::percent, 100, 15}}, .select = SelectPolicy::max};
}

namespace {

bool within(double ratio, double tolerance) { return std::fabs(1.0 - ratio) <= tolerance; }

int ceil_int(double x) { return static_cast<int>(std::ceil(x)); }

int longest_period(const ScalingRules& r) {
  int p = 0;
  for (const auto& x : r.policies) p = std::max(p, x.period_s);
  return p;
}

}  // namespace

std::optional<int> metric_proposal(const AutoscalerSpec& spec, const AutoscalerInput& in) {
  if (!in.metric) return std::nullopt;
  if (!per_replica_metric(spec.metric)) {
    // An Object metric with a Value target (replica_calculator.go getUsageRatioReplicaCount).
    const double ratio = *in.metric / spec.target;
    if (in.total == 0) return ceil_int(ratio);
    if (within(ratio, spec.tolerance)) return in.total;
    return ceil_int(ratio * in.ready);
  }
  // A Pods metric with an AverageValue target (calcPlainMetricReplicas).
  if (in.ready <= 0) return std::nullopt;
  const double sum = *in.metric;
  const double ratio = sum / in.ready / spec.target;
  const int missing = std::max(0, in.total - in.ready);
  if (missing == 0) {
    if (within(ratio, spec.tolerance)) return in.total;
    return ceil_int(ratio * in.ready);
  }
  // Starting replicas report nothing: at the target on a scale-down, 0 on a scale-up.
  const double filled = ratio < 1.0 ? sum + missing * spec.target : sum;
  const double new_ratio = filled / in.total / spec.target;
  if (within(new_ratio, spec.tolerance) || (ratio < 1.0 && new_ratio > 1.0) || (ratio > 1.0 && new_ratio < 1.0))
    return in.total;
  const int n = ceil_int(new_ratio * in.total);
  if ((new_ratio < 1.0 && n > in.total) || (new_ratio > 1.0 && n < in.total)) return in.total;
  return n;
}

Autoscaler::Autoscaler(AutoscalerSpec spec) : spec_(std::move(spec)) {
  if (!(spec_.target > 0)) throw std::invalid_argument("Autoscaler: target must be > 0");
  if (spec_.min_replicas < 0 || spec_.max_replicas < std::max(1, spec_.min_replicas))
    throw std::invalid_argument("Autoscaler: need 0 <= min_replicas <= max_replicas and max_replicas >= 1");
}

int Autoscaler::stabilize(Time now, int current, int desired) {
  const Time up_cutoff = now - seconds(spec_.scale_up.stabilization_window_s);
  const Time down_cutoff = now - seconds(spec_.scale_down.stabilization_window_s);
  int up = desired, down = desired;
  for (const Sample& s : recommendations_) {
    if (s.at > up_cutoff) up = std::min(up, s.replicas);
    if (s.at > down_cutoff) down = std::max(down, s.replicas);
  }
  int r = current;
  if (r < up) r = up;
  if (r > down) r = down;
  // A sample at or before both cutoffs never counts again (time only moves forward).
  const Time oldest = std::min(up_cutoff, down_cutoff);
  while (!recommendations_.empty() && recommendations_.front().at <= oldest) recommendations_.pop_front();
  recommendations_.push_back({now, desired});
  return r;
}

int Autoscaler::changes_within(const std::deque<Sample>& events, Time now, int period_s) {
  const Time cutoff = now - seconds(period_s);
  int n = 0;
  for (const Sample& e : events)
    if (e.at > cutoff) n += e.replicas;
  return n;
}

int Autoscaler::rate_limit(Time now, int current, int desired, int min_replicas, AutoscaleReason& reason) const {
  reason = AutoscaleReason::desired;
  // The count at the start of a policy's period: the current one less the changes made since.
  const auto period_start = [&](int period_s) {
    return current - changes_within(up_events_, now, period_s) + changes_within(down_events_, now, period_s);
  };
  if (desired > current) {
    const ScalingRules& r = spec_.scale_up;
    int limit = current;  // Disabled: no scale-up
    if (r.select != SelectPolicy::disabled) {
      const bool take_max = r.select == SelectPolicy::max;
      limit = take_max ? INT_MIN : INT_MAX;
      for (const ScalingPolicy& p : r.policies) {
        const long long start = period_start(p.period_s);
        const long long proposed =
            p.type == ScalingPolicyType::pods ? start + p.value : (start * (100 + p.value) + 99) / 100;
        const int v = static_cast<int>(std::clamp<long long>(proposed, INT_MIN, INT_MAX));
        limit = take_max ? std::max(limit, v) : std::min(limit, v);
      }
    }
    limit = std::max(limit, current);  // changes already made this period do not scale down
    const int allowed = std::min(spec_.max_replicas, limit);
    if (desired > allowed) {
      reason = spec_.max_replicas <= limit ? AutoscaleReason::bounded : AutoscaleReason::rate_limited;
      return allowed;
    }
  } else if (desired < current) {
    const ScalingRules& r = spec_.scale_down;
    int limit = current;
    if (r.select != SelectPolicy::disabled) {
      const bool take_max_change = r.select == SelectPolicy::max;  // the most removed: the lowest count
      limit = take_max_change ? INT_MAX : INT_MIN;
      for (const ScalingPolicy& p : r.policies) {
        const long long start = period_start(p.period_s);
        const long long proposed = p.type == ScalingPolicyType::pods ? start - p.value : start * (100 - p.value) / 100;
        const int v = static_cast<int>(std::clamp<long long>(proposed, INT_MIN, INT_MAX));
        limit = take_max_change ? std::min(limit, v) : std::max(limit, v);
      }
    }
    limit = std::min(limit, current);
    const int allowed = std::max(min_replicas, limit);
    if (desired < allowed) {
      reason = min_replicas >= limit ? AutoscaleReason::bounded : AutoscaleReason::rate_limited;
      return allowed;
    }
  }
  return desired;
}

void Autoscaler::record_scale(Time now, int from, int to) {
  if (to == from) return;
  const auto prune = [&](std::deque<Sample>& d, const ScalingRules& r) {
    const Time cutoff = now - seconds(longest_period(r));
    while (!d.empty() && d.front().at <= cutoff) d.pop_front();
  };
  if (to > from) {
    prune(up_events_, spec_.scale_up);
    up_events_.push_back({now, to - from});
  } else {
    prune(down_events_, spec_.scale_down);
    down_events_.push_back({now, from - to});
  }
}

AutoscaleStep Autoscaler::recommend(Time now, const AutoscalerInput& in) {
  AutoscaleStep step;
  const int current = in.total;
  int min_replicas = spec_.min_replicas;
  if (min_replicas == 0) {
    // KEDA: activation and cooldown around the HPA, which runs with a minimum of 1.
    if (in.in_flight > 0 || !last_active_) last_active_ = now;
    if (current == 0) {
      step.replicas = in.in_flight > 0 ? 1 : 0;
      step.reason = in.in_flight > 0 ? AutoscaleReason::activated : AutoscaleReason::below_min;
      return step;
    }
    if (now - *last_active_ >= seconds(spec_.scale_to_zero_cooldown_s)) {
      step.replicas = 0;
      step.reason = AutoscaleReason::cooled_down;
      return step;
    }
    min_replicas = 1;
  }
  if (current > spec_.max_replicas || current < min_replicas) {
    step.replicas = current > spec_.max_replicas ? spec_.max_replicas : min_replicas;
    step.reason = current > spec_.max_replicas ? AutoscaleReason::above_max : AutoscaleReason::below_min;
    record_scale(now, current, step.replicas);
    return step;
  }
  step.proposal = metric_proposal(spec_, in);
  if (!step.proposal) {
    step.replicas = current;
    step.reason = AutoscaleReason::no_metric;
    return step;
  }
  step.stabilized = stabilize(now, current, *step.proposal);
  step.replicas = rate_limit(now, current, *step.stabilized, min_replicas, step.reason);
  record_scale(now, current, step.replicas);
  return step;
}

}  // namespace ctwin
