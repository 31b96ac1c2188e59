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
