// The seam between realrun's driver (what to run: sweeps, a step's program, statistics, the
// measurements file) and its backends (how: CUDA + cuBLASLt + NCCL, or CPU threads + Eigen).
// It mirrors CUDA's model so both backends run the same driver: per rank, in-order streams that
// take kernels and collectives asynchronously, events recorded on a stream, and waits across
// streams. docs/measurements.md is the file the driver writes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "topology/collective.hpp"
#include "workloads/compute_model.hpp"

namespace ctwin::realrun {

// A communicator: the ranks of one group (TP, DP, PP pair, CP, EP), in ring order. Created once
// per group before timing, as NCCL's ncclCommInitRank; `id` is the driver's index of the group.
struct CommSpec {
  std::uint32_t id = 0;
  std::vector<int> ranks;  // global ranks, this rank among them
  std::string label;       // "tp", "dp", ... for the measurements file
};

struct CollectiveRequest {
  CollectiveOp op = CollectiveOp::all_reduce;
  std::uint32_t comm = 0;  // CommSpec::id
  double bytes = 0;        // nccl-tests size, as StepCall::bytes
  int peer = -1;           // send_recv: the other rank of the pair
  bool send = true;        // send_recv: this rank sends (else receives)
};

using EventHandle = std::uint32_t;

// One rank's device. Calls are made from the rank's driver thread only. Everything enqueued
// returns at once; synchronize() waits for all streams. A backend owns the buffers a kernel or
// collective touches (sized by the op), so the driver passes shapes, never pointers.
class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;  // "NVIDIA H100 80GB HBM3", "cpu: AMD EPYC 7B13"
  virtual int rank() const = 0;
  virtual int streams() const = 0;  // in-order streams available (at least kStepStreams)

  // Communicators are created collectively: every member calls with the same spec, in the same
  // order. A member that never arrives makes the others fail after `timeout_s` with a message
  // naming the missing rank and the communicator (CUDA: ncclCommAbort), never hang.
  virtual void create_comm(const CommSpec& spec, double timeout_s) = 0;

  virtual void launch(int stream, const OpCost& op) = 0;
  virtual void collective(int stream, const CollectiveRequest& req) = 0;
  virtual EventHandle record(int stream) = 0;
  virtual void wait(int stream, EventHandle event) = 0;              // the stream waits for the event
  virtual double elapsed_s(EventHandle start, EventHandle end) = 0;  // both completed
  virtual void synchronize() = 0;
};

// The job's devices on this process: the CPU backend creates `ranks` thread-ranks sharing
// memory; the CUDA backend one device per MPI rank (or per visible GPU without MPI).
struct BackendOptions {
  int ranks = 2;
  int threads_per_rank = 1;  // CPU: Eigen threads per rank
  double timeout_s = 60;     // collective and communicator timeout
};

std::vector<std::unique_ptr<Device>> make_cpu_devices(const BackendOptions& opt);

}  // namespace ctwin::realrun
