// Host SIMT emulator: the subset of the CUDA runtime API that gpmkit uses, with CUDA's names,
// numeric codes and semantics (asynchronous in-order streams, legacy default stream, events,
// sticky kernel faults), so host code is identical on both backends.
// Included through <gpm/platform/runtime.hpp> in host builds only; never alongside CUDA headers.
#pragma once

#include <cstddef>

#include <gpm/platform/detail/emu/vector_types.hpp>

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidSymbol = 13,
  cudaErrorInvalidHostPointer = 16,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorAssert = 710,
  cudaErrorHostMemoryAlreadyRegistered = 712,
  cudaErrorHostMemoryNotRegistered = 713,
  cudaErrorIllegalInstruction = 715,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotPermitted = 800,
  cudaErrorNotSupported = 801,
  cudaErrorUnknown = 999,
};
using cudaError_t = cudaError;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

// What cudaFuncGetAttributes reports of a kernel (the fields gpmkit reads). The emulator's
// kernels are host functions: no registers, no static shared memory, any block CUDA allows.
struct cudaFuncAttributes {
  int numRegs;
  int maxThreadsPerBlock;
  std::size_t sharedSizeBytes;
  int maxDynamicSharedSizeBytes;
};

enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrClockRate = 13,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrCanMapHostMemory = 19,
  cudaDevAttrPciBusId = 33,
  cudaDevAttrPciDeviceId = 34,
  cudaDevAttrL2CacheSize = 38,
  cudaDevAttrUnifiedAddressing = 41,
  cudaDevAttrPciDomainId = 50,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrHostNativeAtomicSupported = 86,
  cudaDevAttrPageableMemoryAccess = 88,
  cudaDevAttrConcurrentManagedAccess = 89,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
  cudaDevAttrHostRegisterSupported = 99,
};

#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04
#define cudaHostRegisterDefault 0x00
#define cudaHostRegisterPortable 0x01
#define cudaHostRegisterMapped 0x02
#define cudaHostRegisterIoMemory 0x04
#define cudaHostRegisterReadOnly 0x08
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaMemAttachGlobal 0x01

struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
using cudaHostFn_t = void (*)(void* user_data);

// The fields gpmkit and its tests read; same names and types as CUDA 13's cudaDeviceProp.
struct cudaDeviceProp {
  char name[256];
  std::size_t totalGlobalMem;
  std::size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int major;
  int minor;
  int multiProcessorCount;
  int integrated;
  int canMapHostMemory;
  int concurrentKernels;
  int pciBusID;
  int pciDeviceID;
  int pciDomainID;
  int asyncEngineCount;
  int unifiedAddressing;
  int memoryBusWidth;
  int l2CacheSize;
  int maxThreadsPerMultiProcessor;
  int managedMemory;
  int hostNativeAtomicSupported;
  int pageableMemoryAccess;
  int concurrentManagedAccess;
  std::size_t sharedMemPerBlockOptin;
  int hostRegisterSupported;
};

extern "C" {
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorString(cudaError_t error);
const char* cudaGetErrorName(cudaError_t error);

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaDeviceReset();
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes);

cudaError_t cudaMalloc(void** ptr, std::size_t size);
cudaError_t cudaMallocManaged(void** ptr, std::size_t size, unsigned int flags);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocHost(void** ptr, std::size_t size);
cudaError_t cudaHostAlloc(void** ptr, std::size_t size, unsigned int flags);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaHostRegister(void* ptr, std::size_t size, unsigned int flags);
cudaError_t cudaHostUnregister(void* ptr);
cudaError_t cudaHostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned int flags);

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t count, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaMemset(void* ptr, int value, std::size_t count);
cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t count, cudaStream_t stream);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value);
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void* func);
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* num_blocks, const void* func,
                                                          int block_size,
                                                          std::size_t dynamic_shared_bytes);
}

// C++ conveniences that CUDA's cuda_runtime.h also offers.
template <class T>
cudaError_t cudaMalloc(T** ptr, std::size_t size) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), size);
}
template <class T>
cudaError_t cudaMallocManaged(T** ptr, std::size_t size, unsigned int flags = cudaMemAttachGlobal) {
  return cudaMallocManaged(reinterpret_cast<void**>(ptr), size, flags);
}
template <class T>
cudaError_t cudaMallocHost(T** ptr, std::size_t size) {
  return cudaMallocHost(reinterpret_cast<void**>(ptr), size);
}
template <class T>
cudaError_t cudaHostAlloc(T** ptr, std::size_t size, unsigned int flags) {
  return cudaHostAlloc(reinterpret_cast<void**>(ptr), size, flags);
}
template <class T>
cudaError_t cudaHostGetDevicePointer(T** device_ptr, void* host_ptr, unsigned int flags) {
  return cudaHostGetDevicePointer(reinterpret_cast<void**>(device_ptr), host_ptr, flags);
}
template <class R, class... P>
cudaError_t cudaFuncSetAttribute(R (*func)(P...), cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(func), attr, value);
}

// __device__ / __constant__ variables are ordinary globals on the host backend.
template <class T>
cudaError_t cudaMemcpyToSymbol(T& symbol, const void* src, std::size_t count,
                               std::size_t offset = 0,
                               cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
  if (offset + count > sizeof(T)) return cudaErrorInvalidValue;
  return cudaMemcpy(reinterpret_cast<char*>(&symbol) + offset, src, count, kind);
}
template <class T>
cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, std::size_t count,
                                 std::size_t offset = 0,
                                 cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
  if (offset + count > sizeof(T)) return cudaErrorInvalidValue;
  return cudaMemcpy(dst, reinterpret_cast<const char*>(&symbol) + offset, count, kind);
}
