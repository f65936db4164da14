// The CUDA Device's communicators: one NCCL communicator a CommSpec, formed from a unique id
// that the group's first rank creates and hands to the others (over MPI between processes, or
// through a process-local rendezvous between the threads of one process), non-blocking
// (ncclConfig_t blocking = 0) so that a member that never arrives ends in ncclCommAbort and an
// error naming the rank and the communicator, never a hang.
#include <cuda_runtime.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#ifdef CTWIN_HAVE_MPI
#include <mpi.h>
#endif

#include "cuda_internal.hpp"

namespace ctwin::realrun::cuda {

namespace {

std::string members(const std::vector<int>& ranks) {
  std::string s = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

#ifdef CTWIN_HAVE_NCCL
// Unique ids handed from a group's root to the group's other threads in this process.
class Rendezvous {
 public:
  static Rendezvous& instance() {
    static Rendezvous r;
    return r;
  }
  void publish(std::uint32_t comm, const ncclUniqueId& id, int takers) {
    std::lock_guard<std::mutex> lock(mu_);
    ids_[comm] = {id, takers};
    cv_.notify_all();
  }
  bool take(std::uint32_t comm, double timeout_s, ncclUniqueId& out) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return ids_.count(comm) > 0; })) {
      return false;
    }
    Entry& e = ids_[comm];
    out = e.id;
    if (--e.takers <= 0) ids_.erase(comm);  // the next communicator of this id starts afresh
    return true;
  }

 private:
  struct Entry {
    ncclUniqueId id;
    int takers = 0;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint32_t, Entry> ids_;
};

#endif

}  // namespace

void CudaDevice::create_comm(const CommSpec& spec, double timeout_s) {
  use();
  const auto me = std::find(spec.ranks.begin(), spec.ranks.end(), rank_);
  const std::string what = "realrun rank " + std::to_string(rank_) + ": communicator '" + spec.label + "' (id " +
                           std::to_string(spec.id) + ", ranks " + members(spec.ranks) + ")";
  if (me == spec.ranks.end()) throw std::runtime_error(what + ": this rank is not a member");
  CommState c;
  c.spec = spec;
  c.index = static_cast<int>(me - spec.ranks.begin());
#ifdef CTWIN_HAVE_NCCL
  const int root = spec.ranks.front();
  ncclUniqueId id{};
  if (cuda_.world_size > 0) {
#ifdef CTWIN_HAVE_MPI
    // Between processes: the root sends the id to every other member (tag: the comm's id).
    const int tag = static_cast<int>(spec.id % 30000) + 100;
    if (rank_ == root) {
      if (ncclGetUniqueId(&id) != ncclSuccess) throw std::runtime_error(what + ": ncclGetUniqueId failed");
      for (std::size_t i = 1; i < spec.ranks.size(); ++i) {
        MPI_Send(&id, sizeof id, MPI_BYTE, spec.ranks[i], tag, MPI_COMM_WORLD);
      }
    } else {
      MPI_Request req = MPI_REQUEST_NULL;
      MPI_Irecv(&id, sizeof id, MPI_BYTE, root, tag, MPI_COMM_WORLD, &req);
      const auto start = std::chrono::steady_clock::now();
      for (int flag = 0; !flag;) {
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (!flag && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s) {
          MPI_Cancel(&req);
          throw std::runtime_error(what + ": rank " + std::to_string(root) +
                                   " (the group's root) did not join within " + seconds(timeout_s));
        }
        if (!flag) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
#else
    throw std::runtime_error(what + ": a multi-process job needs MPI, and this build has none");
#endif
  } else if (rank_ == root) {
    if (ncclGetUniqueId(&id) != ncclSuccess) throw std::runtime_error(what + ": ncclGetUniqueId failed");
    Rendezvous::instance().publish(spec.id, id, static_cast<int>(spec.ranks.size()) - 1);
  } else if (!Rendezvous::instance().take(spec.id, timeout_s, id)) {
    throw std::runtime_error(what + ": rank " + std::to_string(root) + " (the group's root) did not join within " +
                             seconds(timeout_s));
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&c.comm, static_cast<int>(spec.ranks.size()), id, c.index, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (c.comm != nullptr) ncclCommAbort(c.comm);
    throw std::runtime_error(what + ": ncclCommInitRankConfig: " + ncclGetErrorString(r));
  }
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    ncclResult_t state = ncclInProgress;
    ncclCommGetAsyncError(c.comm, &state);
    if (state == ncclSuccess) break;
    if (state != ncclInProgress) {
      ncclCommAbort(c.comm);
      throw std::runtime_error(what + ": ncclCommInitRankConfig: " + ncclGetErrorString(state));
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s) {
      ncclCommAbort(c.comm);
      throw std::runtime_error(what + ": not formed within " + seconds(timeout_s) +
                               " (a member never joined); ncclCommAbort");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
#else
  (void)timeout_s;
  throw std::runtime_error(what + ": this build has no NCCL");
#endif
  comms_[spec.id] = c;
}

void CudaDevice::reserve_comm(std::size_t send, std::size_t recv) {
  if (send > send_bytes_) {
    synchronize();
    cudaFree(send_);
    send_ = nullptr;
    check(cudaMalloc(&send_, send), "realrun rank " + std::to_string(rank_) + ": collective send buffer");
    send_bytes_ = send;
  }
  if (recv > recv_bytes_) {
    synchronize();
    cudaFree(recv_);
    recv_ = nullptr;
    check(cudaMalloc(&recv_, recv), "realrun rank " + std::to_string(rank_) + ": collective receive buffer");
    recv_bytes_ = recv;
  }
}

void CudaDevice::collective(int stream, const CollectiveRequest& req) {
  use();
  const auto it = comms_.find(req.comm);
  if (it == comms_.end()) {
    throw std::runtime_error("realrun rank " + std::to_string(rank_) + ": no communicator " + std::to_string(req.comm));
  }
  CommState& c = it->second;
  const int n = static_cast<int>(c.spec.ranks.size());
  const NcclPlan p = plan_nccl(req.op, req.bytes, n);
  reserve_comm(std::max<std::size_t>(4, p.send_elems * p.elem_bytes),
               std::max<std::size_t>(4, p.recv_elems * p.elem_bytes));
  c.last = std::string(to_string(req.op)) + " of " + std::to_string(static_cast<long long>(p.bytes)) + " bytes";
#ifdef CTWIN_HAVE_NCCL
  const cudaStream_t s = stream_at(stream);
  const std::string what = "realrun rank " + std::to_string(rank_) + ": " + c.last + " on '" + c.spec.label + "'";
  ncclResult_t r = ncclSuccess;
  switch (req.op) {
    case CollectiveOp::all_reduce:
      r = ncclAllReduce(send_, recv_, p.count, ncclFloat, ncclSum, c.comm, s);
      break;
    case CollectiveOp::all_gather:
      r = ncclAllGather(send_, recv_, p.count, ncclFloat, c.comm, s);
      break;
    case CollectiveOp::reduce_scatter:
      r = ncclReduceScatter(send_, recv_, p.count, ncclFloat, ncclSum, c.comm, s);
      break;
    case CollectiveOp::broadcast:
      r = ncclBroadcast(send_, recv_, p.count, ncclFloat, 0, c.comm, s);
      break;
    case CollectiveOp::reduce:
      r = ncclReduce(send_, recv_, p.count, ncclFloat, ncclSum, 0, c.comm, s);
      break;
    case CollectiveOp::all_to_all: {
      // As nccl-tests' alltoall: a group of one send and one receive a peer.
      ncclGroupStart();
      const std::size_t slice = p.count * p.elem_bytes;
      for (int peer = 0; peer < n; ++peer) {
        ncclSend(static_cast<char*>(send_) + peer * slice, p.count, ncclFloat, peer, c.comm, s);
        ncclRecv(static_cast<char*>(recv_) + peer * slice, p.count, ncclFloat, peer, c.comm, s);
      }
      r = ncclGroupEnd();
      break;
    }
    case CollectiveOp::send_recv: {
      const auto peer = std::find(c.spec.ranks.begin(), c.spec.ranks.end(), req.peer);
      if (peer == c.spec.ranks.end())
        throw std::runtime_error(what + ": peer " + std::to_string(req.peer) + " not in it");
      const int local = static_cast<int>(peer - c.spec.ranks.begin());
      r = req.send ? ncclSend(send_, p.count, ncclFloat, local, c.comm, s)
                   : ncclRecv(recv_, p.count, ncclFloat, local, c.comm, s);
      break;
    }
  }
  // Non-blocking communicators may answer "in progress" while the call is still being enqueued.
  const auto start = std::chrono::steady_clock::now();
  while (r == ncclInProgress) {
    if (ncclCommGetAsyncError(c.comm, &r) != ncclSuccess) break;
    if (r == ncclInProgress &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > opt_.timeout_s) {
      abort_comms();
      throw std::runtime_error(what + ": not enqueued within " + seconds(opt_.timeout_s) +
                               " (a member rank never joined); ncclCommAbort");
    }
  }
  if (r != ncclSuccess) {
    abort_comms();
    throw std::runtime_error(what + ": " + ncclGetErrorString(r));
  }
#else
  (void)stream;
  throw std::runtime_error("realrun: this build has no NCCL");
#endif
}

void CudaDevice::abort_comms() {
#ifdef CTWIN_HAVE_NCCL
  for (auto& [id, c] : comms_) {
    if (c.comm != nullptr) ncclCommAbort(c.comm);
    c.comm = nullptr;
  }
#endif
}

}  // namespace ctwin::realrun::cuda
