// A KvCache for tests, obviously correct: per-request block counts and a free count, no prefix
// caching (cached_prefix_tokens is always 0), host blocks for swap.
#pragma once

#include <unordered_map>

#include "workloads/serving_types.hpp"

namespace ctwin::test {

class FakeKvCache final : public KvCache {
 public:
  FakeKvCache(std::int64_t num_blocks, int block_size, std::int64_t host_blocks = 0)
      : num_blocks_(num_blocks), block_size_(block_size), host_blocks_(host_blocks) {}

  std::int64_t cached_prefix_tokens(const Request&) const override { return 0; }
  bool allocate(const Request& r, std::int64_t tokens) override {
    const std::int64_t want = (tokens + block_size_ - 1) / block_size_;
    auto [it, fresh] = gpu_.try_emplace(r.id, 0);
    const std::int64_t more = want - it->second;
    if (more > num_blocks_ - used_) {
      if (fresh) gpu_.erase(it);
      return false;
    }
    if (fresh) {
      ++stats_.prefix_queries;
      stats_.prefix_query_tokens += r.prompt_tokens;
    }
    if (more > 0) {
      it->second += more;
      used_ += more;
    }
    return true;
  }
  void release(const Request& r) override {
    const auto it = gpu_.find(r.id);
    if (it == gpu_.end()) return;
    used_ -= it->second;
    gpu_.erase(it);
  }
  std::optional<std::int64_t> swap_out(const Request& r) override {
    const auto it = gpu_.find(r.id);
    const std::int64_t n = it == gpu_.end() ? 0 : it->second;
    if (n > host_blocks_ - host_used_) return std::nullopt;
    host_[r.id] = n;
    host_used_ += n;
    release(r);
    return n;
  }
  std::optional<std::int64_t> swap_in(const Request& r) override {
    const auto it = host_.find(r.id);
    const std::int64_t n = it == host_.end() ? 0 : it->second;
    if (n > num_blocks_ - used_) return std::nullopt;
    gpu_[r.id] = n;
    used_ += n;
    host_used_ -= n;
    if (it != host_.end()) host_.erase(it);
    return n;
  }
  int block_size() const override { return block_size_; }
  std::int64_t num_blocks() const override { return num_blocks_; }
  std::int64_t used_blocks() const override { return used_; }
  std::int64_t cached_blocks() const override { return 0; }
  std::int64_t num_host_blocks() const override { return host_blocks_; }
  std::int64_t used_host_blocks() const override { return host_used_; }
  std::int64_t blocks_of(const Request& r) const override {
    const auto it = gpu_.find(r.id);
    return it == gpu_.end() ? 0 : it->second;
  }
  const KvCacheStats& stats() const override { return stats_; }

 private:
  std::int64_t num_blocks_;
  int block_size_;
  std::int64_t host_blocks_;
  std::int64_t used_ = 0;
  std::int64_t host_used_ = 0;
  std::unordered_map<std::int64_t, std::int64_t> gpu_, host_;
  KvCacheStats stats_;
};

}  // namespace ctwin::test
