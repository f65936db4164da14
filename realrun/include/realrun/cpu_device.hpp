// The CPU backend's Device (realrun/device.hpp): one thread-rank of this process. Each stream is
// a worker thread draining an in-order queue; an event is the steady_clock time at which its
// stream reached it; a wait blocks a stream until another's event has passed. Kernels run on the
// stream's thread (cpu_kernels.hpp), collectives over shared memory (cpu_collectives.hpp).
#pragma once

#include <string>

#include "realrun/device.hpp"

namespace ctwin::realrun {

class CpuDevice : public Device {
 public:
  // For tests of ordering: a kernel that holds its stream for `seconds` (a sleep).
  virtual void launch_sleep(int stream, double seconds) = 0;
};

// Whether Eigen runs its GEMMs on several threads in this build (OpenMP); without it each rank
// computes on one core, whatever BackendOptions::threads_per_rank says.
bool cpu_eigen_threads_available();
// "3.4.0": the Eigen this build compiled against.
const char* cpu_eigen_version();
// This host's CPU model (/proc/cpuinfo's "model name"), or "unknown CPU".
std::string cpu_model_name();

}  // namespace ctwin::realrun
