// The none mode of the paged KV cache (kv_cache.hpp): with nothing ever found again, which
// physical block a request holds cannot matter, so the cache counts blocks per request instead
// of naming them. Same answers as a block pool without names (the differential test checks it),
// O(1) per call whatever the request's length.
#include <stdexcept>

#include "flat_map.hpp"
#include "workloads/kv_cache.hpp"

namespace ctwin {
namespace {

class CountingKvCache final : public PrefixKvCache {
 public:
  CountingKvCache(std::int64_t num_blocks, int block_size, std::int64_t num_host_blocks, KvWindow window)
      : num_blocks_(num_blocks), block_size_(block_size), num_host_blocks_(num_host_blocks), window_(window) {}

  std::int64_t cached_prefix_tokens(const Request&, std::int64_t) const override { return 0; }

  bool allocate(const Request& r, std::int64_t tokens) override {
    Sequence* s = seqs_.find(r.id);
    if (s && s->host_blocks > 0) throw std::logic_error("kv cache: allocate on a swapped-out request");
    if (tokens <= (s ? s->tokens : 0)) return true;
    const std::int64_t have = s ? s->blocks - s->window_blocks : 0;
    const std::int64_t fresh = std::max<std::int64_t>(0, (tokens + block_size_ - 1) / block_size_ - have);
    // The windowed layers' blocks: those before the window free up as these are taken.
    const std::int64_t held = s ? s->window_blocks : 0;
    const std::int64_t window = window_blocks(window_, block_size_, s ? s->tokens : 0, tokens);
    if (fresh + window - held > num_blocks_ - used_) return false;
    if (have == 0) {  // a first call: a prefix query that finds nothing
      stats_.prefix_queries += 1;
      stats_.prefix_query_tokens += std::max<std::int64_t>(r.prompt_tokens, tokens);
    }
    if (!s) s = &seqs_[r.id];
    s->blocks += fresh + window - held;
    s->window_blocks = window;
    s->tokens = tokens;
    used_ += fresh + window - held;
    return true;
  }

  void release(const Request& r) override {
    if (const Sequence* s = seqs_.find(r.id)) {
      used_ -= s->blocks;
      seqs_.erase(r.id);
    }
  }

  std::optional<std::int64_t> swap_out(const Request& r) override {
    Sequence* s = seqs_.find(r.id);
    if (!s || s->host_blocks > 0) return std::int64_t{0};
    const std::int64_t n = s->blocks;
    if (used_host_ + n > num_host_blocks_) return std::nullopt;
    used_ -= n;
    s->blocks = 0;
    s->host_blocks = n;
    used_host_ += n;
    return n;
  }

  std::optional<std::int64_t> swap_in(const Request& r) override {
    Sequence* s = seqs_.find(r.id);
    if (!s || s->host_blocks == 0) return std::int64_t{0};
    const std::int64_t n = s->host_blocks;
    if (n > num_blocks_ - used_) return std::nullopt;
    used_ += n;
    s->blocks = n;
    s->host_blocks = 0;
    used_host_ -= n;
    return n;
  }

  int block_size() const override { return block_size_; }
  std::int64_t num_blocks() const override { return num_blocks_; }
  std::int64_t used_blocks() const override { return used_; }
  std::int64_t cached_blocks() const override { return 0; }
  std::int64_t num_host_blocks() const override { return num_host_blocks_; }
  std::int64_t used_host_blocks() const override { return used_host_; }
  std::int64_t blocks_of(const Request& r) const override {
    const Sequence* s = seqs_.find(r.id);
    return s ? s->blocks : 0;
  }
  const KvCacheStats& stats() const override { return stats_; }

 private:
  struct Sequence {
    std::int64_t tokens = 0;         // tokens allocated for
    std::int64_t blocks = 0;         // GPU blocks held, the window's included
    std::int64_t window_blocks = 0;  // of those, the windowed layers' (KvWindow)
    std::int64_t host_blocks = 0;    // > 0: swapped out
  };
  std::int64_t num_blocks_;
  int block_size_;
  std::int64_t num_host_blocks_;
  KvWindow window_;
  detail::FlatIdMap<Sequence> seqs_;
  std::int64_t used_ = 0, used_host_ = 0;
  KvCacheStats stats_;
};

}  // namespace

namespace detail {
std::unique_ptr<PrefixKvCache> make_counting_kv_cache(std::int64_t num_blocks, int block_size,
                                                      std::int64_t num_host_blocks, KvWindow window) {
  return std::make_unique<CountingKvCache>(num_blocks, block_size, num_host_blocks, window);
}
}  // namespace detail

}  // namespace ctwin
