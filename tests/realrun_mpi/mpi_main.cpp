// main() of test_realrun_mpi: its cases need three MPI processes. Run directly (by CTest or
// scripts/mutate.sh) it starts itself again under mpirun -np 3 with the same arguments and
// returns that job's status; under mpirun each process runs the cases as one member and the job
// fails if any process failed. Listing the cases (CTest's registration) runs no MPI.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <mpi.h>

#include "realrun/cpu_mpi.hpp"

namespace {

bool only_lists(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    for (const char* p : {"--list", "-ltc", "-lts", "-lr", "--count", "-c", "--help", "-h", "-?", "--version", "-v"}) {
      if (a.rfind(p, 0) == 0) return true;
    }
  }
  return false;
}

// mpirun -np 3 this-program args..., as root where CI runs (Open MPI refuses root otherwise).
int relaunch(int argc, char** argv) {
  std::vector<std::string> cmd{CTWIN_MPIEXEC, "-n", "3", "--oversubscribe"};
  if (geteuid() == 0) cmd.emplace_back("--allow-run-as-root");
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  cmd.emplace_back(n > 0 ? std::string(self, static_cast<std::size_t>(n)) : std::string(argv[0]));
  for (int i = 1; i < argc; ++i) cmd.emplace_back(argv[i]);
  std::vector<char*> args;
  for (auto& c : cmd) args.push_back(c.data());
  args.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    // mpirun forwards stdin to rank 0: give it nothing, not the caller's (a script's loop reading
    // its own list from stdin lost the rest of it to this job).
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    execv(args[0], args.data());
    std::perror(CTWIN_MPIEXEC);
    std::_Exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return 2;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (only_lists(argc, argv)) {
    doctest::Context ctx(argc, argv);
    return ctx.run();
  }
  if (!ctwin::realrun::launched_by_mpi()) return relaunch(argc, argv);
  const ctwin::realrun::MpiWorld w = ctwin::realrun::mpi_init_world();
  if (w.size != 3) {
    std::fprintf(stderr, "test_realrun_mpi: needs 3 MPI processes, has %d\n", w.size);
    ctwin::realrun::mpi_finalize();
    return 2;
  }
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  ctwin::realrun::mpi_finalize();
  return worst;
}
