// NCCL's cost tables as the collective model reads them: latency per algorithm and protocol,
// the extra per-hop latency of each link type over its LL figure, and the bandwidth derating
// of each protocol and algorithm. The defaults are NCCL's own (src/graph/tuning.cc, 2.23 and
// later); a calibration profile replaces any of them (ClusterSpec::nccl).
#pragma once

#include <array>

#include "topology/catalog.hpp"

namespace ctwin {

struct NcclModel {
  // Per protocol, indexed LL, LL128, Simple; microseconds.
  using PerProtocol = std::array<double, 3>;
  // NCCL's own figures (topology/src/nccl_model.cpp: out of line, so a change to one rebuilds
  // one file, not everything that includes a cluster).
  NcclModel();
  // tuning.cc baseLat: fixed cost of one call per algorithm and protocol (2.19-2.22 had Tree
  // Simple at base 0 and 28 us per hop).
  PerProtocol base_ring_us;
  PerProtocol base_tree_us;
  // tuning.cc hwLat, less the link's own LL hop (ClusterSpec::intra_latency_us,
  // inter_latency_us), which the cluster carries.
  PerProtocol ring_nvlink_extra_us;  // NVLink ring hop: 0.6 / 1.9 / 3.4
  PerProtocol ring_pcie_extra_us;    // PCI ring hop: 1.0 / 2.5 / 5.7
  PerProtocol ring_net_extra_us;     // network ring hop: 2.7 / 4.0 / 14
  PerProtocol tree_nvlink_extra_us;  // NVLink tree hop: 0.6 / 1.25 / 4.0
  PerProtocol tree_net_extra_us;     // network tree hop: 5.0 / 8.5 / 14
  double nvls_latency_us;            // NVLS on NVLink (hwLat NVLS, Simple)
  // NVLSTree (tuning.cc): NVLS inside the node once (hwLat NVLINK NVLSTree, Simple), and a
  // network hop up and down each level of the trees (hwLat NET NVLSTree, Simple, 20.9 us, less
  // the link's own LL hop that the cluster carries).
  double nvls_tree_latency_us;
  double nvls_tree_net_extra_us;
  double collnet_latency_us;  // CollNet Direct: NVLink + network hop (hwLat)
  // Multi-node rings: a hop costs at least the host's net overhead (getNetOverhead), this many
  // times over with Simple (tuning.cc: 3 x netOverhead for Simple).
  double simple_net_overhead_factor;
  // Protocol bandwidth efficiencies (tuning.cc): LL moves 8 of every 16 bytes and pays a flag
  // per line: 1/4 of Simple's rate on reductions and across nodes, 1/3 otherwise; LL128 120 of
  // 128 bytes, derated to 0.92.
  double ring_ll_efficiency;
  double ring_ll_copy_efficiency;  // LL on a single-node all-gather, broadcast, ...
  double ring_ll128_efficiency;
  // Tree: NCCL's tree bandwidth derating (busBw x .92), times the protocol's share: LL 1/3.8,
  // LL128 120/128 across nodes and 7/9 inside one. (The tuner's size-dependent
  // treeCorrectionFactor is tree_correction, below.)
  double tree_efficiency;
  double tree_ll_efficiency;
  double tree_ll128_efficiency;
  double tree_ll128_intra_efficiency;

  // How a call's bytes move (src/enqueue.cc, src/include/device.h, src/init.cc). Per protocol,
  // indexed LL, LL128, Simple.
  // Channels a communicator has (its ring graph's channels, duplicated): 24 on a DGX A100
  // (nccl-tests #100's log, "Channel 23/24"), and taken the same on NVLink 4 and 5 nodes.
  int channels;
  // enqueue.cc's channel tuning for rings and trees: while the call's bytes are fewer than
  // channels x threads x threshold, drop a channel. Threads per channel (NCCL_LL_MAX_NTHREADS
  // 512, NCCL_LL128_MAX_NTHREADS 640, NCCL_SIMPLE_MAX_NTHREADS 512) and bytes per thread
  // (NCCL_LL_THREAD_THRESHOLD 8, times the ranks for rings; LL128 8; Simple 64).
  PerProtocol max_threads;
  PerProtocol thread_threshold_bytes;
  // The largest piece one ring step moves per channel before it signals the next rank (a chunk):
  // a buffer slot (buffer / NCCL_STEPS = 8) times the chunk steps, in payload bytes. LL: a 64 KiB
  // slot of 16-byte lines, half of it data, 32 KiB; LL128: 614,400-byte slot at 120 of 128 bytes
  // data, 576,000; Simple: 4 MiB / 8 x 4 chunk steps (ALLREDUCE_CHUNKSTEPS), 2 MiB.
  PerProtocol chunk_bytes;
  // Slices per chunk, each a separately flagged transfer whose hop latency the next rank waits
  // for: Simple's ring moves a chunk as CHUNKSTEPS / SLICESTEPS = 2 slices, LL and LL128 as one.
  PerProtocol slices_per_chunk;
  // Per-architecture ceilings (tuning.cc llMaxBws, perChMaxRingLL128Bws, the one-node column),
  // indexed Volta, Ampere, Hopper, Blackwell: LL's whole-ring bus bandwidth, and LL128's per
  // channel, GB/s. (perChMaxTreeBws is left out: times 24 channels it sits above every preset's
  // NICs, so it never binds a tree.)
  std::array<double, 4> ll_max_gbps;
  // LL's bus bandwidth ceiling across nodes (llMaxBws' other two columns, 2 nodes and more than
  // 2): NCCL picks the row by the host CPU, not the GPU (its Volta row for Intel and every non-AMD
  // host, 39 and 20.4 GB/s; its Ampere row for AMD, 22.5 and 19.0). Rings and trees both.
  std::array<std::array<double, 2>, 2> ll_max_net_gbps;
  // A tree's LL128 bus bandwidth per channel across nodes (perChMaxTreeLL128Bws, 2 nodes and
  // more), indexed Volta, Ampere, Hopper, Blackwell: 20 before Hopper, 36.7 and 29.0 on Hopper,
  // twice that on Blackwell. The model's tree runs one channel per NIC.
  std::array<std::array<double, 2>, 4> tree_ll128_net_per_channel_gbps;
  std::array<double, 4> ring_ll128_per_channel_gbps;
  // The tuner's own view of trees at mid sizes (tuning.cc treeCorrectionFactor, the same from 2.19
  // to 2.29): when it compares algorithms for an all_reduce of B bytes, a tree's bandwidth is
  // scaled by the entry at floor(log2(B / 64)), the first 23 (up to 256 MiB; none from 512 MiB);
  // from 2.29, NVLSTree's too on Blackwell x86 hosts, the first 24. Per protocol, LL, LL128,
  // Simple. NCCL's comment says why it is there ("trees are not perfectly sticking to the model
  // for medium sizes"): a tree runs that far below its bandwidth, so the tree's time takes it too
  // (docs/validation-network.md, "The tree at mid sizes").
  std::array<std::array<double, 24>, 3> tree_correction;
  // The tuner's "plateau effect of ring": a multi-node Simple ring all_reduce of at least 64 bytes
  // per channel and rank is predicted this many times its latency (1.9 before Ampere, 1.4 after).
  std::array<double, 4> ring_plateau_latency_factor;

  // Point-to-point (all_to_all) inside one NVLink node: the step a channel moves per peer before
  // it signals (init.cc NCCL_P2P_NVL_CHUNKSIZE, 512 KiB); enqueue.cc splits a peer's share into
  // parts of 1/8 to 32 of these.
  double p2p_nvl_chunk_bytes;

  // NVLS all-reduce inside one node (src/transport/nvls.cc, src/enqueue.cc calcCollChunking,
  // src/device/all_reduce.h). Channels it runs on, indexed Volta, Ampere, Hopper, Blackwell:
  // NVLS_NCHANNELS_SM90 16, NVLS_NCHANNELS_SM100_NVL 24 (none before Hopper).
  std::array<int, 4> nvls_channels;
  // Its chunk (NCCL_NVLS_CHUNKSIZE, 128 KiB): each channel's loop moves one chunk per rank;
  // calcCollChunking halves it to 64 KiB below 64 loops of the full chunk, 32 KiB below 8 of
  // those, 16 KiB below 2.
  double nvls_chunk_bytes;
  // The kernel's warp groups on one node (all_reduce.h) form a pipeline: scatter each rank's
  // chunk into its head's buffer, reduce it there (multimem load-reduce and multicast store),
  // gather the sums out, scatter and gather walking the heads in turn. Before it streams, the
  // first loop's data fills it: this many loops' worth a rank. Fitted (docs/validation-network.md,
  // "NVLS's ramp"): two loops on 8 ranks (the B200 and 8-rank H100 curves), one on 4 (the 4-rank
  // H100 curve).
  double nvls_fill_loops_per_rank;
  // Each loop waits on flagged hand-offs with every head (scatter and gather walk the heads in
  // turn): this many NVLink Simple hops per rank a loop. Fitted (docs/validation-network.md,
  // "NVLS's ramp"): HGX B200 nccl-tests and 8- and 4-rank H100 runs.
  double nvls_handoff_hops_per_rank;

  // One host thread driving several GPUs (nccl-tests -g G, a single-process job): NCCL launches
  // the group's kernels one GPU after another, each costing the thread group_launch_us_per_gpu
  // plus group_launch_us_per_channel for each channel the call runs on (enqueue.cc adds a work
  // batch per channel to the plan and copies them all with the kernel's arguments), so an
  // iteration takes at least G times that however small the message. Both fitted together on
  // the rows of five -g 8 curves (8 A100 with NCCL 2.19, 8 H100 with NCCL 2.26) that the
  // launches bound (docs/validation-network.md, "One thread, eight GPUs").
  double group_launch_us_per_gpu;
  double group_launch_us_per_channel;
};

// NCCL's architecture index for its per-architecture tables (tuning.cc compCapIndex): Volta 0,
// Ampere 1 (and Ada), Hopper 2, Blackwell 3, from the NVLink generation, else the PCIe generation.
int nccl_arch_index(const GpuSpec& gpu);

}  // namespace ctwin
