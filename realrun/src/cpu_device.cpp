#include "realrun/cpu_device.hpp"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <Eigen/Core>

#include "realrun/cpu_collectives.hpp"
#include "realrun/cpu_kernels.hpp"
#include "realrun/cpu_mpi.hpp"
#include "workloads/step_program.hpp"

namespace ctwin::realrun {

bool cpu_eigen_threads_available() {
#ifdef _OPENMP
  return true;
#else
  return false;
#endif
}

const char* cpu_eigen_version() {
#define CTWIN_STR2(x) #x
#define CTWIN_STR(x) CTWIN_STR2(x)
  return CTWIN_STR(EIGEN_WORLD_VERSION) "." CTWIN_STR(EIGEN_MAJOR_VERSION) "." CTWIN_STR(EIGEN_MINOR_VERSION);
#undef CTWIN_STR
#undef CTWIN_STR2
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    const auto start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? std::string("unknown CPU") : line.substr(start);
  }
  return "unknown CPU";
}

namespace {

using Clock = std::chrono::steady_clock;

// The communicators of one job, shared by its thread-ranks; or, under MPI, this process's own
// (`make`: one rank per process).
struct World {
  std::mutex mu;
  std::map<std::uint32_t, std::shared_ptr<CpuComm>> comms;
  std::function<std::shared_ptr<CpuComm>(const CommSpec&, double)> make;  // null: ShmComm

  std::shared_ptr<CpuComm> comm(const CommSpec& spec, double timeout_s) {
    std::lock_guard lk(mu);
    auto& c = comms[spec.id];
    if (!c) {
      c = make ? make(spec, timeout_s) : std::make_shared<ShmComm>(spec.ranks, spec.label, timeout_s);
    } else if (c->ranks() != spec.ranks) {
      throw std::invalid_argument("create_comm: communicator " + std::to_string(spec.id) + " ('" + spec.label +
                                  "') created with different ranks by different members");
    }
    return c;
  }
};

// An in-order queue drained by one worker thread.
class Stream {
 public:
  Stream() : thread_([this] { loop(); }) {}
  ~Stream() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void push(std::function<void()> task) {
    {
      std::lock_guard lk(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

class CpuRank final : public CpuDevice {
 public:
  CpuRank(int rank, std::shared_ptr<World> world, const BackendOptions& opt)
      : rank_(rank), world_(std::move(world)), opt_(opt), name_("cpu: " + cpu_model_name()), ws_(kStepStreams) {
    for (int s = 0; s < kStepStreams; ++s) streams_.push_back(std::make_unique<Stream>());
  }
  ~CpuRank() override { streams_.clear(); }  // join the workers before the state they use goes

  std::string name() const override { return name_; }
  int rank() const override { return rank_; }
  int streams() const override { return kStepStreams; }

  void create_comm(const CommSpec& spec, double timeout_s) override {
    auto comm = world_->comm(spec, timeout_s);
    const int member = comm->member_of(rank_);
    if (member < 0) {
      throw std::invalid_argument("create_comm: rank " + std::to_string(rank_) + " is no member of communicator '" +
                                  spec.label + "'");
    }
    comm->join(member, "create_comm");
    std::lock_guard lk(comms_mu_);
    auto& st = comms_[spec.id];
    st.comm = std::move(comm);
    st.member = member;
  }

  void launch(int stream, const OpCost& op) override {
    check_stream(stream);
    CpuWorkspace* ws = &ws_[static_cast<std::size_t>(stream)];
    enqueue(stream, [ws, op] { run_cpu_kernel(op, *ws); });
  }

  void launch_sleep(int stream, double seconds) override {
    check_stream(stream);
    enqueue(stream, [seconds] { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); });
  }

  void collective(int stream, const CollectiveRequest& req) override {
    check_stream(stream);
    CommState* st = nullptr;
    {
      std::lock_guard lk(comms_mu_);
      const auto it = comms_.find(req.comm);
      if (it == comms_.end()) {
        throw std::invalid_argument("collective on communicator " + std::to_string(req.comm) +
                                    ", never created on rank " + std::to_string(rank_));
      }
      st = &it->second;
    }
    enqueue(stream, [st, req] { run_collective(*st, req); });
  }

  EventHandle record(int stream) override {
    check_stream(stream);
    EventHandle id = 0;
    {
      std::lock_guard lk(ev_mu_);
      id = static_cast<EventHandle>(events_.size());
      events_.emplace_back();
    }
    streams_[static_cast<std::size_t>(stream)]->push([this, id] {
      {
        std::lock_guard lk(ev_mu_);
        events_[id].at = Clock::now();
        events_[id].done = true;
      }
      ev_cv_.notify_all();
    });
    return id;
  }

  void wait(int stream, EventHandle event) override {
    check_stream(stream);
    check_event(event);
    streams_[static_cast<std::size_t>(stream)]->push([this, event] {
      std::unique_lock lk(ev_mu_);
      ev_cv_.wait(lk, [&] { return events_[event].done; });
    });
  }

  double elapsed_s(EventHandle start, EventHandle end) override {
    check_event(start);
    check_event(end);
    Clock::time_point a, b;
    {
      std::unique_lock lk(ev_mu_);
      ev_cv_.wait(lk, [&] { return events_[start].done && events_[end].done; });
      a = events_[start].at;
      b = events_[end].at;
    }
    rethrow();
    return std::chrono::duration<double>(b - a).count();
  }

  void synchronize() override {
    std::vector<EventHandle> ends;
    for (int s = 0; s < kStepStreams; ++s) ends.push_back(record(s));
    {
      std::unique_lock lk(ev_mu_);
      ev_cv_.wait(lk, [&] {
        for (EventHandle e : ends) {
          if (!events_[e].done) return false;
        }
        return true;
      });
    }
    rethrow();
  }

 private:
  struct CommState {
    std::shared_ptr<CpuComm> comm;
    int member = 0;
    std::vector<float> buf, buf2;
  };
  struct Event {
    bool done = false;
    Clock::time_point at;
  };

  void check_stream(int stream) const {
    if (stream < 0 || stream >= kStepStreams) {
      throw std::invalid_argument("realrun cpu: stream " + std::to_string(stream) + " of " +
                                  std::to_string(kStepStreams));
    }
  }
  void check_event(EventHandle e) {
    std::lock_guard lk(ev_mu_);
    if (e >= events_.size()) throw std::invalid_argument("realrun cpu: unknown event " + std::to_string(e));
  }

  // Runs `task` on the stream unless an earlier task failed (the device is then broken, as a
  // CUDA context after an error: later work is skipped, events still complete).
  void enqueue(int stream, std::function<void()> task) {
    streams_[static_cast<std::size_t>(stream)]->push([this, task = std::move(task)] {
      {
        std::lock_guard lk(err_mu_);
        if (error_) return;
      }
      try {
        task();
      } catch (...) {
        std::lock_guard lk(err_mu_);
        if (!error_) error_ = std::current_exception();
      }
    });
  }

  void rethrow() {
    std::lock_guard lk(err_mu_);
    if (error_) std::rethrow_exception(error_);
  }

  static void run_collective(CommState& st, const CollectiveRequest& req) {
    const auto len = static_cast<std::size_t>(std::max(1.0, std::ceil(req.bytes / sizeof(float))));
    if (st.buf.size() < len) st.buf.assign(len, 1.0f);
    const std::span<float> data(st.buf.data(), len);
    CpuComm& c = *st.comm;
    switch (req.op) {
      case CollectiveOp::all_reduce:
        c.all_reduce(st.member, data);
        return;
      case CollectiveOp::all_gather:
        c.all_gather(st.member, data);
        return;
      case CollectiveOp::reduce_scatter:
        c.reduce_scatter(st.member, data);
        return;
      case CollectiveOp::broadcast:
        c.broadcast(st.member, data);
        return;
      case CollectiveOp::reduce:
        c.reduce(st.member, data);
        return;
      case CollectiveOp::all_to_all:
        if (st.buf2.size() < len) st.buf2.assign(len, 1.0f);
        c.all_to_all(st.member, data, std::span<float>(st.buf2.data(), len));
        return;
      case CollectiveOp::send_recv:
        // A pair posts eagerly (a pipeline stage's transfers never wait for the peer to be
        // ready); larger groups exchange as a rendezvous.
        if (c.size() == 2) {
          req.send ? c.post(st.member, data) : c.take(st.member, data);
        } else {
          c.send_recv(st.member, data, req.send);
        }
        return;
    }
  }

  int rank_;
  std::shared_ptr<World> world_;
  BackendOptions opt_;
  std::string name_;
  std::vector<CpuWorkspace> ws_;
  std::mutex comms_mu_;
  std::map<std::uint32_t, CommState> comms_;
  std::mutex ev_mu_;
  std::condition_variable ev_cv_;
  std::deque<Event> events_;
  std::mutex err_mu_;
  std::exception_ptr error_;
  std::vector<std::unique_ptr<Stream>> streams_;  // last: destroyed (joined) first
};

}  // namespace

std::vector<std::unique_ptr<Device>> make_cpu_devices(const BackendOptions& opt) {
  if (opt.ranks < 1) throw std::invalid_argument("realrun cpu: ranks must be at least 1");
  auto world = std::make_shared<World>();
  std::vector<std::unique_ptr<Device>> out;
  for (int r = 0; r < opt.ranks; ++r) out.push_back(std::make_unique<CpuRank>(r, world, opt));
  return out;
}

std::unique_ptr<Device> make_cpu_mpi_device(const BackendOptions& opt, int rank) {
  if (rank < 0 || rank >= opt.ranks) throw std::invalid_argument("realrun cpu: rank outside the job");
  auto world = std::make_shared<World>();
  world->make = [](const CommSpec& spec, double timeout_s) { return make_mpi_comm(spec.ranks, spec.label, timeout_s); };
  return std::make_unique<CpuRank>(rank, world, opt);
}

}  // namespace ctwin::realrun
