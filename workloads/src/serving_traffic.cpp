// The traffic generators behind TrafficSource: arrival processes, lengths, shared prefixes,
// sessions and classes, every draw keyed by (seed, id, purpose).
#include "workloads/serving_traffic.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <queue>

#include "sim/random.hpp"

namespace ctwin {
namespace {

// What a draw is for; with the seed and a request or session id it makes the key.
enum Purpose : std::uint64_t {
  kArrival = 1,
  kInput = 2,
  kOutput = 3,
  kPrefixShare = 4,
  kPrefixGroup = 5,
  kClass = 6,
  kLoraBase = 7,
  kLoraAdapter = 8,
};

// A uniform (0, 1) for (seed, id, purpose, sub): sub numbers the several uniforms one draw may
// need (a normal takes two, a gamma a few tries).
double draw(std::uint64_t seed, std::uint64_t id, std::uint64_t purpose, std::uint64_t sub = 0) {
  const std::uint64_t k = mix64(mix64(seed) ^ id) ^ mix64((purpose << 32) | sub);
  return uniform01(k);
}

// A standard normal by Box-Muller from two keyed uniforms.
double normal(std::uint64_t seed, std::uint64_t id, std::uint64_t purpose, std::uint64_t sub) {
  const double u1 = draw(seed, id, purpose, 2 * sub);
  const double u2 = draw(seed, id, purpose, 2 * sub + 1);
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

// Gamma(shape, 1) by Marsaglia and Tsang (2000); shape < 1 through Gamma(shape + 1) U^(1/shape).
double gamma_unit(double shape, std::uint64_t seed, std::uint64_t id) {
  double boost = 1;
  if (shape < 1) {
    boost = std::pow(draw(seed, id, kArrival, 1u << 20), 1 / shape);
    shape += 1;
  }
  const double d = shape - 1.0 / 3;
  const double c = 1 / std::sqrt(9 * d);
  // Each try accepts with probability above 0.95; 64 failures in a row (p < 1e-80) take the mode.
  for (std::uint64_t attempt = 0; attempt < 64; ++attempt) {
    const double z = normal(seed, id, kArrival, 2 * attempt);
    const double v = std::pow(1 + c * z, 3);
    if (v <= 0) continue;
    const double u = draw(seed, id, kArrival, (1u << 16) + attempt);
    if (std::log(u) < z * z / 2 + d - d * v + d * std::log(v)) return d * v * boost;
  }
  return d * boost;
}

// The clock's range in seconds: an arrival beyond it is an input out of proportion.
constexpr double kMaxArrivalS = 9.2e6;

Time arrival_time(double t_s) {
  if (!(t_s <= kMaxArrivalS)) throw TimeOverflow();
  return seconds(t_s);
}

class Generated final : public TrafficSource {
 public:
  explicit Generated(const TrafficSpec& s) : s_(s), lora_(s.lora) {
    double total = 0;
    for (const auto& c : s_.classes) total += c.share;
    double cum = 0;
    for (const auto& c : s_.classes) cum_share_.push_back(cum += c.share / total);
    end_ = s_.duration_s >= 0 ? arrival_time(s_.duration_s) : Time::max();
    const auto& a = s_.arrival;
    if (a.process == ArrivalProcess::burst) {
      steps_ = {{0, a.rate_per_s},
                {a.burst_start_s, a.burst_rate_per_s},
                {a.burst_start_s + a.burst_duration_s, a.rate_per_s}};
      if (a.burst_start_s == 0) steps_.erase(steps_.begin());
    } else {
      steps_ = a.steps;
    }
    sessions_on_ = s_.sessions.turns > 1;
    if (a.process == ArrivalProcess::closed_loop) {
      think_ = arrival_time(a.think_time_s);
      std::vector<Pending> start;
      start.reserve(static_cast<std::size_t>(a.users));
      for (std::int32_t u = 0; u < a.users; ++u) start.push_back({Time{}, u});
      users_ = Heap(std::greater<>{}, std::move(start));
      if (sessions_on_) slots_.resize(static_cast<std::size_t>(a.users));
    } else {
      if (sessions_on_) slots_.resize(static_cast<std::size_t>(s_.sessions.active));
      advance();
    }
  }

  std::optional<Time> next_arrival() const override {
    if (s_.requests >= 0 && issued_ >= s_.requests) return std::nullopt;
    if (s_.arrival.process != ArrivalProcess::closed_loop) return next_;
    if (users_.empty() || users_.top().t >= end_) return std::nullopt;
    return users_.top().t;
  }

  Request pop() override {
    Request r;
    r.id = issued_++;
    if (s_.arrival.process == ArrivalProcess::closed_loop) {
      r.arrival = users_.top().t;
      r.client = users_.top().user;
      users_.pop();
      ++outstanding_;
    } else {
      r.arrival = *next_;
    }
    fill(r);
    if (s_.arrival.process != ArrivalProcess::closed_loop) advance();
    return r;
  }

  // Open loop without sessions: a request's draws are keyed by its id, so skipping one only
  // draws its arrival. Sessions carry state from turn to turn and a closed loop waits for its
  // requests' completions: those pop.
  std::int64_t skip(std::int64_t n) override {
    if (sessions_on_ || s_.arrival.process == ArrivalProcess::closed_loop) return TrafficSource::skip(n);
    std::int64_t k = 0;
    for (; k < n && next_arrival(); ++k) {
      ++issued_;
      advance();
    }
    return k;
  }

  void completed(const Request& r, Time t) override {
    if (s_.arrival.process != ArrivalProcess::closed_loop || r.client < 0) return;
    --outstanding_;
    users_.push({t + think_, r.client});
  }

  bool exhausted() const override {
    if (s_.requests >= 0 && issued_ >= s_.requests) return true;
    if (s_.arrival.process != ArrivalProcess::closed_loop) return !next_;
    return outstanding_ == 0 && (users_.empty() || users_.top().t >= end_);
  }

  const std::vector<RequestClass>& classes() const override { return s_.classes; }

 private:
  struct Pending {
    Time t;
    std::int32_t user;
    auto operator<=>(const Pending&) const = default;  // ties: the lower user first
  };
  using Heap = std::priority_queue<Pending, std::vector<Pending>, std::greater<>>;
  struct Slot {
    std::int64_t session = -1;
    std::int32_t turn = 0;
    std::int64_t context = 0;  // prompt and output tokens of the session's turns so far
  };

  // The arrival of request number issued_ into next_ (nullopt when none comes).
  void advance() {
    const auto& a = s_.arrival;
    const auto n = static_cast<std::uint64_t>(issued_);
    if (s_.requests >= 0 && issued_ >= s_.requests) {
      next_.reset();
      return;
    }
    // Seconds for the computed processes (checked against the duration before the clock's range).
    std::optional<double> t_s;
    std::optional<Time> t;
    switch (a.process) {
      case ArrivalProcess::poisson:
        t_s_ += -std::log(draw(s_.seed, n, kArrival)) / a.rate_per_s;
        t_s = t_s_;
        break;
      case ArrivalProcess::gamma: {
        const double shape = 1 / (a.cv * a.cv);
        t_s_ += gamma_unit(shape, s_.seed, n) / (shape * a.rate_per_s);
        t_s = t_s_;
        break;
      }
      case ArrivalProcess::constant:
        t_s = static_cast<double>(n) / a.rate_per_s;
        break;
      case ArrivalProcess::offline:
        t = Time{};
        break;
      case ArrivalProcess::steps:
      case ArrivalProcess::burst:
        t_s = step_arrival(n);
        break;
      case ArrivalProcess::diurnal:
        t_s = diurnal_arrival(n);
        break;
      case ArrivalProcess::trace: {
        const auto& rows = *a.trace;
        if (n >= rows.size()) break;
        const Time at = rows[n].arrival;
        if (a.time_scale == 1) {
          t = at;
        } else {
          t_s = at.seconds() * a.time_scale;
        }
        break;
      }
      case ArrivalProcess::closed_loop:
        break;
    }
    if (t_s && !(s_.duration_s >= 0 && *t_s >= s_.duration_s)) t = arrival_time(*t_s);
    if (t && *t >= end_) t.reset();
    next_ = t;
  }

  // Time-rescaling: the integrated rate grows by a unit exponential per arrival; the arrival is
  // where the piecewise-linear integral of the step curve reaches it.
  std::optional<double> step_arrival(std::uint64_t n) {
    lambda_ += -std::log(draw(s_.seed, n, kArrival));
    for (;;) {
      const RateStep& st = steps_[seg_];
      const bool last = seg_ + 1 == steps_.size();
      const double seg_end = last ? 0 : steps_[seg_ + 1].t_s;
      const double seg_lambda = last ? 0 : st.rate_per_s * (seg_end - st.t_s);
      if (!last && lambda_ >= seg_lambda0_ + seg_lambda) {
        seg_lambda0_ += seg_lambda;
        ++seg_;
        continue;
      }
      if (st.rate_per_s == 0) return std::nullopt;  // the last step has rate 0: none ever again
      return st.t_s + (lambda_ - seg_lambda0_) / st.rate_per_s;
    }
  }

  // The diurnal curve's integral: min t + (max - min)/2 (t - P/(2 pi) sin(2 pi t / P)).
  double diurnal_integral(double t) const {
    const auto& a = s_.arrival;
    const double w = 2 * std::numbers::pi / a.period_s;
    return a.min_rate_per_s * t + (a.max_rate_per_s - a.min_rate_per_s) / 2 * (t - std::sin(w * t) / w);
  }

  std::optional<double> diurnal_arrival(std::uint64_t n) {
    lambda_ += -std::log(draw(s_.seed, n, kArrival));
    // Past the duration: no need to find where (it may lie beyond the clock).
    if (s_.duration_s >= 0 && diurnal_integral(s_.duration_s) <= lambda_) return std::nullopt;
    double lo = t_s_;
    double hi = t_s_ + s_.arrival.period_s;
    while (diurnal_integral(hi) < lambda_) {
      lo = hi;
      hi = t_s_ + 2 * (hi - t_s_);
      if (hi > kMaxArrivalS) throw TimeOverflow();
    }
    // Newton's method on the increasing integral (its derivative is the rate), kept inside the
    // bracket [lo, hi] by bisection; to below a picosecond.
    const auto& a = s_.arrival;
    const double w = 2 * std::numbers::pi / a.period_s;
    double x = lo;
    for (int i = 0; i < 200; ++i) {
      const double f = diurnal_integral(x) - lambda_;
      (f < 0 ? lo : hi) = x;
      const double rate = a.min_rate_per_s + (a.max_rate_per_s - a.min_rate_per_s) * (1 - std::cos(w * x)) / 2;
      double next = rate > 0 ? x - f / rate : (lo + hi) / 2;
      if (!(next > lo && next < hi)) next = (lo + hi) / 2;
      if (std::fabs(next - x) < 1e-13 * std::max(1.0, x) || hi - lo < 1e-13 * std::max(1.0, hi)) {
        hi = next;
        break;
      }
      x = next;
    }
    t_s_ = hi;
    return t_s_;
  }

  std::int32_t pick_class(std::uint64_t key_id) const {
    const double u = draw(s_.seed, key_id, kClass);
    for (std::size_t i = 0; i + 1 < cum_share_.size(); ++i) {
      if (u < cum_share_[i]) return static_cast<std::int32_t>(i);
    }
    return static_cast<std::int32_t>(cum_share_.size() - 1);
  }

  // The LoRA adapter for draw id `key_id` (-1: the base model), no draw without adapters.
  std::int32_t pick_lora(std::uint64_t key_id) const {
    if (s_.lora.adapters <= 0) return -1;
    return lora_.pick(draw(s_.seed, key_id, kLoraBase), draw(s_.seed, key_id, kLoraAdapter));
  }

  // The system prompt's group for draw id `key_id`, or -1 when it has none.
  std::int64_t system_group(std::uint64_t key_id) const {
    const auto& p = s_.prefix;
    if (p.shared_tokens == 0 || draw(s_.seed, key_id, kPrefixShare) >= p.share_ratio) return -1;
    const auto g = static_cast<std::int64_t>(draw(s_.seed, key_id, kPrefixGroup) * p.groups);
    return std::min<std::int64_t>(g, p.groups - 1);
  }

  void fill(Request& r) {
    const auto id = static_cast<std::uint64_t>(r.id);
    if (s_.arrival.process == ArrivalProcess::trace) {
      const TraceRow& row = (*s_.arrival.trace)[id];
      r.prompt_tokens = row.context_tokens;
      r.output_tokens = std::max(row.generated_tokens, 1);
      if (const auto& pool = s_.arrival.trace_blocks) {  // a Mooncake trace: its hashes, no system prompt
        const auto b = static_cast<std::size_t>(pool->offsets[id]);
        r.prefix_blocks = pool->ids.data() + b;
        r.prefix_block_count = static_cast<std::int32_t>(static_cast<std::size_t>(pool->offsets[id + 1]) - b);
        r.prefix_block_tokens = pool->block_tokens;
        r.cls = pick_class(id);
        r.lora = pick_lora(id);
        return;
      }
      r.prefix_group = system_group(id);
      if (r.prefix_group >= 0) r.shared_prefix_tokens = std::min(s_.prefix.shared_tokens, r.prompt_tokens);
      r.cls = pick_class(id);
      r.lora = pick_lora(id);
      return;
    }
    const std::int32_t input = draw_length(s_.input, s_.seed, id, kInput);
    r.output_tokens = draw_length(s_.output, s_.seed, id, kOutput);
    if (!sessions_on_) {
      r.prefix_group = system_group(id);
      r.shared_prefix_tokens = r.prefix_group >= 0 ? s_.prefix.shared_tokens : 0;
      r.prompt_tokens = r.shared_prefix_tokens + input;
      r.cls = pick_class(id);
      r.lora = pick_lora(id);
      return;
    }
    // Sessions: round-robin over the active ones, or the user's own in a closed loop.
    const std::size_t k =
        r.client >= 0 ? static_cast<std::size_t>(r.client) : static_cast<std::size_t>(id % slots_.size());
    Slot& sl = slots_[k];
    if (sl.session < 0 || sl.turn >= s_.sessions.turns || sl.context + input > kMaxTrafficTokens) {
      sl = Slot{next_session_++, 0, 0};
    }
    // Per-session draws are keyed by the session id with the top bit set (apart from requests').
    const std::uint64_t skey = static_cast<std::uint64_t>(sl.session) | (1ull << 63);
    r.cls = pick_class(skey);
    r.lora = pick_lora(skey);  // a session keeps its adapter
    if (sl.turn == 0) {
      r.prefix_group = system_group(skey);
      r.shared_prefix_tokens = r.prefix_group >= 0 ? s_.prefix.shared_tokens : 0;
      r.prompt_tokens = r.shared_prefix_tokens + input;
    } else {
      r.prefix_group = (s_.prefix.shared_tokens > 0 ? s_.prefix.groups : 0) + sl.session;
      r.shared_prefix_tokens = static_cast<std::int32_t>(sl.context);
      r.prompt_tokens = static_cast<std::int32_t>(sl.context + input);
    }
    sl.context = static_cast<std::int64_t>(r.prompt_tokens) + r.output_tokens;
    ++sl.turn;
  }

  TrafficSpec s_;
  LoraPopularityTable lora_;
  std::vector<double> cum_share_;
  Time end_;
  std::int64_t issued_ = 0;
  std::optional<Time> next_;
  double t_s_ = 0;     // renewal processes and diurnal: the last arrival in seconds
  double lambda_ = 0;  // rate curves: the integrated rate at the last arrival
  std::vector<RateStep> steps_;
  std::size_t seg_ = 0;     // steps: the segment of the last arrival
  double seg_lambda0_ = 0;  // and the integrated rate at its start
  Heap users_;              // closed loop: the users' next requests
  std::int64_t outstanding_ = 0;
  Time think_{};
  bool sessions_on_ = false;
  std::vector<Slot> slots_;
  std::int64_t next_session_ = 0;
};

}  // namespace

std::int32_t draw_length(const LengthSpec& l, std::uint64_t seed, std::uint64_t id, std::uint64_t purpose) {
  switch (l.dist) {
    case LengthDist::fixed:
      return l.value;
    case LengthDist::uniform: {
      const double span = static_cast<double>(l.max) - l.min + 1;
      const auto k = static_cast<std::int64_t>(draw(seed, id, purpose) * span);
      return static_cast<std::int32_t>(std::min<std::int64_t>(l.min + k, l.max));
    }
    case LengthDist::lognormal: {
      const double x = std::exp(l.mu + l.sigma * normal(seed, id, purpose, 0));
      const double c = std::clamp(std::round(x), static_cast<double>(l.min), static_cast<double>(l.max));
      return static_cast<std::int32_t>(c);
    }
    case LengthDist::empirical: {
      const auto& v = *l.samples;
      const auto i = static_cast<std::size_t>(draw(seed, id, purpose) * static_cast<double>(v.size()));
      return v[std::min(i, v.size() - 1)];
    }
  }
  return l.value;
}

std::unique_ptr<TrafficSource> make_traffic(const TrafficSpec& spec) { return std::make_unique<Generated>(spec); }

}  // namespace ctwin
