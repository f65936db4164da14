#include "realrun/cpu_mpi.hpp"
#include "realrun/cuda_plan.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#ifdef CTWIN_HAVE_MPI
#include <mpi.h>
#endif

namespace ctwin::realrun {

bool launched_by_mpi() {
  const LaunchEnv e = launch_env([](const char* n) { return std::getenv(n); });
  return e.launched && e.size > 1;
}

#ifndef CTWIN_HAVE_MPI

namespace {
[[noreturn]] void no_mpi() {
  throw std::runtime_error("this ctwin was built without MPI: install Open MPI (scripts/install-deps.sh) and rebuild");
}
}  // namespace

bool cpu_mpi_built() { return false; }
MpiWorld mpi_init_world(bool) { no_mpi(); }
std::string mpi_library_version() { return ""; }
void mpi_finalize() {}
void mpi_abort_if_running(int) {}
std::shared_ptr<CpuComm> make_mpi_comm(std::vector<int>, std::string, double) { no_mpi(); }

#else

bool cpu_mpi_built() { return true; }

MpiWorld mpi_init_world(bool thread_multiple) {
  int up = 0;
  MPI_Initialized(&up);
  if (!up) {
    int provided = 0;
    const int required = thread_multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE;
    MPI_Init_thread(nullptr, nullptr, required, &provided);
    if (provided < required) {
      MPI_Finalize();
      throw std::runtime_error(
          "the MPI library gives no MPI_THREAD_MULTIPLE: realrun's CPU backend runs a rank's "
          "collectives from its stream threads");
    }
  }
  MpiWorld w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  w.group.index = w.rank;
  w.group.count = w.size;
  // MPI_Barrier spins on its core; a rank that arrives first would take CPU from the ranks
  // still timing a kernel on a machine with fewer cores than threads. Poll, then sleep.
  w.group.barrier = [] {
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    for (int spins = 0;; ++spins) {
      int done = 0;
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
      if (done) return;
      if (spins > 200) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  };
  w.group.all_gather = [size = w.size](const std::vector<double>& mine) {
    std::vector<double> all(mine.size() * static_cast<std::size_t>(size));
    MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(), static_cast<int>(mine.size()),
                  MPI_DOUBLE, MPI_COMM_WORLD);
    return all;
  };
  w.group.all_gather_bytes = [size = w.size](const std::string& mine) {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size), 0);
    MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD);
    for (std::size_t r = 1; r < lens.size(); ++r) offsets[r] = offsets[r - 1] + lens[r - 1];
    std::string all(static_cast<std::size_t>(offsets.back() + lens.back()), '\0');
    MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (std::size_t r = 0; r < lens.size(); ++r) out.push_back(all.substr(offsets[r], lens[r]));
    return out;
  };
  return w;
}

std::string mpi_library_version() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, static_cast<std::size_t>(std::max(0, len)));
  return s.substr(0, s.find_first_of(std::string("\r\n\0", 3)));  // the first line, without the NUL
}

void mpi_finalize() {
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (up && !down) MPI_Finalize();
}

void mpi_abort_if_running(int code) {
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (up && !down) MPI_Abort(MPI_COMM_WORLD, code);
}

namespace {

// Message tags: collectives, then the eager pipeline messages (post/take), kept apart so a
// posted transfer is never matched by a collective's receive.
constexpr int kTagCollective = 1;
constexpr int kTagPost = 2;

int count_of(std::size_t n) {
  if (n > static_cast<std::size_t>(INT_MAX)) throw std::invalid_argument("realrun cpu mpi: a message over 2^31 floats");
  return static_cast<int>(n);
}

class MpiComm final : public CpuComm {
 public:
  MpiComm(std::vector<int> ranks, std::string label, double timeout_s)
      : ranks_(std::move(ranks)), label_(std::move(label)), timeout_s_(timeout_s) {
    int world_rank = 0, world_size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (ranks_.empty()) throw std::invalid_argument("MpiComm: a communicator needs at least one rank");
    for (int r : ranks_) {
      if (r < 0 || r >= world_size) {
        throw std::invalid_argument("communicator '" + label_ + "': rank " + std::to_string(r) + " outside the " +
                                    std::to_string(world_size) + " MPI processes");
      }
    }
    me_ = member_of(world_rank);
    if (me_ < 0) throw std::invalid_argument("communicator '" + label_ + "': created on a process that is no member");
    MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Group_incl(world_group, size(), ranks_.data(), &group);
    // Collective over the members only; every process creates its communicators in the plan's
    // order, so the members meet in the same creation.
    MPI_Comm_create_group(MPI_COMM_WORLD, group, 0, &comm_);
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
  }
  ~MpiComm() override {
    std::lock_guard lk(post_mu_);
    for (auto& p : posted_) {
      if (aborted()) {
        MPI_Cancel(&p.first);
        MPI_Request_free(&p.first);
      } else {
        MPI_Wait(&p.first, MPI_STATUS_IGNORE);
      }
    }
    if (!aborted()) MPI_Comm_free(&comm_);
  }
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  const std::vector<int>& ranks() const override { return ranks_; }
  const std::string& label() const override { return label_; }

  void join(int member, const char* what) override {
    check(member);
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Ibarrier(comm_, &r);
    std::vector<Pending> reqs{{r, -1}};
    wait(reqs, what);
  }

  void all_reduce(int member, std::span<float> data) override {
    check(member);
    reduce_scatter_ring(data, "all_reduce");
    all_gather_ring(data, "all_reduce");
  }
  void all_gather(int member, std::span<float> data) override {
    check(member);
    all_gather_ring(data, "all_gather");
  }
  void reduce_scatter(int member, std::span<float> data) override {
    check(member);
    reduce_scatter_ring(data, "reduce_scatter");
  }

  void all_to_all(int member, std::span<const float> send, std::span<float> recv) override {
    check(member);
    if (send.size() != recv.size()) throw std::invalid_argument("all_to_all: send and receive lengths differ");
    const auto n = static_cast<std::size_t>(size());
    std::vector<Pending> reqs;
    for (std::size_t j = 0; j < n; ++j) {
      const auto [b, e] = chunk_bounds(send.size(), n, j);
      const auto [rb, re] = chunk_bounds(recv.size(), n, static_cast<std::size_t>(j));
      if (static_cast<int>(j) == me_) {
        std::copy(send.begin() + static_cast<std::ptrdiff_t>(b), send.begin() + static_cast<std::ptrdiff_t>(e),
                  recv.begin() + static_cast<std::ptrdiff_t>(rb));
        continue;
      }
      // Member j's chunk me_ lands in our chunk j: our chunk j and theirs are the same size.
      reqs.push_back({irecv(recv.data() + rb, re - rb, static_cast<int>(j), kTagCollective), static_cast<int>(j)});
      reqs.push_back({isend(send.data() + b, e - b, static_cast<int>(j), kTagCollective), static_cast<int>(j)});
    }
    wait(reqs, "all_to_all");
  }

  void broadcast(int member, std::span<float> data, int root_member) override {
    check(member);
    std::vector<Pending> reqs;
    if (me_ == root_member) {
      for (int j = 0; j < size(); ++j)
        if (j != me_) reqs.push_back({isend(data.data(), data.size(), j, kTagCollective), j});
    } else {
      reqs.push_back({irecv(data.data(), data.size(), root_member, kTagCollective), root_member});
    }
    wait(reqs, "broadcast");
  }

  void reduce(int member, std::span<float> data, int root_member) override {
    check(member);
    std::vector<Pending> reqs;
    if (me_ != root_member) {
      reqs.push_back({isend(data.data(), data.size(), root_member, kTagCollective), root_member});
      wait(reqs, "reduce");
      return;
    }
    std::vector<std::vector<float> > parts;
    for (int j = 0; j < size(); ++j) {
      if (j == me_) continue;
      parts.emplace_back(data.size());
      reqs.push_back({irecv(parts.back().data(), data.size(), j, kTagCollective), j});
    }
    wait(reqs, "reduce");
    for (const auto& p : parts)
      for (std::size_t i = 0; i < data.size(); ++i) data[i] += p[i];
  }

  void send_recv(int member, std::span<float> data, bool send) override {
    check(member);
    std::vector<Pending> reqs;
    if (size() == 2) {
      const int other = 1 - me_;
      reqs.push_back({send ? isend(data.data(), data.size(), other, kTagCollective)
                           : irecv(data.data(), data.size(), other, kTagCollective),
                      other});
      wait(reqs, "send_recv");
      return;
    }
    // A ring step: our data goes right, the left neighbour's replaces it.
    std::vector<float> out(data.begin(), data.end());
    reqs.push_back({irecv(data.data(), data.size(), left(), kTagCollective), left()});
    reqs.push_back({isend(out.data(), out.size(), right(), kTagCollective), right()});
    wait(reqs, "send_recv");
  }

  void post(int member, std::span<const float> data) override {
    check(member);
    std::lock_guard lk(post_mu_);
    // Completed sends give their buffers back; the rest stay until the receiver takes them.
    while (!posted_.empty()) {
      int done = 0;
      MPI_Test(&posted_.front().first, &done, MPI_STATUS_IGNORE);
      if (!done) break;
      posted_.pop_front();
    }
    posted_.emplace_back(MPI_REQUEST_NULL, std::vector<float>(data.begin(), data.end()));
    auto& p = posted_.back();
    p.first = isend(p.second.data(), p.second.size(), right(), kTagPost);
  }

  void take(int member, std::span<float> data) override {
    check(member);
    std::vector<Pending> reqs{{irecv(data.data(), data.size(), left(), kTagPost), left()}};
    wait(reqs, "take (a pipeline transfer)");
  }

 private:
  struct Pending {
    MPI_Request req;
    int peer;  // the member it waits on; -1: every other (a barrier)
  };

  int left() const { return (me_ - 1 + size()) % size(); }
  int right() const { return (me_ + 1) % size(); }

  bool aborted() const {
    std::lock_guard lk(abort_mu_);
    return !abort_reason_.empty();
  }

  void check(int member) const {
    if (member != me_) {
      throw std::invalid_argument("communicator '" + label_ + "': member " + std::to_string(member) +
                                  " called on the process of member " + std::to_string(me_));
    }
    std::lock_guard lk(abort_mu_);
    if (!abort_reason_.empty()) throw CollectiveTimeout(abort_reason_);
  }

  MPI_Request isend(const float* p, std::size_t n, int peer, int tag) {
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Isend(p, count_of(n), MPI_FLOAT, peer, tag, comm_, &r);
    return r;
  }
  MPI_Request irecv(float* p, std::size_t n, int peer, int tag) {
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Irecv(p, count_of(n), MPI_FLOAT, peer, tag, comm_, &r);
    return r;
  }

  // Waits for every request, polling (MPI progresses only inside its calls), up to the timeout;
  // then names the members still awaited, aborts the communicator and throws.
  void wait(std::vector<Pending>& reqs, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    for (int spins = 0;; ++spins) {
      bool all = true;
      for (auto& p : reqs) {
        if (p.req == MPI_REQUEST_NULL) continue;
        int done = 0;
        MPI_Test(&p.req, &done, MPI_STATUS_IGNORE);
        all = all && done;
      }
      if (all) return;
      if (std::chrono::steady_clock::now() > deadline) break;
      // Spin a while (a ring step is microseconds), then give the core to the rank's compute
      // thread between polls, and only after long waits (a peer still computing) sleep.
      if (spins > 100000) {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      } else if (spins > 200) {
        std::this_thread::yield();
      }
    }
    std::string who;
    for (const auto& p : reqs) {
      if (p.req == MPI_REQUEST_NULL) continue;
      if (p.peer < 0) {
        who = "every other member";
        break;
      }
      const std::string r = std::to_string(ranks_[static_cast<std::size_t>(p.peer)]);
      if (who.find(r) == std::string::npos) who += (who.empty() ? "" : ", ") + r;
    }
    for (auto& p : reqs) {
      if (p.req == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&p.req);
      MPI_Request_free(&p.req);
    }
    const std::string msg = "rank " + std::to_string(ranks_[static_cast<std::size_t>(me_)]) + ": " + what +
                            " on communicator '" + label_ + "' waited " + std::to_string(timeout_s_) +
                            " s for rank(s) " + who + " (MPI processes); the communicator is aborted";
    {
      std::lock_guard lk(abort_mu_);
      if (abort_reason_.empty()) abort_reason_ = msg;
    }
    throw CollectiveTimeout(msg);
  }

  // Ring reduce-scatter: after n - 1 steps member i holds the sum of chunk i.
  void reduce_scatter_ring(std::span<float> data, const char* what) {
    const int n = size();
    if (n == 1) return;
    const auto len = data.size();
    const auto nn = static_cast<std::size_t>(n);
    std::vector<float> tmp(len / nn + 1);  // chunks differ by at most one element
    for (int s = 0; s < n - 1; ++s) {
      const auto sc = static_cast<std::size_t>((me_ - s - 1 + 2 * n) % n);
      const auto rc = static_cast<std::size_t>((me_ - s - 2 + 2 * n) % n);
      const auto [sb, se] = chunk_bounds(len, nn, sc);
      const auto [rb, re] = chunk_bounds(len, nn, rc);
      std::vector<Pending> reqs{{irecv(tmp.data(), re - rb, left(), kTagCollective), left()},
                                {isend(data.data() + sb, se - sb, right(), kTagCollective), right()}};
      wait(reqs, what);
      for (std::size_t i = 0; i < re - rb; ++i) data[rb + i] += tmp[i];
    }
  }

  // Ring all-gather: member i's chunk i goes round until every member holds every chunk.
  void all_gather_ring(std::span<float> data, const char* what) {
    const int n = size();
    if (n == 1) return;
    const auto len = data.size();
    const auto nn = static_cast<std::size_t>(n);
    for (int s = 0; s < n - 1; ++s) {
      const auto sc = static_cast<std::size_t>((me_ - s + n) % n);
      const auto rc = static_cast<std::size_t>((me_ - s - 1 + 2 * n) % n);
      const auto [sb, se] = chunk_bounds(len, nn, sc);
      const auto [rb, re] = chunk_bounds(len, nn, rc);
      std::vector<Pending> reqs{{irecv(data.data() + rb, re - rb, left(), kTagCollective), left()},
                                {isend(data.data() + sb, se - sb, right(), kTagCollective), right()}};
      wait(reqs, what);
    }
  }

  std::vector<int> ranks_;
  std::string label_;
  double timeout_s_;
  int me_ = -1;
  MPI_Comm comm_ = MPI_COMM_NULL;
  mutable std::mutex abort_mu_;
  std::string abort_reason_;
  std::mutex post_mu_;
  std::deque<std::pair<MPI_Request, std::vector<float> > > posted_;
};

}  // namespace

std::shared_ptr<CpuComm> make_mpi_comm(std::vector<int> ranks, std::string label, double timeout_s) {
  return std::make_shared<MpiComm>(std::move(ranks), std::move(label), timeout_s);
}

#endif  // CTWIN_HAVE_MPI

}  // namespace ctwin::realrun
