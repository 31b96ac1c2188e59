// The backend-neutral runtime helpers (see runtime.hpp and launch.cuh).
#include <gpm/platform/runtime.hpp>

#include <cstdio>
#include <fstream>
#include <string>

namespace gpm {

namespace {
// Reads the current PCIe link of the device at domain:bus:device.0 from sysfs.
void read_pcie_link(device_info& info) {
  char bdf[32];
  std::snprintf(bdf, sizeof bdf, "%04x:%02x:%02x.0", info.pci_domain, info.pci_bus,
                info.pci_device);
  const std::string dir = std::string("/sys/bus/pci/devices/") + bdf + "/";
  std::ifstream speed(dir + "current_link_speed"), width(dir + "current_link_width");
  double gts = 0;
  if (speed >> gts) {
    // 2.5, 5, 8, 16, 32, 64 GT/s are PCIe generations 1 to 6.
    const double rates[] = {2.5, 5.0, 8.0, 16.0, 32.0, 64.0};
    for (int g = 0; g < 6; ++g) {
      if (gts > rates[g] * 0.9 && gts < rates[g] * 1.1) info.pcie_generation = g + 1;
    }
  }
  width >> info.pcie_width;
}

}  // namespace

void check_cuda(cudaError_t status, std::string_view what, std::source_location where) {
  if (status == cudaSuccess) return;
  // The exception reports the error: the runtime's last error is cleared, so that a later,
  // unrelated launch check does not report it again (a failed cudaMalloc, which is not sticky,
  // made the next kernel launch fail with "out of memory" on an H200). Sticky errors stay.
  (void)cudaGetLastError();
  throw_error(errc::cuda, std::string(what) + " failed at " + detail::format_site(where) + ": " +
                              cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

namespace detail {
std::string format_dims(dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

std::string format_site(const std::source_location& where) {
  return std::string(where.file_name()) + ":" + std::to_string(where.line());
}

void throw_launch_error(cudaError_t status, const void* kernel, dim3 grid, dim3 block,
                        std::size_t shared_bytes, const std::source_location& site) {
  std::string why;
  // A block larger than the kernel allows fails with "too many resources requested" (its
  // registers) or an invalid value (past 1024 threads, or its dynamic shared memory): say which.
  cudaFuncAttributes a{};
  if (kernel != nullptr && cudaFuncGetAttributes(&a, kernel) == cudaSuccess) {
    const unsigned long long threads = 1ull * block.x * block.y * block.z;
    if (threads > static_cast<unsigned long long>(a.maxThreadsPerBlock)) {
      why = ": this kernel takes at most " + std::to_string(a.maxThreadsPerBlock) +
            " threads a block (it uses " + std::to_string(a.numRegs) +
            " registers a thread): launch fewer threads a block";
    } else if (shared_bytes > static_cast<std::size_t>(a.maxDynamicSharedSizeBytes)) {
      why = ": this kernel takes at most " + std::to_string(a.maxDynamicSharedSizeBytes) +
            " bytes of dynamic shared memory (cudaFuncAttributeMaxDynamicSharedMemorySize)";
    } else if (status == cudaErrorLaunchOutOfResources) {
      why = ": this kernel uses " + std::to_string(a.numRegs) + " registers a thread and " +
            std::to_string(a.sharedSizeBytes) + " bytes of static shared memory";
    }
  }
  (void)cudaGetLastError();  // a failed query's error is not what is reported
  throw_error(errc::cuda,
              "kernel launch at " + format_site(site) + " with grid " + format_dims(grid) +
                  ", block " + format_dims(block) + ", " + std::to_string(shared_bytes) +
                  " bytes of dynamic shared memory failed: " + cudaGetErrorName(status) + " (" +
                  cudaGetErrorString(status) + ")" + why);
}

unsigned blocks_per_multiprocessor(const void* kernel, unsigned threads, std::size_t shared_bytes) {
  int per_multiprocessor = 0;
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel,
                                                           static_cast<int>(threads), shared_bytes),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  return static_cast<unsigned>(per_multiprocessor);
}

unsigned resident_blocks(const void* kernel, unsigned threads, std::size_t shared_bytes) {
  int dev = 0;
  int multiprocessors = 0;
  int per_multiprocessor = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, dev),
             "cudaDeviceGetAttribute(multiprocessors)");
  const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_multiprocessor, kernel, static_cast<int>(threads), shared_bytes);
  if (e != cudaSuccess) cudaGetLastError();  // a shape that cannot run: reported below
  if (e != cudaSuccess || per_multiprocessor <= 0) {
    throw_error(errc::invalid_argument,
                "gpm::resident_blocks: no block of " + std::to_string(threads) + " threads and " +
                    std::to_string(shared_bytes) +
                    " bytes of dynamic shared memory of this kernel fits a multiprocessor" +
                    (e != cudaSuccess ? std::string(" (") + cudaGetErrorName(e) + ")" : ""));
  }
  return static_cast<unsigned>(per_multiprocessor) * static_cast<unsigned>(multiprocessors);
}
}  // namespace detail

device_info query_device() {
  device_info info;
  info.emulated = GPM_BACKEND_HOST != 0;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();  // do not leave the failed probe as this thread's last error
    info.absent_reason = e != cudaSuccess
                             ? std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e)
                             : "the CUDA runtime reports no device";
    return info;
  }
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp p{};
  check_cuda(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  info.present = true;
  info.name = p.name;
  info.compute_major = p.major;
  info.compute_minor = p.minor;
  info.multiprocessors = p.multiProcessorCount;
  info.global_memory = p.totalGlobalMem;
  info.pci_domain = p.pciDomainID;
  info.pci_bus = p.pciBusID;
  info.pci_device = p.pciDeviceID;
  info.can_map_host_memory = p.canMapHostMemory != 0;
  info.pageable_memory_access = p.pageableMemoryAccess != 0;
  info.host_native_atomics = p.hostNativeAtomicSupported != 0;
  info.concurrent_managed_access = p.concurrentManagedAccess != 0;
  if (!info.emulated) read_pcie_link(info);
  return info;
}

stream::stream(bool non_blocking) {
  check_cuda(
      cudaStreamCreateWithFlags(&handle_, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault),
      "cudaStreamCreateWithFlags");
}

stream::~stream() {
  if (handle_ != nullptr) cudaStreamDestroy(handle_);
}

stream& stream::operator=(stream&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cudaStreamDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void stream::synchronize() const {
  check_cuda(cudaStreamSynchronize(handle_), "cudaStreamSynchronize");
}

event::event() { check_cuda(cudaEventCreate(&handle_), "cudaEventCreate"); }

event::~event() {
  if (handle_ != nullptr) cudaEventDestroy(handle_);
}

event& event::operator=(event&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cudaEventDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void event::record(cudaStream_t s) { check_cuda(cudaEventRecord(handle_, s), "cudaEventRecord"); }

void event::synchronize() const {
  check_cuda(cudaEventSynchronize(handle_), "cudaEventSynchronize");
}

bool event::done() const {
  const cudaError_t e = cudaEventQuery(handle_);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is no error: it must not stay this thread's last one
    return false;
  }
  check_cuda(e, "cudaEventQuery");
  return true;
}

float event::elapsed_ms_since(const event& start) const {
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start.handle_, handle_), "cudaEventElapsedTime");
  return ms;
}

}  // namespace gpm
