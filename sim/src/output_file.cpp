#include "sim/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <vector>

#include "sim/error.hpp"

namespace ctwin {

namespace {

std::filesystem::path directory_of(const std::filesystem::path& path) {
  const auto dir = path.parent_path();
  return dir.empty() ? std::filesystem::path(".") : dir;
}

bool fsync_path(const std::filesystem::path& p, int flags) {
  const int fd = ::open(p.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0 || errno == EINVAL;  // some file systems cannot sync directories
  ::close(fd);
  return ok;
}

// The temporary file being written, for the signal handler: Ctrl-C (or a TERM from a batch
// system) while writing removes it, so an interrupted run leaves neither half a file nor debris.
char g_temp_path[4096];
volatile std::sig_atomic_t g_temp_armed = 0;

extern "C" void remove_temp_and_die(int sig) {
  if (g_temp_armed != 0) ::unlink(g_temp_path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Arms the handler for one write; restores the previous handlers when the write ends.
class TempGuard {
 public:
  explicit TempGuard(const std::filesystem::path& tmp) {
    const std::string s = tmp.string();
    if (s.size() >= sizeof(g_temp_path)) return;
    std::memcpy(g_temp_path, s.c_str(), s.size() + 1);
    g_temp_armed = 1;
    old_int_ = std::signal(SIGINT, remove_temp_and_die);
    old_term_ = std::signal(SIGTERM, remove_temp_and_die);
  }
  ~TempGuard() {
    if (g_temp_armed == 0) return;
    std::signal(SIGINT, old_int_);
    std::signal(SIGTERM, old_term_);
    g_temp_armed = 0;
  }
  TempGuard(const TempGuard&) = delete;
  TempGuard& operator=(const TempGuard&) = delete;

 private:
  void (*old_int_)(int) = SIG_DFL;
  void (*old_term_)(int) = SIG_DFL;
};

}  // namespace

void check_output_path(const std::filesystem::path& path, bool replace, const std::string& flag) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      throw InputError(path.string(), flag, "is a symbolic link; outputs never follow links",
                       "a plain file name (remove the link, or write to its target)");
    }
    if (!S_ISREG(st.st_mode)) throw InputError(path.string(), flag, "exists and is not a regular file", "a file name");
    if (!replace)
      throw InputError(path.string(), flag, "the file exists", "a new file name, or --force to overwrite it");
  }
  std::error_code ec;
  const auto dir = directory_of(path);
  if (!std::filesystem::is_directory(dir, ec)) {
    throw InputError(path.string(), flag, "the directory '" + dir.string() + "' does not exist",
                     "an existing directory");
  }
}

void write_file_atomically(const std::filesystem::path& path, bool replace, const std::string& flag,
                           const std::function<void(std::ostream&)>& write) {
  check_output_path(path, replace, flag);
  // A hidden name beside the target: ".NAME.tmpXXXXXX".
  std::string leaf = ".";
  leaf += path.filename().string();
  leaf += ".tmpXXXXXX";
  const std::string pattern = (directory_of(path) / leaf).string();
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) {
    throw OutputError(path.string() + ": cannot create a temporary file beside it: " + std::strerror(errno));
  }
  ::close(fd);
  const std::filesystem::path tmp(name.data());
  const TempGuard guard(tmp);
  const auto fail = [&](const std::string& what) {
    const int err = errno;
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw OutputError(path.string() + ": " + what + (err != 0 ? std::string(": ") + std::strerror(err) : ""));
  };
  errno = 0;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot write");
    try {
      write(out);
    } catch (...) {
      out.close();
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw;
    }
    out.flush();
    if (!out) fail("write failed");
  }
  if (!fsync_path(tmp, O_RDONLY)) fail("cannot flush to disk");
  // Files from mkstemp are 0600; an output gets the usual permissions under the umask.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::chmod(tmp.c_str(), 0666 & ~mask);
  if (replace) {
    if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename the finished file into place");
  } else {
    // link() fails if the name was taken since check_output_path: the newcomer is kept.
    // File systems without hard links (EPERM, ENOTSUP) fall back to a rename after a last check.
    const bool linked = ::link(tmp.c_str(), path.c_str()) == 0;
    const bool no_links = !linked && (errno == EPERM || errno == ENOTSUP || errno == EXDEV);
    if (no_links && !std::filesystem::exists(std::filesystem::symlink_status(path))) {
      if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename the finished file into place");
    } else if (!linked) {
      if (errno == EEXIST || no_links) {
        std::error_code ec;
        std::filesystem::remove(tmp, ec);
        throw InputError(path.string(), flag, "the file appeared while ctwin ran; it was left as it is",
                         "a new file name, or --force to overwrite it");
      }
      fail("cannot move the finished file into place");
    } else {
      ::unlink(tmp.c_str());
    }
  }
  fsync_path(directory_of(path), O_RDONLY | O_DIRECTORY);
}

}  // namespace ctwin
