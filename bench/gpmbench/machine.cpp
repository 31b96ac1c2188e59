// Machine description for gpmbench records (see machine.hpp).
#include "machine.hpp"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace gpmbench {

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul ..." -> "580.65.06".
std::optional<std::string> nvidia_driver_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  std::istringstream words(line);
  std::string w;
  while (words >> w) {
    if (!w.empty() && std::isdigit(static_cast<unsigned char>(w[0])) &&
        w.find('.') != std::string::npos) {
      return w;
    }
  }
  return std::nullopt;
}

}  // namespace

machine_info describe_machine(const gpm::device_info& dev) {
  machine_info m;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) m.hostname = host;
  m.cpu = cpu_model();
  m.cores = static_cast<int>(std::thread::hardware_concurrency());
  m.gpu = dev.name;
  m.compute_capability =
      std::to_string(dev.compute_major) + "." + std::to_string(dev.compute_minor);
  m.multiprocessors = dev.multiprocessors;
  if (dev.pcie_generation > 0) m.pcie_generation = dev.pcie_generation;
  if (dev.pcie_width > 0) m.pcie_width = dev.pcie_width;
  if (!dev.emulated) {
    // The emulator answers version queries with the CUDA version it imitates; only a real
    // runtime's answer is worth recording.
    m.driver = nvidia_driver_version();
    int v = 0;
    if (cudaRuntimeGetVersion(&v) == cudaSuccess) {
      m.cuda_runtime = std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
    }
    const char* loading = std::getenv("CUDA_MODULE_LOADING");
    m.module_loading = loading != nullptr ? loading : "LAZY";  // CUDA's default since 12.2
  }
  return m;
}

std::string machine_tag(const gpm::device_info& dev) {
  if (dev.emulated) return "host-emulator";
  std::istringstream words(dev.name);
  std::string w;
  while (words >> w) {
    bool has_digit = false;
    for (const char c : w) has_digit = has_digit || std::isdigit(static_cast<unsigned char>(c));
    if (!has_digit) continue;
    std::string tag;
    for (const char c : w.substr(0, w.find('-'))) {
      tag += std::isalnum(static_cast<unsigned char>(c))
                 ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                 : '_';
    }
    return tag;
  }
  return "gpu";
}

}  // namespace gpmbench
