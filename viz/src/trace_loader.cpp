// Loading a trace off the UI thread, with a progress fraction the window shows as a bar.
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <istream>
#include <mutex>
#include <streambuf>
#include <thread>

#include "sim/error.hpp"
#include "viz/trace_loader.hpp"

namespace ctwin::viz {
namespace {

// A read-only stream buffer over a FILE that reports how much of the file was consumed.
// Bulk reads (the .ctt event array) go straight into the caller's memory in 16 MiB chunks.
class ProgressReadBuf : public std::streambuf {
 public:
  ProgressReadBuf(std::FILE* f, double total, const ProgressFn& progress)
      : f_(f), total_(total > 0 ? total : 1), progress_(progress), buf_(1 << 20) {}

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const std::size_t n = std::fread(buf_.data(), 1, buf_.size(), f_);
    if (n == 0) return traits_type::eof();
    setg(buf_.data(), buf_.data(), buf_.data() + n);
    consumed(n);
    return traits_type::to_int_type(*gptr());
  }

  std::streamsize xsgetn(char* s, std::streamsize n) override {
    std::streamsize done = std::min<std::streamsize>(n, egptr() - gptr());
    if (done > 0) {
      std::memcpy(s, gptr(), static_cast<std::size_t>(done));
      gbump(static_cast<int>(done));
    }
    while (done < n) {
      const auto chunk = static_cast<std::size_t>(std::min<std::streamsize>(n - done, 16 << 20));
      if (chunk < buf_.size()) {  // small read: through the buffer
        if (traits_type::eq_int_type(underflow(), traits_type::eof())) break;
        const std::streamsize take = std::min<std::streamsize>(n - done, egptr() - gptr());
        std::memcpy(s + done, gptr(), static_cast<std::size_t>(take));
        gbump(static_cast<int>(take));
        done += take;
        continue;
      }
      const std::size_t got = std::fread(s + done, 1, chunk, f_);
      done += static_cast<std::streamsize>(got);
      consumed(got);
      if (got < chunk) break;
    }
    return done;
  }

 private:
  void consumed(std::size_t n) {
    read_ += static_cast<double>(n);
    if (progress_) progress_(std::min(1.0, read_ / total_), "reading");
  }

  std::FILE* f_;
  double total_;
  double read_ = 0;
  const ProgressFn& progress_;
  std::vector<char> buf_;
};

}  // namespace

Trace read_trace_with_progress(const std::string& path, const ProgressFn& progress) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  std::FILE* f = ec ? nullptr : std::fopen(path.c_str(), "rb");
  if (!f) throw InputError(path, "", "cannot open the trace file", "a readable .ctt or .json trace");
  struct Closer {
    std::FILE* f;
    ~Closer() { std::fclose(f); }
  } closer{f};
  ProgressReadBuf buf(f, static_cast<double>(size), progress);
  std::istream in(&buf);
  if (std::filesystem::path(path).extension() == ".json") return read_chrome_trace(in, path);
  return read_trace_binary(in, path);
}

struct TraceLoader::State {
  std::thread thread;
  std::mutex mutex;
  std::string stage = "starting";
  std::unique_ptr<TimelineModel> model;
  std::exception_ptr error;
};

TraceLoader::TraceLoader(std::string path) : path_(std::move(path)), state_(std::make_unique<State>()) {
  state_->thread = std::thread([this] {
    auto report = [this](double base, double span) {
      return [this, base, span](double f, const char* stage) {
        progress_.store(base + span * f, std::memory_order_relaxed);
        std::lock_guard lock(state_->mutex);
        if (state_->stage != stage) state_->stage = stage;
      };
    };
    try {
      Trace t = read_trace_with_progress(path_, report(0, 0.7));
      auto model = std::make_unique<TimelineModel>(std::move(t), report(0.7, 0.3));
      std::lock_guard lock(state_->mutex);
      state_->model = std::move(model);
    } catch (...) {
      std::lock_guard lock(state_->mutex);
      state_->error = std::current_exception();
    }
    progress_.store(1, std::memory_order_relaxed);
    done_.store(true, std::memory_order_release);
  });
}

TraceLoader::~TraceLoader() {
  if (state_->thread.joinable()) state_->thread.join();
}

void TraceLoader::wait() {
  if (state_->thread.joinable()) state_->thread.join();
}

std::string TraceLoader::stage() const {
  std::lock_guard lock(state_->mutex);
  return state_->stage;
}

std::unique_ptr<TimelineModel> TraceLoader::take() {
  wait();
  std::lock_guard lock(state_->mutex);
  if (state_->error) std::rethrow_exception(state_->error);
  return std::move(state_->model);
}

}  // namespace ctwin::viz
