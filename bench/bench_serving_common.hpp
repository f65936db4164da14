// What bench_serving.cpp and bench_serving_fleet.cpp both use: the traffic and a memory probe.
#pragma once

#include "workloads/serving_traffic.hpp"

namespace ctwin {

// Poisson arrivals at rate_per_s for duration_s; lengths lognormal with the medians of the Azure
// LLM inference trace 2023 (conversation), as bench_serving.cpp explains.
TrafficSpec azure_conversation(double rate_per_s, double duration_s);

// The resident set now, MiB (/proc/self/status VmRSS; 0 where there is none).
double rss_mib();

}  // namespace ctwin
