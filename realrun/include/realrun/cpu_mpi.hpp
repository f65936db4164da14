// realrun's CPU backend across processes: one rank per MPI process (mpirun, srun), the driver's
// barriers and statistics over MPI_COMM_WORLD, and communicators whose collectives run the same
// ring and direct algorithms as the thread backend's (cpu_collectives.hpp), over MPI
// point-to-point messages. Built where Open MPI is found (scripts/install-deps.sh); elsewhere
// cpu_mpi_built() is false and the rest throws.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "realrun/cpu_collectives.hpp"
#include "realrun/device.hpp"
#include "realrun/driver.hpp"

namespace ctwin::realrun {

// Whether this build has MPI.
bool cpu_mpi_built();
// Whether this process was started by an MPI launcher (Open MPI's mpirun, or a PMI/PMIx one
// such as srun): its environment says so. A plain run is one process of threads.
bool launched_by_mpi();

// This process in an MPI job: MPI initialised with MPI_THREAD_MULTIPLE (a rank's streams are
// threads, each may run a collective), its world rank and size, and the driver's ProcessGroup.
struct MpiWorld {
  int rank = 0;
  int size = 1;
  ProcessGroup group;
};
// Initialises MPI (once). Throws std::runtime_error when the library cannot give
// MPI_THREAD_MULTIPLE.
MpiWorld mpi_init_world();
// The MPI library's own version line ("Open MPI v4.1.4, ..."), for the measurements' host.
std::string mpi_library_version();
// MPI_Finalize if initialised and not finalised.
void mpi_finalize();
// Ends every process of the job (a timeout leaves the others waiting in a collective).
[[noreturn]] void mpi_abort(int code);

// A communicator over MPI processes, one member per process (world rank = global rank).
// Created by its members only (MPI_Comm_create_group). A call waits at most `timeout_s` for
// its messages; then it throws CollectiveTimeout naming the members it was waiting for, and the
// communicator is aborted.
std::shared_ptr<CpuComm> make_mpi_comm(std::vector<int> ranks, std::string label, double timeout_s);

// The CPU device of this process's rank (`rank`, its world rank): kernels on its streams' threads
// as make_cpu_devices', collectives over make_mpi_comm communicators.
std::unique_ptr<Device> make_cpu_mpi_device(const BackendOptions& opt, int rank);

}  // namespace ctwin::realrun
