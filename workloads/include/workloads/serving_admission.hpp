// Admission control at a serving fleet's router: which arriving requests enter and which are
// rejected, with the reason. A pure policy: the fleet asks admit() for each arrival and counts
// what it answers; a rejected request is reported (by reason and class), never dropped silently.
//
// The checks, in order (the first that fails rejects):
//  1. rate limit: the request's tenant (its class) has a token bucket of rate_per_s refilled
//     continuously up to burst tokens (full at the start); a request takes one token or is
//     rejected. Checked first, as a gateway's local rate limit runs before routing (Envoy's
//     local_ratelimit filter), so a tenant's quota counts its attempts.
//  2. queue length: rejected when the fleet already holds at least max_queued x f requests
//     waiting (queued at the router or on replicas, not yet running).
//  3. estimated wait: rejected when the fleet's estimate of this request's wait exceeds
//     max_wait_s x f.
//  4. observed latency: rejected when the p90 of the TTFTs completed within the last
//     ttft_window_s exceeds max_ttft_p90_s x f (nearest rank; no samples: no rejection).
// f is the class's shed fraction (1: the full threshold; a lower-priority class gets a smaller
// one, so it is shed first as load rises). A threshold of 0 is off.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "sim/names.hpp"
#include "sim/time.hpp"
#include "workloads/serving_types.hpp"

namespace ctwin {

enum class AdmissionResult { accepted, rate_limit, queue_length, estimated_wait, ttft_p90 };
inline constexpr auto admission_result_names = make_names<AdmissionResult>({
    {AdmissionResult::accepted, "accepted"},
    {AdmissionResult::rate_limit, "rate_limit"},
    {AdmissionResult::queue_length, "queue_length"},
    {AdmissionResult::estimated_wait, "estimated_wait"},
    {AdmissionResult::ttft_p90, "ttft_p90"},
});
inline constexpr std::size_t kAdmissionResults = 5;

// A tenant's limit: rate_per_s tokens a second, at most burst stored.
struct RateLimit {
  double rate_per_s = 0;  // > 0
  double burst = 1;       // >= 1
};

struct AdmissionClass {
  std::optional<RateLimit> rate_limit;  // none: unlimited
  double shed_fraction = 1;             // (0, 1]: the share of each threshold this class tolerates
};

struct AdmissionSpec {
  std::int64_t max_queued = 0;          // 0: no queue-length rejection
  double max_wait_s = 0;                // 0: no estimated-wait rejection
  double max_ttft_p90_s = 0;            // 0: no observed-latency rejection
  double ttft_window_s = 60;            // the TTFTs the p90 is taken over
  std::vector<AdmissionClass> classes;  // by Request::cls; a class beyond the list: the defaults
};

// What the router sees of the fleet when a request arrives.
struct FleetView {
  std::int64_t queued = 0;      // requests waiting (router and replicas), not yet running
  double estimated_wait_s = 0;  // the fleet's estimate of this request's wait before it runs
};

// A continuously refilled token bucket.
class TokenBucket {
 public:
  TokenBucket(double rate_per_s, double burst);
  // Takes one token at `now` (nondecreasing) if there is one.
  bool take(Time now);
  double tokens(Time now) const;

 private:
  double rate_per_s_;
  double burst_;
  double tokens_;
  Time last_{};
};

struct AdmissionCounters {
  // [result][class]: accepted and each rejection reason, per request class.
  std::array<std::vector<std::int64_t>, kAdmissionResults> by_result;
  std::int64_t count(AdmissionResult r) const;  // over every class
  std::int64_t count(AdmissionResult r, int cls) const;
  std::int64_t rejected() const;  // every reason, every class
};

class Admission {
 public:
  explicit Admission(AdmissionSpec spec);

  // The decision for request r arriving at `now` (nondecreasing); counted.
  AdmissionResult admit(const Request& r, Time now, const FleetView& fleet);
  // A request of the fleet got its first token at `at` after ttft_s (for the observed p90).
  void observe_ttft(Time at, double ttft_s);
  // The p90 of the TTFTs observed in (now - ttft_window_s, now]; nullopt when there are none.
  std::optional<double> ttft_p90(Time now);

  const AdmissionCounters& counters() const { return counters_; }
  const AdmissionSpec& spec() const { return spec_; }

 private:
  const AdmissionClass& cls(int c) const;

  AdmissionSpec spec_;
  std::vector<std::optional<TokenBucket>> buckets_;
  std::deque<std::pair<Time, double>> ttfts_;
  AdmissionCounters counters_;
};

}  // namespace ctwin
