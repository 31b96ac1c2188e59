// Injected crash points (see crash_point.hpp): the armed point from the environment, the host's
// crash_point (where an armed crash-image checker explores first, crash_image.hpp), and on the
// CUDA backend the record and watching thread of kernels' crash points.
#include <gpm/platform/crash_point.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <gpm/platform/crash_image.hpp>
#include <gpm/platform/persist.hpp>
#include <gpm/platform/runtime.hpp>

namespace gpm {

namespace {

struct armed {
  std::string name;
  long remaining = 0;  // crash when this reaches zero
};

armed* parse_environment() {
  const char* v = std::getenv("GPMKIT_CRASH_POINT");
  if (v == nullptr || *v == '\0') return nullptr;
  auto* a = new armed();  // lives for the process
  const char* colon = std::strrchr(v, ':');
  a->name = colon != nullptr ? std::string(v, colon) : std::string(v);
  a->remaining = colon != nullptr ? std::strtol(colon + 1, nullptr, 10) : 1;
  if (a->remaining < 1) a->remaining = 1;
  return a;
}

armed* state() {
  static armed* a = parse_environment();
  return a;
}

std::atomic<long> hits{0};

}  // namespace

void crash_point(const char* name) {
  if (detail::durability_model* m =
          detail::armed_durability_model.load(std::memory_order_relaxed)) {
    detail::model_crash_point(*m, name);
  }
  armed* a = state();
  if (a == nullptr || a->name != name) return;
  if (hits.fetch_add(1, std::memory_order_relaxed) + 1 >= a->remaining) {
    kill(getpid(), SIGKILL);
    pause();  // SIGKILL cannot be caught; never returns
  }
}

kernel_crash_ref kernel_crash_points() {
  if constexpr (!GPM_BACKEND_CUDA) return {};  // the host backend's kernels call crash_point()
  static const kernel_crash_ref ref = [] {
    const armed* a = state();
    if (a == nullptr) return kernel_crash_ref{};
    // Lives for the process, like the armed point; the kill ends both.
    void* host = nullptr;
    check_cuda(cudaHostAlloc(&host, sizeof(kernel_crash_record), cudaHostAllocMapped),
               "cudaHostAlloc (the record of a kernel crash point)");
    auto* record = static_cast<kernel_crash_record*>(host);
    record->hits_left = static_cast<unsigned long long>(a->remaining);
    record->hit = 0;
    void* device = nullptr;
    check_cuda(cudaHostGetDevicePointer(&device, host, 0),
               "cudaHostGetDevicePointer (the record of a kernel crash point)");
    std::thread([record] {
      std::atomic_ref<unsigned long long> hit(record->hit);
      while (hit.load(std::memory_order_acquire) == 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      kill(getpid(), SIGKILL);
      pause();
    }).detach();
    return kernel_crash_ref{crash_point_hash(a->name.c_str()),
                            static_cast<kernel_crash_record*>(device)};
  }();
  return ref;
}

const char* armed_crash_point() {
  armed* a = state();
  return a == nullptr ? "" : a->name.c_str();
}

}  // namespace gpm
