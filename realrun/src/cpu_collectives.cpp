#include "realrun/cpu_collectives.hpp"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ctwin::realrun {

std::size_t ring_all_reduce(std::vector<std::span<float>> buffers) {
  const std::size_t n = buffers.size();
  if (n == 0) return 0;
  const std::size_t len = buffers[0].size();
  for (const auto& b : buffers) {
    if (b.size() != len) throw std::invalid_argument("ring_all_reduce: buffers differ in length");
  }
  if (n == 1) return 0;
  // Chunk c spans [c*len/n, (c+1)*len/n).
  auto lo = [&](std::size_t c) { return c * len / n; };
  auto hi = [&](std::size_t c) { return (c + 1) * len / n; };
  std::barrier sync(static_cast<std::ptrdiff_t>(n));
  std::vector<std::size_t> sent(n, 0);
  auto rank_main = [&](std::size_t r) {
    const std::size_t left = (r + n - 1) % n;
    // Reduce-scatter: at step s, rank r receives chunk (r - s - 1) from its left neighbour and adds it.
    for (std::size_t s = 0; s + 1 < n; ++s) {
      const std::size_t c = (r + 2 * n - s - 1) % n;
      for (std::size_t i = lo(c); i < hi(c); ++i) buffers[r][i] += buffers[left][i];
      sent[left] += (hi(c) - lo(c)) * sizeof(float);
      sync.arrive_and_wait();
    }
    // All-gather: rank r owns the full sum of chunk (r + 1) % n; pass completed chunks along.
    for (std::size_t s = 0; s + 1 < n; ++s) {
      const std::size_t c = (r + 2 * n - s) % n;
      for (std::size_t i = lo(c); i < hi(c); ++i) buffers[r][i] = buffers[left][i];
      sent[left] += (hi(c) - lo(c)) * sizeof(float);
      sync.arrive_and_wait();
    }
  };
  std::vector<std::jthread> threads;
  threads.reserve(n);
  for (std::size_t r = 0; r < n; ++r) threads.emplace_back(rank_main, r);
  threads.clear();  // joins
  return sent[0];
}

std::pair<std::size_t, std::size_t> chunk_bounds(std::size_t len, std::size_t n, std::size_t c) {
  return {c * len / n, (c + 1) * len / n};
}

ShmComm::ShmComm(std::vector<int> ranks, std::string label, double timeout_s)
    : ranks_(std::move(ranks)), label_(std::move(label)), timeout_s_(timeout_s) {
  if (ranks_.empty()) throw std::invalid_argument("ShmComm: a communicator needs at least one rank");
  slots_.resize(ranks_.size());
  arrived_.assign(ranks_.size(), 0);
  mailbox_.resize(ranks_.size());
}

int CpuComm::member_of(int rank) const {
  const auto it = std::find(ranks().begin(), ranks().end(), rank);
  return it == ranks().end() ? -1 : static_cast<int>(it - ranks().begin());
}

void ShmComm::check_member(int member) const {
  if (member < 0 || member >= size()) {
    throw std::invalid_argument("communicator '" + label_ + "': member " + std::to_string(member) + " of " +
                                std::to_string(size()));
  }
}

namespace {
std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}
}  // namespace

void ShmComm::sync(int member, const char* what) {
  std::unique_lock lk(mu_);
  if (!abort_reason_.empty()) throw CollectiveTimeout(abort_reason_);
  const std::size_t gen = gen_;
  arrived_[static_cast<std::size_t>(member)] = 1;
  if (++count_ == ranks_.size()) {
    count_ = 0;
    std::fill(arrived_.begin(), arrived_.end(), 0);
    ++gen_;
    cv_.notify_all();
    return;
  }
  const auto timeout = std::chrono::duration<double>(timeout_s_);
  const bool done = cv_.wait_for(lk, timeout, [&] { return gen_ != gen || !abort_reason_.empty(); });
  if (done && gen_ != gen) return;
  if (abort_reason_.empty()) {
    std::vector<int> missing;
    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      if (!arrived_[i]) missing.push_back(ranks_[i]);
    }
    std::ostringstream msg;
    msg << (missing.size() == 1 ? "rank " : "ranks ") << rank_list(missing) << " never joined " << what
        << " on communicator '" << label_ << "' (ranks " << rank_list(ranks_) << ") within " << timeout_s_
        << " s; the communicator is aborted";
    abort_reason_ = msg.str();
    cv_.notify_all();
  }
  throw CollectiveTimeout(abort_reason_);
}

void ShmComm::check_lengths(const char* what) const {
  for (const Slot& s : slots_) {
    if (s.len != slots_[0].len) {
      throw std::invalid_argument(std::string(what) + " on communicator '" + label_ + "': buffers differ in length");
    }
  }
}

void ShmComm::join(int member, const char* what) {
  check_member(member);
  sync(member, what);
}

void ShmComm::all_reduce(int member, std::span<float> data) {
  check_member(member);
  slots_[static_cast<std::size_t>(member)] = Slot{data.data(), nullptr, data.size()};
  sync(member, "all_reduce");
  check_lengths("all_reduce");
  const std::size_t n = ranks_.size(), r = static_cast<std::size_t>(member), len = data.size();
  if (n == 1) return;
  const float* left = slots_[(r + n - 1) % n].data;
  // Reduce-scatter: at step s, add the left neighbour's partial sum of chunk r-s-1; after n-1
  // steps this rank holds the whole sum of chunk r+1.
  for (std::size_t s = 0; s + 1 < n; ++s) {
    const auto [lo, hi] = chunk_bounds(len, n, (r + 2 * n - s - 1) % n);
    for (std::size_t i = lo; i < hi; ++i) data[i] += left[i];
    sync(member, "all_reduce");
  }
  // All-gather: pass the completed chunks along the ring.
  for (std::size_t s = 0; s + 1 < n; ++s) {
    const auto [lo, hi] = chunk_bounds(len, n, (r + 2 * n - s) % n);
    std::copy(left + lo, left + hi, data.begin() + static_cast<std::ptrdiff_t>(lo));
    sync(member, "all_reduce");
  }
}

void ShmComm::all_gather(int member, std::span<float> data) {
  check_member(member);
  slots_[static_cast<std::size_t>(member)] = Slot{data.data(), nullptr, data.size()};
  sync(member, "all_gather");
  check_lengths("all_gather");
  const std::size_t n = ranks_.size(), r = static_cast<std::size_t>(member), len = data.size();
  const float* left = slots_[(r + n - 1) % n].data;
  // At step s the left neighbour holds chunk r-1-s (its own at s = 0): copy it.
  for (std::size_t s = 0; s + 1 < n; ++s) {
    const auto [lo, hi] = chunk_bounds(len, n, (r + 2 * n - s - 1) % n);
    std::copy(left + lo, left + hi, data.begin() + static_cast<std::ptrdiff_t>(lo));
    sync(member, "all_gather");
  }
}

void ShmComm::reduce_scatter(int member, std::span<float> data) {
  check_member(member);
  slots_[static_cast<std::size_t>(member)] = Slot{data.data(), nullptr, data.size()};
  sync(member, "reduce_scatter");
  check_lengths("reduce_scatter");
  const std::size_t n = ranks_.size(), r = static_cast<std::size_t>(member), len = data.size();
  const float* left = slots_[(r + n - 1) % n].data;
  // As all-reduce's first phase, shifted by one chunk so that rank r ends with chunk r.
  for (std::size_t s = 0; s + 1 < n; ++s) {
    const auto [lo, hi] = chunk_bounds(len, n, (r + 2 * n - s - 2) % n);
    for (std::size_t i = lo; i < hi; ++i) data[i] += left[i];
    sync(member, "reduce_scatter");
  }
}

void ShmComm::all_to_all(int member, std::span<const float> send, std::span<float> recv) {
  check_member(member);
  if (send.size() != recv.size()) throw std::invalid_argument("all_to_all: send and receive buffers differ");
  slots_[static_cast<std::size_t>(member)] = Slot{recv.data(), send.data(), send.size()};
  sync(member, "all_to_all");
  check_lengths("all_to_all");
  const std::size_t n = ranks_.size(), r = static_cast<std::size_t>(member), len = send.size();
  for (std::size_t j = 0; j < n; ++j) {
    // Chunk r of member j's send buffer into chunk j of ours (equal chunk sizes only when len
    // divides by n: both sides use the receiver's chunk j length, clipped to the sender's chunk).
    const auto [slo, shi] = chunk_bounds(len, n, r);
    const auto [rlo, rhi] = chunk_bounds(len, n, j);
    const std::size_t count = std::min(shi - slo, rhi - rlo);
    std::copy(slots_[j].send + slo, slots_[j].send + slo + count, recv.begin() + static_cast<std::ptrdiff_t>(rlo));
  }
  sync(member, "all_to_all");
}

void ShmComm::broadcast(int member, std::span<float> data, int root_member) {
  check_member(member);
  check_member(root_member);
  slots_[static_cast<std::size_t>(member)] = Slot{data.data(), nullptr, data.size()};
  sync(member, "broadcast");
  check_lengths("broadcast");
  if (member != root_member) {
    const float* root = slots_[static_cast<std::size_t>(root_member)].data;
    std::copy(root, root + data.size(), data.begin());
  }
  sync(member, "broadcast");
}

void ShmComm::reduce(int member, std::span<float> data, int root_member) {
  check_member(member);
  check_member(root_member);
  slots_[static_cast<std::size_t>(member)] = Slot{data.data(), nullptr, data.size()};
  sync(member, "reduce");
  check_lengths("reduce");
  if (member == root_member) {
    for (std::size_t j = 0; j < slots_.size(); ++j) {
      if (static_cast<int>(j) == root_member) continue;
      const float* other = slots_[j].data;
      for (std::size_t i = 0; i < data.size(); ++i) data[i] += other[i];
    }
  }
  sync(member, "reduce");
}

void ShmComm::send_recv(int member, std::span<float> data, bool send) {
  check_member(member);
  slots_[static_cast<std::size_t>(member)] = Slot{data.data(), nullptr, data.size()};
  sync(member, "send_recv");
  check_lengths("send_recv");
  const std::size_t n = ranks_.size();
  if (n == 2) {
    if (!send) {
      const float* src = slots_[static_cast<std::size_t>(1 - member)].data;
      std::copy(src, src + data.size(), data.begin());
    }
    sync(member, "send_recv");
    return;
  }
  // A ring step: read the left neighbour's buffer, then overwrite ours once every read is done.
  const float* left = slots_[(static_cast<std::size_t>(member) + n - 1) % n].data;
  const std::vector<float> got(left, left + data.size());
  sync(member, "send_recv");
  std::copy(got.begin(), got.end(), data.begin());
  sync(member, "send_recv");
}

void ShmComm::post(int member, std::span<const float> data) {
  check_member(member);
  {
    std::lock_guard lk(mu_);
    if (!abort_reason_.empty()) throw CollectiveTimeout(abort_reason_);
    mailbox_[static_cast<std::size_t>(member + 1) % ranks_.size()].emplace_back(data.begin(), data.end());
  }
  cv_.notify_all();
}

void ShmComm::take(int member, std::span<float> data) {
  check_member(member);
  std::unique_lock lk(mu_);
  const auto timeout = std::chrono::duration<double>(timeout_s_);
  auto& box = mailbox_[static_cast<std::size_t>(member)];
  if (!cv_.wait_for(lk, timeout, [&] { return !box.empty() || !abort_reason_.empty(); })) {
    std::vector<int> others;
    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      if (static_cast<int>(i) != member) others.push_back(ranks_[i]);
    }
    std::ostringstream msg;
    msg << (others.size() == 1 ? "rank " : "ranks ") << rank_list(others) << " never sent to rank "
        << ranks_[static_cast<std::size_t>(member)] << " on communicator '" << label_ << "' within " << timeout_s_
        << " s; the communicator is aborted";
    abort_reason_ = msg.str();
    cv_.notify_all();
  }
  if (box.empty()) throw CollectiveTimeout(abort_reason_);
  const std::vector<float> m = std::move(box.front());
  box.pop_front();
  lk.unlock();
  std::copy(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(std::min(m.size(), data.size())), data.begin());
}

}  // namespace ctwin::realrun
