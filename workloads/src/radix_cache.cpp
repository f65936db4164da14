// The radix mode of the paged KV cache (kv_cache.hpp): SGLang's RadixAttention over pages.
// Tokens are identified by (owner, position) (Request), so a page's identity is (owner, page)
// and a run of pages of one owner is an interval: an edge of the tree is (owner, [start, end))
// in pages, and a node's children are told apart by the owner of their first page. Pages are
// only counted (free, used, cached), never named: the tree is the bookkeeping.
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kv_host_tier.hpp"
#include "prefix_blocks.hpp"
#include "sim/random.hpp"
#include "workloads/kv_cache.hpp"

namespace ctwin {

namespace {

constexpr std::int32_t root = 0;
constexpr std::int64_t unbounded = std::numeric_limits<std::int64_t>::max();

struct Node {
  std::int64_t owner = -1;          // 2*prefix_group+1, 2*request id or a hash's, as in kv_cache.cpp
  std::int64_t start = 0, end = 0;  // pages [start, end) of the sequence
  std::int32_t parent = root;
  std::int32_t refs = 0;  // requests whose path runs through this node
  std::int32_t children = 0;
  std::int64_t last_access = 0;
  std::uint32_t generation = 0;  // bumped when the node is freed, to spot stale heap entries
  std::int64_t pages() const { return end - start; }
};

struct ChildKey {
  std::int32_t parent;
  std::int64_t owner;
  bool operator==(const ChildKey&) const = default;
};
struct ChildKeyHash {
  std::size_t operator()(const ChildKey& k) const {
    return static_cast<std::size_t>(
        mix64(static_cast<std::uint64_t>(k.owner) ^ (static_cast<std::uint64_t>(k.parent) << 40)));
  }
};

struct Leaf {  // an eviction candidate: least recently accessed first, then lowest node
  std::int64_t last_access;
  std::int32_t node;
  std::uint32_t generation;
  bool operator>(const Leaf& o) const {
    return last_access != o.last_access ? last_access > o.last_access : node > o.node;
  }
};

struct Sequence {
  std::int64_t tokens = 0;
  std::int32_t node = root;        // deepest node of its locked path
  std::int64_t tree_pages = 0;     // pages on that path (= node's end)
  std::int64_t private_pages = 0;  // pages held outside the tree (the partial last one, copies)
  std::int64_t window_pages = 0;   // the windowed layers' pages (KvWindow), never in the tree
  std::int64_t host_blocks = 0;    // > 0: swapped out
  std::int64_t host_window = 0;    // of those, the window's
};

class RadixKvCache final : public PrefixKvCache {
 public:
  RadixKvCache(std::int64_t num_blocks, int block_size, std::int64_t num_host_blocks, KvOffload offload,
               KvWindow window)
      : block_size_(block_size),
        num_blocks_(num_blocks),
        num_host_blocks_(num_host_blocks),
        window_(window),
        host_(std::move(offload)) {
    nodes_.emplace_back();  // the root: no pages
    nodes_.reserve(1024);
    children_.reserve(1024);
  }

  std::int64_t cached_prefix_tokens(const Request& r, std::int64_t context_tokens) const override {
    if (context_tokens <= 1) return 0;
    std::int64_t unreferenced = 0;
    const std::int64_t limit = (context_tokens - 1) / block_size_;
    const std::int64_t n = match(r, limit, unreferenced);
    return (n + host_.extend(r, n, limit, block_size_)) * block_size_;
  }

  bool allocate(const Request& r, std::int64_t tokens) override {
    auto it = seqs_.find(r.id);
    if (it != seqs_.end() && it->second.host_blocks > 0)
      throw std::logic_error("kv cache: allocate on a swapped-out request");
    const std::int64_t have_tokens = it == seqs_.end() ? 0 : it->second.tokens;
    if (tokens <= have_tokens) return true;
    const bool first = it == seqs_.end();
    const std::int64_t context = std::max<std::int64_t>(r.prompt_tokens, tokens);
    std::int64_t hit = 0, host_hit = 0, hit_unreferenced = 0;
    if (first && context > 1) {
      const std::int64_t limit = (context - 1) / block_size_;
      hit = match(r, limit, hit_unreferenced);
      host_hit = host_.extend(r, hit, limit, block_size_);
    }
    const std::int64_t have = first ? 0 : ceil_pages(have_tokens);
    // Pages loaded from the host tier come in as fresh private pages, then join the tree.
    const std::int64_t reach = std::max(tokens, (hit + host_hit) * block_size_);
    const std::int64_t fresh = std::max<std::int64_t>(0, ceil_pages(reach) - have - hit);
    // The windowed layers' pages after this step, from the window's first page as computed before
    // it (the previous allocation, or the prefix found); those before free up first.
    const std::int64_t computed = first ? (hit + host_hit) * block_size_ : have_tokens;
    const std::int64_t window = window_blocks(window_, block_size_, computed, reach);
    const std::int64_t held = first ? 0 : it->second.window_pages;
    if (fresh + window - held > free_pages() + cached_ - hit_unreferenced) return false;

    ++clock_;
    if (first) {
      stats_.prefix_queries += 1;
      stats_.prefix_query_tokens += context;
      stats_.prefix_hit_tokens += (hit + host_hit) * block_size_;
    }
    Sequence& s = first ? seqs_[r.id] : it->second;
    if (first) {
      s.node = lock_prefix(r, hit);
      s.tree_pages = hit;
    }
    used_ -= s.window_pages;  // the old window's pages count as free room for the new
    s.window_pages = 0;
    evict_until(fresh + window);
    s.private_pages += fresh;
    s.window_pages = window;
    used_ += fresh + window;
    s.tokens = reach;
    insert_full_pages(r, s);
    host_.after_allocate(r, first, hit, host_hit, have_tokens / block_size_, reach / block_size_, block_size_, stats_);
    return true;
  }

  void release(const Request& r) override {
    auto it = seqs_.find(r.id);
    if (it == seqs_.end()) return;
    ++clock_;
    drop(it->second);
    seqs_.erase(it);
  }

  std::optional<std::int64_t> swap_out(const Request& r) override {
    auto it = seqs_.find(r.id);
    if (it == seqs_.end() || it->second.host_blocks > 0) return std::int64_t{0};
    Sequence& s = it->second;
    const std::int64_t window = s.window_pages;
    const std::int64_t n = s.tree_pages + s.private_pages + window;
    if (used_host_ + n > num_host_blocks_) return std::nullopt;
    ++clock_;
    drop(s);
    s.host_window = window;  // off the GPUs: a release meanwhile has no window pages to free
    s.host_blocks = n;
    used_host_ += n;
    return n;
  }

  // The pages come back as private copies; the full ones rejoin the tree (a copy of a page the
  // tree already holds is dropped for the tree's).
  std::optional<std::int64_t> swap_in(const Request& r) override {
    auto it = seqs_.find(r.id);
    if (it == seqs_.end() || it->second.host_blocks == 0) return std::int64_t{0};
    Sequence& s = it->second;
    const std::int64_t n = s.host_blocks;
    if (n > free_pages() + cached_) return std::nullopt;
    ++clock_;
    evict_until(n);
    s.window_pages = s.host_window;
    s.private_pages = n - s.host_window;
    s.host_window = 0;
    used_ += n;
    s.host_blocks = 0;
    used_host_ -= n;
    insert_full_pages(r, s);
    return n;
  }

  int block_size() const override { return block_size_; }
  std::int64_t num_blocks() const override { return num_blocks_; }
  std::int64_t used_blocks() const override { return used_; }
  std::int64_t cached_blocks() const override { return cached_; }
  std::int64_t num_host_blocks() const override { return num_host_blocks_; }
  std::int64_t used_host_blocks() const override { return used_host_; }
  std::int64_t blocks_of(const Request& r) const override {
    auto it = seqs_.find(r.id);
    if (it == seqs_.end() || it->second.host_blocks > 0) return 0;
    return it->second.tree_pages + it->second.private_pages + it->second.window_pages;
  }
  const KvCacheStats& stats() const override { return stats_; }
  KvLoads take_loads() override { return host_.take_loads(); }

 private:
  std::int64_t ceil_pages(std::int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }
  std::int64_t free_pages() const { return num_blocks_ - used_ - cached_; }

  // The owner of r's page p, and the end of the run of pages from p with that owner in r. A
  // trace's hash block is its own run: hash_owner(id) over the block's pages inside the prompt.
  std::int64_t owner(const Request& r, std::int64_t p) const { return detail::page_key(r, p, block_size_).owner; }
  std::int64_t run_end(const Request& r, std::int64_t p, std::int64_t owner_id) const {
    if (owner_id == 2 * r.id) return unbounded;
    if (r.prefix_block_count > 0) return detail::hashed_page(r, p, block_size_).block_end;
    return r.shared_prefix_tokens / block_size_;
  }
  // Whether page p continues the run of page p - 1 (same owner, same hash block): only then may
  // a leaf ending at p grow over it.
  bool continues_run(const Request& r, std::int64_t p) const {
    if (r.prefix_block_count == 0 || p == 0) return true;
    const detail::HashedPage h = detail::hashed_page(r, p, block_size_);
    return !h.hashed() || h.offset > 0;
  }
  std::int32_t child(std::int32_t parent, std::int64_t owner_id) const {
    auto it = children_.find({parent, owner_id});
    return it == children_.end() ? -1 : it->second;
  }

  // Pages of r's sequence found in the tree, at most limit; unreferenced: of those, how many
  // sit in unreferenced nodes (they stop being evictable once taken).
  std::int64_t match(const Request& r, std::int64_t limit, std::int64_t& unreferenced) const {
    std::int32_t n = root;
    std::int64_t p = 0;
    unreferenced = 0;
    while (p < limit) {
      const std::int64_t o = owner(r, p);
      const std::int32_t c = child(n, o);
      if (c < 0) break;
      const Node& cn = nodes_[static_cast<std::size_t>(c)];
      const std::int64_t m = std::min({cn.end, run_end(r, p, o), limit});
      if (cn.refs == 0) unreferenced += m - p;
      p = m;
      if (m < cn.end) break;
      n = c;
    }
    return p;
  }

  // Walks r's first `pages` pages (all in the tree), splitting the last edge where the match
  // ends inside it, and references the path; returns its deepest node.
  std::int32_t lock_prefix(const Request& r, std::int64_t pages) {
    std::int32_t n = root;
    std::int64_t p = 0;
    while (p < pages) {
      std::int32_t c = child(n, owner(r, p));
      if (nodes_[static_cast<std::size_t>(c)].end > pages) c = split(c, pages);
      p = nodes_[static_cast<std::size_t>(c)].end;
      n = c;
    }
    for (std::int32_t a = n; a != root; a = nodes_[static_cast<std::size_t>(a)].parent) ref(a);
    return n;
  }

  void ref(std::int32_t n) {
    Node& nd = nodes_[static_cast<std::size_t>(n)];
    nd.last_access = clock_;
    if (nd.refs++ == 0) {
      cached_ -= nd.pages();
      used_ += nd.pages();
    }
  }

  // Splits c at page m (start < m < end) into an upper node [start, m) and c = [m, end).
  std::int32_t split(std::int32_t c, std::int64_t m) {
    const std::int32_t u = new_node();
    Node& cn = nodes_[static_cast<std::size_t>(c)];
    Node& un = nodes_[static_cast<std::size_t>(u)];
    un.owner = cn.owner;
    un.start = cn.start;
    un.end = m;
    un.parent = cn.parent;
    un.refs = cn.refs;
    un.children = 1;
    un.last_access = cn.last_access;
    cn.start = m;
    cn.parent = u;
    children_[{un.parent, un.owner}] = u;
    children_[{u, cn.owner}] = c;
    return u;
  }

  std::int32_t new_node() {
    std::int32_t n;
    if (!free_nodes_.empty()) {
      n = free_nodes_.back();
      free_nodes_.pop_back();
    } else {
      n = static_cast<std::int32_t>(nodes_.size());
      nodes_.emplace_back();
    }
    const std::uint32_t g = nodes_[static_cast<std::size_t>(n)].generation;
    nodes_[static_cast<std::size_t>(n)] = Node{};
    nodes_[static_cast<std::size_t>(n)].generation = g;
    return n;
  }

  // Moves s's full private pages into the tree under its path: extending its own leaf, taking
  // the tree's copy where one exists (the private copy is freed), or adding a node.
  void insert_full_pages(const Request& r, Sequence& s) {
    const std::int64_t full = s.tokens / block_size_;
    std::int32_t n = s.node;
    std::int64_t t = s.tree_pages;
    while (t < full) {
      const std::int64_t o = owner(r, t);
      const std::int64_t seg_end = std::min(full, run_end(r, t, o));
      std::int32_t c = child(n, o);
      if (c >= 0) {
        const std::int64_t m = std::min(nodes_[static_cast<std::size_t>(c)].end, seg_end);
        if (m < nodes_[static_cast<std::size_t>(c)].end) c = split(c, m);
        ref(c);
        s.private_pages -= m - t;
        used_ -= m - t;
        t = m;
      } else if (Node& nd = nodes_[static_cast<std::size_t>(n)];
                 n != root && nd.owner == o && nd.children == 0 && nd.refs == 1 && nd.end == t && continues_run(r, t)) {
        nd.end = seg_end;
        nd.last_access = clock_;
        s.private_pages -= seg_end - t;
        t = seg_end;
        continue;
      } else {
        c = new_node();
        Node& cn = nodes_[static_cast<std::size_t>(c)];
        cn.owner = o;
        cn.start = t;
        cn.end = seg_end;
        cn.parent = n;
        cn.refs = 1;
        cn.last_access = clock_;
        ++nodes_[static_cast<std::size_t>(n)].children;
        children_[{n, o}] = c;
        s.private_pages -= seg_end - t;
        t = seg_end;
      }
      n = c;
    }
    s.node = n;
    s.tree_pages = t;
  }

  // Unreferences s's path (its pages stay cached) and frees its private pages.
  void drop(Sequence& s) {
    for (std::int32_t a = s.node; a != root;) {
      Node& nd = nodes_[static_cast<std::size_t>(a)];
      nd.last_access = clock_;
      if (--nd.refs == 0) {
        used_ -= nd.pages();
        cached_ += nd.pages();
        if (nd.children == 0) push_leaf(a);
      }
      a = nd.parent;
    }
    used_ -= s.private_pages + s.window_pages;
    s.private_pages = 0;
    s.window_pages = 0;
    s.node = root;
    s.tree_pages = 0;
  }

  void push_leaf(std::int32_t n) {
    const Node& nd = nodes_[static_cast<std::size_t>(n)];
    leaves_.push_back({nd.last_access, n, nd.generation});
    std::push_heap(leaves_.begin(), leaves_.end(), std::greater<>{});
    // Stale entries (leaves since referenced, grown or freed) would pile up with the request
    // count; rebuild from the live leaves when they outnumber the nodes.
    if (leaves_.size() > 2 * nodes_.size() + 64) {
      leaves_.clear();
      for (std::size_t i = 1; i < nodes_.size(); ++i) {
        const Node& x = nodes_[i];
        if (x.refs == 0 && x.children == 0 && x.end > x.start && !is_free_node(static_cast<std::int32_t>(i)))
          leaves_.push_back({x.last_access, static_cast<std::int32_t>(i), x.generation});
      }
      std::make_heap(leaves_.begin(), leaves_.end(), std::greater<>{});
    }
  }
  bool is_free_node(std::int32_t n) const { return nodes_[static_cast<std::size_t>(n)].parent < 0; }

  // Evicts unreferenced leaves, least recently accessed first, until `pages` pages are free (a
  // whole leaf goes, as in SGLang, so a little more may come free).
  void evict_until(std::int64_t pages) {
    while (free_pages() < pages) {
      if (leaves_.empty()) throw std::logic_error("kv cache: radix eviction found no leaf");
      std::pop_heap(leaves_.begin(), leaves_.end(), std::greater<>{});
      const Leaf l = leaves_.back();
      leaves_.pop_back();
      Node& nd = nodes_[static_cast<std::size_t>(l.node)];
      if (nd.generation != l.generation || nd.refs != 0 || nd.children != 0 || nd.last_access != l.last_access)
        continue;
      cached_ -= nd.pages();
      stats_.evicted_blocks += nd.pages();
      const std::int32_t parent = nd.parent;
      children_.erase({parent, nd.owner});
      ++nd.generation;
      nd.parent = -1;  // marks it free
      free_nodes_.push_back(l.node);
      Node& pn = nodes_[static_cast<std::size_t>(parent)];
      if (--pn.children == 0 && parent != root && pn.refs == 0) push_leaf(parent);
    }
  }

  int block_size_;
  std::int64_t num_blocks_;
  std::int64_t num_host_blocks_;
  KvWindow window_;
  std::vector<Node> nodes_;
  std::vector<std::int32_t> free_nodes_;
  std::unordered_map<ChildKey, std::int32_t, ChildKeyHash> children_;
  std::vector<Leaf> leaves_;  // a min-heap on (last_access, node), with stale entries skipped
  std::unordered_map<std::int64_t, Sequence> seqs_;
  std::int64_t used_ = 0, cached_ = 0, used_host_ = 0;
  std::int64_t clock_ = 0;
  KvCacheStats stats_;
  detail::HostTierLink host_;
};

}  // namespace

std::unique_ptr<PrefixKvCache> detail::make_radix_kv_cache(std::int64_t num_blocks, int block_size,
                                                           std::int64_t num_host_blocks, KvOffload offload,
                                                           KvWindow window) {
  return std::make_unique<RadixKvCache>(num_blocks, block_size, num_host_blocks, std::move(offload), window);
}

}  // namespace ctwin
