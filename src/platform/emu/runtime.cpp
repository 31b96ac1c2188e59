// Host SIMT emulator: the CUDA runtime API subset (see runtime_api.hpp). Each stream is an OS
// thread that executes its operations in order, asynchronously to the caller; the legacy default
// stream orders itself with every blocking stream, as in CUDA. Memory is host memory; host
// registration follows the rule Linux applies to the GPU driver's long-term pins.
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gpm/platform/launch.cuh>

#include "device.hpp"

namespace {

using gpm::emu::detail::device;
using clock_type = std::chrono::steady_clock;

struct completion {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  clock_type::time_point when;

  void signal() {
    std::lock_guard lock(m);
    when = clock_type::now();
    done = true;
    cv.notify_all();
  }
  void wait() {
    std::unique_lock lock(m);
    cv.wait(lock, [this] { return done; });
  }
  bool is_done() {
    std::lock_guard lock(m);
    return done;
  }
};
using token = std::shared_ptr<completion>;

struct operation {
  std::function<void()> work;
  std::vector<token> deps;
  token done;
};

}  // namespace

struct CUstream_st {
  unsigned flags = 0;
  std::mutex m;
  std::condition_variable cv;
  std::deque<operation> queue;
  bool stopping = false;
  token last;  // completion of the newest operation; guarded by the runtime's mutex
  std::thread thread;

  bool blocking() const { return (flags & cudaStreamNonBlocking) == 0; }

  void loop() {
    for (;;) {
      operation op;
      {
        std::unique_lock lock(m);
        cv.wait(lock, [this] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        op = std::move(queue.front());
        queue.pop_front();
      }
      for (auto& d : op.deps) d->wait();
      // After a kernel fault every later operation is skipped, as on a GPU with a sticky error.
      if (device::get().sticky() == cudaSuccess && op.work) op.work();
      op.done->signal();
    }
  }
};

struct CUevent_st {
  unsigned flags = 0;
  token recorded;  // guarded by the runtime's mutex
};

namespace {

thread_local cudaError_t tls_last_error = cudaSuccess;

cudaError_t fail(cudaError_t e) {
  if (e != cudaSuccess) tls_last_error = e;
  return e;
}

// Linux refuses long-term writable pins (what cudaHostRegister takes) of shared file mappings
// on file systems that track dirty pages; shmem (tmpfs, memfd, SysV), hugetlbfs and ramfs
// mappings and device nodes (device-DAX) are accepted. The emulator applies the same rule so
// that both backends accept and refuse the same pools.
constexpr long kTmpfsMagic = 0x01021994;
constexpr long kHugetlbfsMagic = 0x958458f6;
constexpr long kRamfsMagic = 0x858458f6;

cudaError_t check_registrable(const void* ptr, std::size_t size) {
  std::ifstream maps("/proc/self/maps");
  if (!maps) return cudaSuccess;  // cannot tell: accept, as the page check below cannot run
  auto begin = reinterpret_cast<std::uintptr_t>(ptr);
  const std::uintptr_t end = begin + size;
  std::uintptr_t covered = begin;
  std::string line;
  while (std::getline(maps, line) && covered < end) {
    std::istringstream in(line);
    std::string range, perms, offset, dev, inode, path;
    in >> range >> perms >> offset >> dev >> inode;
    std::getline(in >> std::ws, path);
    const auto dash = range.find('-');
    const std::uintptr_t lo = std::stoull(range.substr(0, dash), nullptr, 16);
    const std::uintptr_t hi = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (hi <= covered || lo >= end) continue;
    if (lo > covered) return cudaErrorInvalidValue;  // a hole: part of the range is unmapped
    covered = hi;
    const bool shared_writable = perms.size() >= 4 && perms[1] == 'w' && perms[3] == 's';
    if (!shared_writable || inode == "0" || path.rfind("/dev/", 0) == 0 ||
        path.rfind("/memfd:", 0) == 0 || path.rfind("/SYSV", 0) == 0) {
      continue;
    }
    struct statfs fs {};
    const std::string link = "/proc/self/map_files/" + range;
    if (statfs(link.c_str(), &fs) != 0 && statfs(path.c_str(), &fs) != 0) continue;
    const long type = static_cast<long>(fs.f_type);
    if (type != kTmpfsMagic && type != kHugetlbfsMagic && type != kRamfsMagic) {
      return cudaErrorInvalidValue;
    }
  }
  return covered >= end ? cudaSuccess : cudaErrorInvalidValue;
}

std::size_t page_size() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

class runtime {
 public:
  static runtime& get() {
    static runtime* r = new runtime();  // never destroyed, like the device
    return *r;
  }

  CUstream_st* resolve(cudaStream_t s) { return s == nullptr ? &default_ : s; }

  bool valid_stream(cudaStream_t s) {
    std::lock_guard lock(m_);
    return s == nullptr || streams_.count(s) != 0;
  }

  cudaError_t enqueue(cudaStream_t s, std::function<void()> work, token extra_dep = nullptr,
                      token* done_out = nullptr) {
    if (cudaError_t e = device::get().sticky(); e != cudaSuccess) return e;
    CUstream_st* st = resolve(s);
    operation op{std::move(work), {}, std::make_shared<completion>()};
    {
      std::lock_guard lock(m_);
      if (s != nullptr && streams_.count(s) == 0) return cudaErrorInvalidResourceHandle;
      if (st == &default_) {
        for (CUstream_st* other : streams_) {
          if (other->blocking() && other->last) op.deps.push_back(other->last);
        }
      } else if (st->blocking() && default_.last) {
        op.deps.push_back(default_.last);
      }
      if (extra_dep) op.deps.push_back(std::move(extra_dep));
      st->last = op.done;
      if (done_out != nullptr) *done_out = op.done;
    }
    {
      std::lock_guard lock(st->m);
      st->queue.push_back(std::move(op));
    }
    st->cv.notify_one();
    return cudaSuccess;
  }

  cudaError_t synchronize(cudaStream_t s) {
    token t;
    {
      std::lock_guard lock(m_);
      if (s != nullptr && streams_.count(s) == 0) return cudaErrorInvalidResourceHandle;
      t = resolve(s)->last;
    }
    if (t) t->wait();
    return device::get().sticky();
  }

  cudaError_t query(cudaStream_t s) {
    token t;
    {
      std::lock_guard lock(m_);
      if (s != nullptr && streams_.count(s) == 0) return cudaErrorInvalidResourceHandle;
      t = resolve(s)->last;
    }
    if (cudaError_t e = device::get().sticky(); e != cudaSuccess) return e;
    return !t || t->is_done() ? cudaSuccess : cudaErrorNotReady;
  }

  cudaError_t synchronize_all() {
    std::vector<token> all;
    {
      std::lock_guard lock(m_);
      if (default_.last) all.push_back(default_.last);
      for (CUstream_st* s : streams_) {
        if (s->last) all.push_back(s->last);
      }
    }
    for (auto& t : all) t->wait();
    return device::get().sticky();
  }

  cudaError_t run_sync(std::function<void()> work) {
    token done;
    if (cudaError_t e = enqueue(nullptr, std::move(work), nullptr, &done); e != cudaSuccess) {
      return e;
    }
    done->wait();
    return device::get().sticky();
  }

  cudaStream_t create_stream(unsigned flags) {
    auto* s = new CUstream_st();
    s->flags = flags;
    s->thread = std::thread([s] { s->loop(); });
    std::lock_guard lock(m_);
    streams_.insert(s);
    return s;
  }

  cudaError_t destroy_stream(cudaStream_t s) {
    {
      std::lock_guard lock(m_);
      if (s == nullptr || streams_.erase(s) == 0) return cudaErrorInvalidResourceHandle;
    }
    {
      std::lock_guard lock(s->m);
      s->stopping = true;
    }
    s->cv.notify_one();
    s->thread.join();  // finishes the work already queued, as CUDA does
    delete s;
    return cudaSuccess;
  }

  cudaEvent_t create_event(unsigned flags) {
    auto* e = new CUevent_st();
    e->flags = flags;
    std::lock_guard lock(m_);
    events_.insert(e);
    return e;
  }

  cudaError_t destroy_event(cudaEvent_t e) {
    std::lock_guard lock(m_);
    if (events_.erase(e) == 0) return cudaErrorInvalidResourceHandle;
    delete e;
    return cudaSuccess;
  }

  bool valid_event(cudaEvent_t e) {
    std::lock_guard lock(m_);
    return events_.count(e) != 0;
  }

  token recorded(cudaEvent_t e) {
    std::lock_guard lock(m_);
    return e->recorded;
  }

  void set_recorded(cudaEvent_t e, token t) {
    std::lock_guard lock(m_);
    e->recorded = std::move(t);
  }

  // ---- memory bookkeeping ----
  enum class region_kind { device, managed, host_alloc, registered };
  struct region {
    std::size_t size;
    region_kind kind;
  };

  cudaError_t allocate(void** ptr, std::size_t size, region_kind kind) {
    if (ptr == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = device::get().sticky(); e != cudaSuccess) return e;
    if (size == 0) {
      *ptr = nullptr;
      return cudaSuccess;
    }
    const std::size_t align = kind == region_kind::device ? 256 : page_size();
    const std::size_t bytes = round_up(size, align);
    std::lock_guard lock(m_);
    if (kind == region_kind::device && device_bytes_ + bytes > device::get().opts().device_memory) {
      return cudaErrorMemoryAllocation;
    }
    void* p = std::aligned_alloc(align, bytes);
    if (p == nullptr) return cudaErrorMemoryAllocation;
    regions_[reinterpret_cast<std::uintptr_t>(p)] = region{bytes, kind};
    if (kind == region_kind::device) device_bytes_ += bytes;
    *ptr = p;
    return cudaSuccess;
  }

  cudaError_t release(void* ptr, bool host) {
    if (ptr == nullptr) return cudaSuccess;
    synchronize_all();  // cudaFree waits for the device, so no kernel still uses the memory
    std::lock_guard lock(m_);
    auto it = regions_.find(reinterpret_cast<std::uintptr_t>(ptr));
    const bool host_kind = it != regions_.end() && it->second.kind == region_kind::host_alloc;
    const bool dev_kind = it != regions_.end() && (it->second.kind == region_kind::device ||
                                                   it->second.kind == region_kind::managed);
    if ((host && !host_kind) || (!host && !dev_kind)) return cudaErrorInvalidValue;
    if (it->second.kind == region_kind::device) device_bytes_ -= it->second.size;
    regions_.erase(it);
    std::free(ptr);
    return cudaSuccess;
  }

  // The host region (cudaHostAlloc or cudaHostRegister) containing p, if any.
  const region* host_region_of(const void* p, std::uintptr_t* start = nullptr) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    auto it = regions_.upper_bound(a);
    if (it == regions_.begin()) return nullptr;
    --it;
    const bool host =
        it->second.kind == region_kind::host_alloc || it->second.kind == region_kind::registered;
    if (!host || a >= it->first + it->second.size) return nullptr;
    if (start != nullptr) *start = it->first;
    return &it->second;
  }

  cudaError_t register_host(void* ptr, std::size_t size, unsigned flags) {
    if (ptr == nullptr || size == 0 || (flags & ~0x0Fu) != 0) return cudaErrorInvalidValue;
    std::lock_guard lock(m_);
    const auto a = reinterpret_cast<std::uintptr_t>(ptr);
    auto it = regions_.lower_bound(a);
    if (it != regions_.end() && it->first < a + size) return cudaErrorHostMemoryAlreadyRegistered;
    if (host_region_of(ptr) != nullptr) return cudaErrorHostMemoryAlreadyRegistered;
    if (cudaError_t e = check_registrable(ptr, size); e != cudaSuccess) return e;
    regions_[a] = region{size, region_kind::registered};
    return cudaSuccess;
  }

  cudaError_t unregister_host(void* ptr) {
    std::lock_guard lock(m_);
    auto it = regions_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == regions_.end() || it->second.kind != region_kind::registered) {
      return cudaErrorHostMemoryNotRegistered;
    }
    regions_.erase(it);
    return cudaSuccess;
  }

  cudaError_t device_pointer(void** out, void* host, unsigned flags) {
    if (out == nullptr || flags != 0) return cudaErrorInvalidValue;
    std::lock_guard lock(m_);
    if (host_region_of(host) == nullptr) return cudaErrorInvalidValue;
    *out = host;  // one address space: the device sees host memory at the same address
    return cudaSuccess;
  }

  std::size_t device_bytes() {
    std::lock_guard lock(m_);
    return device_bytes_;
  }

 private:
  runtime() {
    default_.thread = std::thread([this] { default_.loop(); });
  }

  std::mutex m_;
  CUstream_st default_;
  std::set<cudaStream_t> streams_;
  std::set<cudaEvent_t> events_;
  std::map<std::uintptr_t, region> regions_;
  std::size_t device_bytes_ = 0;
};

cudaError_t copy_kind_ok(cudaMemcpyKind kind) {
  return static_cast<int>(kind) >= 0 && static_cast<int>(kind) <= 4
             ? cudaSuccess
             : cudaErrorInvalidMemcpyDirection;
}

}  // namespace

// ---- kernel launch --------------------------------------------------------------------------

namespace gpm::emu::detail {

cudaError_t submit_launch(kernel_launch&& launch) {
  const dim3 b = launch.block;
  const dim3 g = launch.grid;
  const unsigned long long threads = 1ull * b.x * b.y * b.z;
  // As CUDA 13 on an H100/H200: an empty grid or block is an invalid configuration, one beyond
  // the device's limits an invalid value.
  if (threads == 0 || g.x == 0 || g.y == 0 || g.z == 0) return cudaErrorInvalidConfiguration;
  if (threads > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64 || g.x > 0x7fffffffu || g.y > 65535 ||
      g.z > 65535) {
    return cudaErrorInvalidValue;
  }
  if (launch.shared_bytes > device::get().max_dynamic_shared(launch.kernel)) {
    return cudaErrorInvalidValue;
  }
  if (!runtime::get().valid_stream(launch.stream)) return cudaErrorInvalidResourceHandle;
  const cudaStream_t s = launch.stream;
  const cudaError_t e =
      runtime::get().enqueue(s, [l = std::move(launch)] { device::get().run_grid(l); });
  // As cudaGetLastError after <<<>>> on a GPU: an error an earlier call left pending (a failed
  // cudaMalloc, say) is reported by the launch check and cleared. Not a fault of this launch:
  // those surface at the next synchronisation, as the emulator's tests expect.
  const cudaError_t pending = std::exchange(tls_last_error, cudaSuccess);
  return e != cudaSuccess ? e : pending;
}

}  // namespace gpm::emu::detail

// ---- errors ---------------------------------------------------------------------------------

extern "C" {

cudaError_t cudaGetLastError() {
  if (cudaError_t e = device::get().sticky(); e != cudaSuccess) return e;
  const cudaError_t e = tls_last_error;
  tls_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  if (cudaError_t e = device::get().sticky(); e != cudaSuccess) return e;
  return tls_last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define GPM_EMU_NAME(e) \
  case e: return #e;
    GPM_EMU_NAME(cudaSuccess)
    GPM_EMU_NAME(cudaErrorInvalidValue)
    GPM_EMU_NAME(cudaErrorMemoryAllocation)
    GPM_EMU_NAME(cudaErrorInitializationError)
    GPM_EMU_NAME(cudaErrorInvalidConfiguration)
    GPM_EMU_NAME(cudaErrorInvalidSymbol)
    GPM_EMU_NAME(cudaErrorInvalidHostPointer)
    GPM_EMU_NAME(cudaErrorInvalidDevicePointer)
    GPM_EMU_NAME(cudaErrorInvalidMemcpyDirection)
    GPM_EMU_NAME(cudaErrorInvalidDeviceFunction)
    GPM_EMU_NAME(cudaErrorNoDevice)
    GPM_EMU_NAME(cudaErrorInvalidDevice)
    GPM_EMU_NAME(cudaErrorInvalidResourceHandle)
    GPM_EMU_NAME(cudaErrorNotReady)
    GPM_EMU_NAME(cudaErrorIllegalAddress)
    GPM_EMU_NAME(cudaErrorLaunchOutOfResources)
    GPM_EMU_NAME(cudaErrorAssert)
    GPM_EMU_NAME(cudaErrorHostMemoryAlreadyRegistered)
    GPM_EMU_NAME(cudaErrorHostMemoryNotRegistered)
    GPM_EMU_NAME(cudaErrorIllegalInstruction)
    GPM_EMU_NAME(cudaErrorLaunchFailure)
    GPM_EMU_NAME(cudaErrorNotPermitted)
    GPM_EMU_NAME(cudaErrorNotSupported)
    GPM_EMU_NAME(cudaErrorUnknown)
#undef GPM_EMU_NAME
  }
  return "unrecognized error code";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidSymbol: return "invalid device symbol";
    case cudaErrorInvalidHostPointer: return "invalid host pointer";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorHostMemoryAlreadyRegistered:
      return "part or all of the requested memory range is already mapped";
    case cudaErrorHostMemoryNotRegistered:
      return "pointer does not correspond to a registered memory region";
    case cudaErrorIllegalInstruction: return "an illegal instruction was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotPermitted: return "operation not permitted";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorUnknown: return "unknown error";
  }
  return "unrecognized error code";
}

// ---- device ---------------------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  // GPM_EMU_HIDE_DEVICE=1 plays a machine without a GPU, for tests of that path.
  const char* hide = std::getenv("GPM_EMU_HIDE_DEVICE");
  if (hide != nullptr && *hide != '\0' && *hide != '0') {
    *count = 0;
    return fail(cudaErrorNoDevice);
  }
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* dev) {
  if (dev == nullptr) return fail(cudaErrorInvalidValue);
  *dev = 0;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev) { return dev == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice); }

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int dev) {
  if (p == nullptr) return fail(cudaErrorInvalidValue);
  if (dev != 0) return fail(cudaErrorInvalidDevice);
  const auto o = device::get().opts();
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "gpmkit host SIMT emulator (%u workers)", o.workers);
  p->totalGlobalMem = o.device_memory;
  p->sharedMemPerBlock = device::kDefaultSharedPerBlock;
  p->sharedMemPerBlockOptin = device::kMaxSharedPerBlockOptin;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024;
  p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7fffffff;
  p->maxGridSize[1] = 65535;
  p->maxGridSize[2] = 65535;
  p->major = 9;  // the semantics emulated: independent thread scheduling, sm_90 intrinsics
  p->minor = 0;
  p->multiProcessorCount = static_cast<int>(o.workers);
  p->integrated = 1;  // "device" memory is host memory
  p->canMapHostMemory = 1;
  p->concurrentKernels = 1;
  p->asyncEngineCount = 1;
  p->unifiedAddressing = 1;
  p->maxThreadsPerMultiProcessor = device::kMaxThreadsPerMultiprocessor;
  p->managedMemory = 1;
  p->hostNativeAtomicSupported = 1;  // host atomics are CPU atomics
  p->pageableMemoryAccess = 0;       // like the GPU machines: no HMM
  p->concurrentManagedAccess = 1;
  p->hostRegisterSupported = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int dev) {
  if (value == nullptr) return fail(cudaErrorInvalidValue);
  cudaDeviceProp p;
  if (cudaError_t e = cudaGetDeviceProperties(&p, dev); e != cudaSuccess) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrClockRate: *value = 1000000; break;  // clock64() counts nanoseconds
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrCanMapHostMemory: *value = p.canMapHostMemory; break;
    case cudaDevAttrPciBusId: *value = p.pciBusID; break;
    case cudaDevAttrPciDeviceId: *value = p.pciDeviceID; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrUnifiedAddressing: *value = p.unifiedAddressing; break;
    case cudaDevAttrPciDomainId: *value = p.pciDomainID; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrHostNativeAtomicSupported: *value = p.hostNativeAtomicSupported; break;
    case cudaDevAttrPageableMemoryAccess: *value = p.pageableMemoryAccess; break;
    case cudaDevAttrConcurrentManagedAccess: *value = p.concurrentManagedAccess; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(p.sharedMemPerBlockOptin);
      break;
    case cudaDevAttrHostRegisterSupported: *value = p.hostRegisterSupported; break;
    default: return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return fail(runtime::get().synchronize_all()); }

cudaError_t cudaDeviceReset() {
  runtime::get().synchronize_all();
  device::get().clear_sticky();
  tls_last_error = cudaSuccess;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  if (v == nullptr) return fail(cudaErrorInvalidValue);
  *v = 13000;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* v) { return cudaRuntimeGetVersion(v); }

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return fail(cudaErrorInvalidValue);
  *total_bytes = device::get().opts().device_memory;
  *free_bytes = *total_bytes - std::min(*total_bytes, runtime::get().device_bytes());
  return cudaSuccess;
}

// ---- memory ---------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** ptr, std::size_t size) {
  return fail(runtime::get().allocate(ptr, size, runtime::region_kind::device));
}

cudaError_t cudaMallocManaged(void** ptr, std::size_t size, unsigned int flags) {
  if (flags != cudaMemAttachGlobal) return fail(cudaErrorInvalidValue);
  return fail(runtime::get().allocate(ptr, size, runtime::region_kind::managed));
}

cudaError_t cudaFree(void* ptr) { return fail(runtime::get().release(ptr, false)); }

cudaError_t cudaMallocHost(void** ptr, std::size_t size) {
  return fail(runtime::get().allocate(ptr, size, runtime::region_kind::host_alloc));
}

cudaError_t cudaHostAlloc(void** ptr, std::size_t size, unsigned int flags) {
  if ((flags & ~0x07u) != 0) return fail(cudaErrorInvalidValue);
  return cudaMallocHost(ptr, size);
}

cudaError_t cudaFreeHost(void* ptr) { return fail(runtime::get().release(ptr, true)); }

cudaError_t cudaHostRegister(void* ptr, std::size_t size, unsigned int flags) {
  return fail(runtime::get().register_host(ptr, size, flags));
}

cudaError_t cudaHostUnregister(void* ptr) { return fail(runtime::get().unregister_host(ptr)); }

cudaError_t cudaHostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned int flags) {
  return fail(runtime::get().device_pointer(device_ptr, host_ptr, flags));
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (cudaError_t e = copy_kind_ok(kind); e != cudaSuccess) return fail(e);
  if (count == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue);
  return fail(runtime::get().enqueue(stream, [=] { std::memmove(dst, src, count); }));
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t count, cudaMemcpyKind kind) {
  if (cudaError_t e = copy_kind_ok(kind); e != cudaSuccess) return fail(e);
  if (count == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue);
  return fail(runtime::get().run_sync([=] { std::memmove(dst, src, count); }));
}

cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  return fail(runtime::get().enqueue(stream, [=] { std::memset(ptr, value, count); }));
}

cudaError_t cudaMemset(void* ptr, int value, std::size_t count) {
  if (count == 0) return cudaSuccess;
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  return fail(runtime::get().run_sync([=] { std::memset(ptr, value, count); }));
}

// ---- streams --------------------------------------------------------------------------------

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (stream == nullptr || (flags & ~0x1u) != 0) return fail(cudaErrorInvalidValue);
  *stream = runtime::get().create_stream(flags);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return fail(runtime::get().destroy_stream(stream));
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return fail(runtime::get().synchronize(stream));
}

cudaError_t cudaStreamQuery(cudaStream_t stream) { return runtime::get().query(stream); }

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (flags != 0 || !runtime::get().valid_event(event)) return fail(cudaErrorInvalidResourceHandle);
  token t = runtime::get().recorded(event);
  if (!t) return cudaSuccess;  // never recorded: nothing to wait for
  return fail(runtime::get().enqueue(stream, nullptr, std::move(t)));
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  if (fn == nullptr) return fail(cudaErrorInvalidValue);
  return fail(runtime::get().enqueue(stream, [fn, user_data] { fn(user_data); }));
}

// ---- events ---------------------------------------------------------------------------------

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (event == nullptr || (flags & ~0x3u) != 0) return fail(cudaErrorInvalidValue);
  *event = runtime::get().create_event(flags);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return fail(runtime::get().destroy_event(event));
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!runtime::get().valid_event(event)) return fail(cudaErrorInvalidResourceHandle);
  token done;
  if (cudaError_t e = runtime::get().enqueue(stream, nullptr, nullptr, &done); e != cudaSuccess) {
    return fail(e);
  }
  runtime::get().set_recorded(event, std::move(done));
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!runtime::get().valid_event(event)) return fail(cudaErrorInvalidResourceHandle);
  if (token t = runtime::get().recorded(event)) t->wait();
  return fail(device::get().sticky());
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!runtime::get().valid_event(event)) return fail(cudaErrorInvalidResourceHandle);
  token t = runtime::get().recorded(event);
  return !t || t->is_done() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return fail(cudaErrorInvalidValue);
  if (!runtime::get().valid_event(start) || !runtime::get().valid_event(end) ||
      ((start->flags | end->flags) & cudaEventDisableTiming) != 0) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  token a = runtime::get().recorded(start);
  token b = runtime::get().recorded(end);
  if (!a || !b) return fail(cudaErrorInvalidResourceHandle);
  if (!a->is_done() || !b->is_done()) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(b->when - a->when).count();
  return cudaSuccess;
}

// ---- functions ------------------------------------------------------------------------------

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (func == nullptr || attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      static_cast<std::size_t>(value) > device::kMaxSharedPerBlockOptin) {
    return fail(cudaErrorInvalidValue);
  }
  device::get().set_max_dynamic_shared(func, value);
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void* func) {
  if (attributes == nullptr || func == nullptr) return fail(cudaErrorInvalidValue);
  *attributes = cudaFuncAttributes{
      .numRegs = 0,
      .maxThreadsPerBlock = 1024,
      .sharedSizeBytes = 0,
      .maxDynamicSharedSizeBytes = static_cast<int>(device::get().max_dynamic_shared(func))};
  return cudaSuccess;
}

// A worker (the emulator's multiprocessor) runs one block at a time; the answer is what a
// multiprocessor would hold (options::blocks_per_multiprocessor, 1 unless set): at most that many
// blocks, as many as its threads (kMaxThreadsPerMultiprocessor) and shared memory (the opt-in
// most a block may have) allow, 0 for a block that cannot launch with these threads and dynamic
// shared memory.
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* num_blocks, const void* func,
                                                          int block_size,
                                                          std::size_t dynamic_shared_bytes) {
  if (num_blocks == nullptr || func == nullptr || block_size <= 0) {
    return fail(cudaErrorInvalidValue);
  }
  if (block_size > 1024 || dynamic_shared_bytes > device::get().max_dynamic_shared(func)) {
    *num_blocks = 0;
    return cudaSuccess;
  }
  std::size_t blocks = device::get().opts().blocks_per_multiprocessor;
  blocks = std::min<std::size_t>(blocks, device::kMaxThreadsPerMultiprocessor / block_size);
  if (dynamic_shared_bytes != 0) {
    blocks = std::min(blocks, device::kMaxSharedPerBlockOptin / dynamic_shared_bytes);
  }
  *num_blocks = static_cast<int>(std::max<std::size_t>(blocks, 1));
  return cudaSuccess;
}

}  // extern "C"
