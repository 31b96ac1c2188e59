// Function qualifiers shared by host and kernel code on both backends. GPM_HOST_DEVICE marks a
// function callable from host and device code; in .cpp files and in the host backend it is empty.
#pragma once

#if defined(__CUDACC__)
#define GPM_HOST_DEVICE __host__ __device__
#define GPM_DEVICE __device__
#else
#define GPM_HOST_DEVICE
#define GPM_DEVICE
#endif

// True inside device code compiled for a GPU (nvcc's device pass), false everywhere else,
// including kernels running on the host emulator.
#if defined(__CUDA_ARCH__)
#define GPM_IN_GPU_CODE 1
#else
#define GPM_IN_GPU_CODE 0
#endif

// Before a loop: keep it rolled in GPU code (on the host the compiler decides). nvcc unrolls a
// loop whose trip count a template constant bounds (a write set of up to MaxWrites words) at
// every place it is inlined: gpm::tx's kernels held 122 KB of code that way and their warps
// stalled on instruction fetch. Measure each use: an unrolled loop over a thread's small arrays
// also runs faster, so only loops off the hot path gain (docs/workloads/tx.md).
// GPM_UNROLL: unroll it fully in GPU code (a loop over a thread's registers); g++ has no such
// pragma and warns about nvcc's.
#if defined(__CUDA_ARCH__)
#define GPM_UNROLL_1 _Pragma("unroll 1")
#define GPM_UNROLL _Pragma("unroll")
#else
#define GPM_UNROLL_1
#define GPM_UNROLL
#endif
