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
// Whether a launcher started this process as one of several (launch_env, cuda_plan.hpp: Open
// MPI's, Slurm's or PMI's variables), the rule ctwin-realrun uses too. A plain run is one process.
bool launched_by_mpi();

// This process in an MPI job: its world rank and size, and the driver's ProcessGroup (barriers
// and gathers over MPI_COMM_WORLD).
struct MpiWorld {
  int rank = 0;
  int size = 1;
  ProcessGroup group;
};
// Initialises MPI (once). With `thread_multiple` (the CPU backend: a rank's streams are threads,
// each may run a collective) throws std::runtime_error when the library cannot give
// MPI_THREAD_MULTIPLE; without (ctwin-realrun: NCCL does the GPUs' communication) asks for none.
MpiWorld mpi_init_world(bool thread_multiple = true);
// The MPI library's own version line ("Open MPI v4.1.4, ..."), for the measurements' host.
std::string mpi_library_version();
// MPI_Finalize if initialised and not finalised.
void mpi_finalize();
// Ends every process of the job with `code` if MPI is running (a failed rank leaves the others
// waiting in a collective); else returns.
void mpi_abort_if_running(int code);

// A communicator over MPI processes, one member per process (world rank = global rank).
// Created by its members only (MPI_Comm_create_group). A call waits at most `timeout_s` for
// its messages; then it throws CollectiveTimeout naming the members it was waiting for, and the
// communicator is aborted.
std::shared_ptr<CpuComm> make_mpi_comm(std::vector<int> ranks, std::string label, double timeout_s);

// The CPU device of this process's rank (`rank`, its world rank): kernels on its streams' threads
// as make_cpu_devices', collectives over make_mpi_comm communicators.
std::unique_ptr<Device> make_cpu_mpi_device(const BackendOptions& opt, int rank);

}  // namespace ctwin::realrun
