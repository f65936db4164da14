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

// One communicator over thread-ranks sharing memory. Every member calls the same operations in
// the same order from its own thread, with its position in `ranks` (`member`) and its own
// buffers. Each call is a rendezvous: a member that does not arrive within `timeout_s` makes the
// others throw CollectiveTimeout naming the missing global ranks and the communicator, and the
// communicator is aborted (every later call throws at once), never a hang.
class ShmComm {
 public:
  ShmComm(std::vector<int> ranks, std::string label, double timeout_s);
  int size() const { return static_cast<int>(ranks_.size()); }
  const std::vector<int>& ranks() const { return ranks_; }
  const std::string& label() const { return label_; }

  // The member's position in the ring, or -1 when `rank` is no member.
  int member_of(int rank) const;

  // A rendezvous and nothing else (communicator creation, as ncclCommInitRank).
  void join(int member, const char* what);
  // Sums every member's `data` (equal lengths) into every member's, in place: ring
  // reduce-scatter then ring all-gather.
  void all_reduce(int member, std::span<float> data);
  // `data` is the gathered output; on entry member i's own chunk (chunk_bounds(len, n, i)) holds
  // its contribution, on return every chunk holds its owner's.
  void all_gather(int member, std::span<float> data);
  // `data` is the input; on return member i's chunk i holds the sum of every member's chunk i
  // (the rest of `data` is scratch).
  void reduce_scatter(int member, std::span<float> data);
  // Chunk j of member i's `send` lands in chunk i of member j's `recv` (equal lengths).
  void all_to_all(int member, std::span<const float> send, std::span<float> recv);
  // Every member's `data` becomes the root's.
  void broadcast(int member, std::span<float> data, int root_member = 0);
  // The root's `data` becomes the sum of every member's; the others' are left as they were.
  void reduce(int member, std::span<float> data, int root_member = 0);
  // Two members: the sender's `data` is copied into the receiver's (a rendezvous of both). More:
  // each member's `data` becomes its left neighbour's (a ring step, as ring attention's).
  void send_recv(int member, std::span<float> data, bool send);
  // Eager point-to-point, as a pipeline stage posts its transfers: `post` copies `data` into the
  // next member's mailbox and returns; `take` waits (up to the timeout) for the oldest message
  // and copies it out. Messages are taken in the order they were posted.
  void post(int member, std::span<const float> data);
  void take(int member, std::span<float> data);

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
