// realrun's CPU backend for collectives: ranks are threads, buffers are real memory, and the
// algorithms are the ones NCCL runs (a ring for all-reduce, all-gather and reduce-scatter;
// direct peer copies for all-to-all, broadcast, reduce and send/receive), so the pipeline that
// drives NCCL on GPUs runs for real, and is tested, on machines without one.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ctwin::realrun {

// Sums `buffers` (one per rank, equal lengths) element-wise in place with a ring
// all-reduce: n-1 reduce-scatter steps then n-1 all-gather steps, one thread per rank.
// Returns the bytes each rank sent, which is 2(n-1)/n of the buffer (the busbw factor).
std::size_t ring_all_reduce(std::vector<std::span<float>> buffers);

// A member that never joined a collective within the timeout, or a communicator that such a
// timeout aborted (as ncclCommAbort leaves it).
struct CollectiveTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Chunk c of a buffer of `len` elements split over n ranks: [first, second). Uneven lengths
// give chunks that differ by at most one element.
std::pair<std::size_t, std::size_t> chunk_bounds(std::size_t len, std::size_t n, std::size_t c);

// A communicator of the CPU backend: thread-ranks sharing memory (ShmComm) or one rank per MPI
// process (cpu_mpi.hpp). Every member calls the same operations in the same order, with its
// position in `ranks()` (`member`) and its own buffers. A member that does not arrive within the
// timeout makes the others throw CollectiveTimeout naming the missing global ranks and the
// communicator, and the communicator is aborted (every later call throws at once), never a hang.
class CpuComm {
 public:
  virtual ~CpuComm() = default;
  int size() const { return static_cast<int>(ranks().size()); }
  virtual const std::vector<int>& ranks() const = 0;
  virtual const std::string& label() const = 0;
  // The member's position in the ring, or -1 when `rank` is no member.
  int member_of(int rank) const;

  // A rendezvous and nothing else (communicator creation, as ncclCommInitRank).
  virtual void join(int member, const char* what) = 0;
  // Sums every member's `data` (equal lengths) into every member's, in place: ring
  // reduce-scatter then ring all-gather.
  virtual void all_reduce(int member, std::span<float> data) = 0;
  // `data` is the gathered output; on entry member i's own chunk (chunk_bounds(len, n, i)) holds
  // its contribution, on return every chunk holds its owner's.
  virtual void all_gather(int member, std::span<float> data) = 0;
  // `data` is the input; on return member i's chunk i holds the sum of every member's chunk i
  // (the rest of `data` is scratch).
  virtual void reduce_scatter(int member, std::span<float> data) = 0;
  // Chunk j of member i's `send` lands in chunk i of member j's `recv` (equal lengths).
  virtual void all_to_all(int member, std::span<const float> send, std::span<float> recv) = 0;
  // Every member's `data` becomes the root's.
  virtual void broadcast(int member, std::span<float> data, int root_member = 0) = 0;
  // The root's `data` becomes the sum of every member's; the others' are left as they were.
  virtual void reduce(int member, std::span<float> data, int root_member = 0) = 0;
  // Two members: the sender's `data` is copied into the receiver's (a rendezvous of both). More:
  // each member's `data` becomes its left neighbour's (a ring step, as ring attention's).
  virtual void send_recv(int member, std::span<float> data, bool send) = 0;
  // Eager point-to-point, as a pipeline stage posts its transfers: `post` copies `data` towards
  // the next member and returns; `take` waits (up to the timeout) for the oldest message from the
  // previous member and copies it out. Messages are taken in the order they were posted.
  virtual void post(int member, std::span<const float> data) = 0;
  virtual void take(int member, std::span<float> data) = 0;
};

// One communicator over thread-ranks sharing memory. Each call is a rendezvous of the members'
// threads.
class ShmComm final : public CpuComm {
 public:
  ShmComm(std::vector<int> ranks, std::string label, double timeout_s);
  const std::vector<int>& ranks() const override { return ranks_; }
  const std::string& label() const override { return label_; }

  void join(int member, const char* what) override;
  void all_reduce(int member, std::span<float> data) override;
  void all_gather(int member, std::span<float> data) override;
  void reduce_scatter(int member, std::span<float> data) override;
  void all_to_all(int member, std::span<const float> send, std::span<float> recv) override;
  void broadcast(int member, std::span<float> data, int root_member = 0) override;
  void reduce(int member, std::span<float> data, int root_member = 0) override;
  void send_recv(int member, std::span<float> data, bool send) override;
  void post(int member, std::span<const float> data) override;
  void take(int member, std::span<float> data) override;

 private:
  struct Slot {
    float* data = nullptr;
    const float* send = nullptr;
    std::size_t len = 0;
  };
  void sync(int member, const char* what);
  void check_member(int member) const;
  void check_lengths(const char* what) const;

  std::vector<int> ranks_;
  std::string label_;
  double timeout_s_;
  std::vector<Slot> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t gen_ = 0, count_ = 0;
  std::vector<char> arrived_;
  std::string abort_reason_;                             // non-empty once a timeout aborted the communicator
  std::vector<std::deque<std::vector<float>>> mailbox_;  // per receiving member
};

}  // namespace ctwin::realrun
