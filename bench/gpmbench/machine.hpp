// What machine a benchmark ran on, as recorded in every gpmbench record, and the short tag that
// names its results directory (h100, h200, host-emulator).
#pragma once

#include <optional>
#include <string>

#include <gpm/platform/runtime.hpp>

namespace gpmbench {

struct machine_info {
  std::string hostname;
  std::string cpu;                 // model name from /proc/cpuinfo
  int cores = 0;                   // hardware threads
  std::string gpu;                 // device name (the emulator's name on the host backend)
  std::string compute_capability;  // "9.0"
  int multiprocessors = 0;
  std::optional<int> pcie_generation;  // unknown on the emulator or without sysfs
  std::optional<int> pcie_width;
  std::optional<std::string> driver;        // NVIDIA kernel driver version
  std::optional<std::string> cuda_runtime;  // "13.0"; none on the host backend
  // Whether the run's pools were on 2 MiB pages (gpm::describe_storage of its PM directory): the
  // GPU's reach into a pool, random accesses above all, depends on it (docs/pool.md).
  bool pool_huge_pages = false;
  // CUDA_MODULE_LOADING as the run saw it ("EAGER": gpmbench's default, see main.cpp); none on
  // the host backend.
  std::optional<std::string> module_loading;
};

machine_info describe_machine(const gpm::device_info& dev);

// "h200" for "NVIDIA H200", "host-emulator" on the host backend: the first word of the device
// name that contains a digit, lower-cased, up to its first '-'.
std::string machine_tag(const gpm::device_info& dev);

}  // namespace gpmbench
