// Host SIMT emulator: worker pool, grid execution, options and fault state (see device.hpp).
#include "device.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string_view>
#include <vector>

namespace gpm::emu::detail {

namespace {

// Reads an unsigned environment variable; a malformed value is reported and ignored.
template <class T>
void read_env(const char* name, T& out, T scale = 1) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return;
  unsigned long long parsed = 0;
  const std::string_view s(v);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), parsed);
  if (ec != std::errc{} || end != s.data() + s.size()) {
    std::fprintf(stderr, "gpmkit host emulator: ignoring %s=%s (not an unsigned integer)\n", name,
                 v);
    return;
  }
  out = static_cast<T>(parsed) * scale;
}

std::size_t physical_memory() {
  return static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) *
         static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

options normalized(options o) {
  if (o.workers == 0) o.workers = std::max(1u, std::thread::hardware_concurrency());
  if (o.yield_every == 0) o.yield_every = 1;
  if (o.stack_bytes < 16 * 1024) o.stack_bytes = 16 * 1024;
  if (o.device_memory == 0) o.device_memory = physical_memory() / 2;
  if (o.blocks_per_multiprocessor == 0) o.blocks_per_multiprocessor = 1;
  return o;
}

}  // namespace

options options_from_environment() {
  options o;
  read_env("GPM_EMU_WORKERS", o.workers);
  read_env("GPM_EMU_SEED", o.seed);
  read_env("GPM_EMU_YIELD_EVERY", o.yield_every);
  read_env<std::size_t>("GPM_EMU_STACK_KIB", o.stack_bytes, 1024);
  read_env<std::size_t>("GPM_EMU_DEVICE_MIB", o.device_memory, 1024 * 1024);
  read_env("GPM_EMU_BLOCKS_PER_SM", o.blocks_per_multiprocessor);
  return normalized(o);
}

namespace {

std::string demangle(const char* symbol) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(symbol, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : symbol;
  std::free(demangled);
  return name;
}

// Looks `offset` up in the static symbol table of the ELF file `path` (kernels often have
// internal linkage, so they are absent from the dynamic symbols dladdr reads).
std::string static_symbol(const char* path, std::uintptr_t offset) {
  std::ifstream f(path, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!f.read(reinterpret_cast<char*>(&eh), sizeof eh) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) {
    return {};
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  f.seekg(static_cast<std::streamoff>(eh.e_shoff));
  if (!f.read(reinterpret_cast<char*>(sections.data()),
              static_cast<std::streamsize>(sections.size() * sizeof(Elf64_Shdr)))) {
    return {};
  }
  for (const Elf64_Shdr& sh : sections) {
    if (sh.sh_type != SHT_SYMTAB || sh.sh_link >= sections.size()) continue;
    const Elf64_Shdr& strtab = sections[sh.sh_link];
    std::vector<Elf64_Sym> syms(sh.sh_size / sizeof(Elf64_Sym));
    f.seekg(static_cast<std::streamoff>(sh.sh_offset));
    f.read(reinterpret_cast<char*>(syms.data()),
           static_cast<std::streamsize>(syms.size() * sizeof(Elf64_Sym)));
    for (const Elf64_Sym& sym : syms) {
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || offset < sym.st_value ||
          offset >= sym.st_value + std::max<Elf64_Xword>(sym.st_size, 1)) {
        continue;
      }
      std::string name;
      f.seekg(static_cast<std::streamoff>(strtab.sh_offset + sym.st_name));
      std::getline(f, name, '\0');
      return demangle(name.c_str());
    }
  }
  return {};
}

}  // namespace

std::string kernel_name(const void* kernel) {
  Dl_info info{};
  if (dladdr(kernel, &info) != 0) {
    if (info.dli_sname != nullptr) return demangle(info.dli_sname);
    if (info.dli_fname != nullptr) {
      const auto addr = reinterpret_cast<std::uintptr_t>(kernel);
      const auto base = reinterpret_cast<std::uintptr_t>(info.dli_fbase);
      // Position-independent objects store offsets from their load base; others, addresses.
      std::string name = static_symbol(info.dli_fname, addr - base);
      if (name.empty()) name = static_symbol(info.dli_fname, addr);
      if (!name.empty()) return name;
    }
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "kernel@%p", kernel);
  return buf;
}

struct device::grid_job {
  block_job job;
  std::uint64_t total = 0;
  std::uint64_t next = 0;  // guarded by device::mutex_
  std::atomic<std::uint64_t> finished{0};
  std::atomic<bool> aborted{false};
  std::mutex mutex;
  std::condition_variable done_cv;
  std::string fault;
};

device& device::get() {
  // Never destroyed: worker threads may still be parked when static destructors run at exit.
  static device* d = new device();
  return *d;
}

device::device() : opts_(options_from_environment()) { start_workers(opts_.workers); }

options device::opts() const {
  std::lock_guard lock(mutex_);
  return opts_;
}

void device::reconfigure(const options& o) {
  stop_workers();
  {
    std::lock_guard lock(mutex_);
    opts_ = normalized(o);
  }
  launches_.store(0);  // a seeded schedule repeats from here
  start_workers(opts_.workers);
}

void device::start_workers(unsigned count) {
  std::lock_guard lock(mutex_);
  stopping_ = false;
  for (unsigned i = 0; i < count; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

void device::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void device::worker_loop(unsigned) {
  std::unique_ptr<block_runner> runner;
  for (;;) {
    std::shared_ptr<grid_job> job;
    std::uint64_t index = 0;
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = jobs_.front();
      index = job->next++;
      if (job->next == job->total) jobs_.pop_front();
      if (!runner) runner = std::make_unique<block_runner>(opts_.stack_bytes);
    }
    if (!job->aborted.load(std::memory_order_acquire)) {
      const dim3 g = job->job.grid;
      const uint3 block_idx{static_cast<unsigned>(index % g.x),
                            static_cast<unsigned>(index / g.x % g.y),
                            static_cast<unsigned>(index / (static_cast<std::uint64_t>(g.x) * g.y))};
      std::string report;
      if (!runner->run(job->job, block_idx, report)) {
        std::lock_guard lock(job->mutex);
        if (job->fault.empty()) job->fault = std::move(report);
        job->aborted.store(true, std::memory_order_release);
      }
    }
    if (job->finished.fetch_add(1, std::memory_order_acq_rel) + 1 == job->total) {
      std::lock_guard lock(job->mutex);
      job->done_cv.notify_all();
    }
  }
}

cudaError_t device::run_grid(const kernel_launch& launch) {
  auto job = std::make_shared<grid_job>();
  const options o = opts();
  job->job = block_job{
      launch.kernel,       launch.invoke, launch.bound_args.get(),    launch.grid,  launch.block,
      launch.shared_bytes, o.seed,        launches_.fetch_add(1) + 1, o.yield_every};
  job->total = static_cast<std::uint64_t>(launch.grid.x) * launch.grid.y * launch.grid.z;
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(job);
  }
  work_cv_.notify_all();
  std::unique_lock lock(job->mutex);
  job->done_cv.wait(lock, [&] { return job->finished.load() == job->total; });
  if (job->fault.empty()) return cudaSuccess;
  std::string report = job->fault + "\n  launched at " + gpm::detail::format_site(launch.site) +
                       " with grid " + gpm::detail::format_dims(launch.grid) + ", block " +
                       gpm::detail::format_dims(launch.block) + "\n  ";
  report += o.seed != 0 ? "reproduce: GPM_EMU_WORKERS=1 GPM_EMU_SEED=" + std::to_string(o.seed)
                        : std::string("the default schedule is deterministic: rerun to reproduce");
  set_sticky(cudaErrorLaunchFailure, report);
  return cudaErrorLaunchFailure;
}

void device::set_sticky(cudaError_t e, const std::string& report) {
  {
    std::lock_guard lock(mutex_);
    last_fault_ = report;
  }
  std::fprintf(stderr, "gpmkit host emulator: kernel fault: %s\n", report.c_str());
  cudaError_t expected = cudaSuccess;
  sticky_.compare_exchange_strong(expected, e, std::memory_order_acq_rel);
}

void device::clear_sticky() {
  std::lock_guard lock(mutex_);
  last_fault_.clear();
  sticky_.store(cudaSuccess, std::memory_order_release);
}

std::string device::last_fault() const {
  std::lock_guard lock(mutex_);
  return last_fault_;
}

void device::set_max_dynamic_shared(const void* kernel, int bytes) {
  std::lock_guard lock(mutex_);
  for (auto& [k, limit] : shared_limits_) {
    if (k == kernel) {
      limit = static_cast<std::size_t>(bytes);
      return;
    }
  }
  shared_limits_.emplace_back(kernel, static_cast<std::size_t>(bytes));
}

std::size_t device::max_dynamic_shared(const void* kernel) const {
  std::lock_guard lock(mutex_);
  for (const auto& [k, limit] : shared_limits_) {
    if (k == kernel) return limit;
  }
  return kDefaultSharedPerBlock;
}

}  // namespace gpm::emu::detail

namespace gpm::emu {

options current_options() { return detail::device::get().opts(); }

void set_options(const options& o) {
  cudaDeviceSynchronize();
  detail::device::get().reconfigure(o);
}

std::string last_fault_report() { return detail::device::get().last_fault(); }

}  // namespace gpm::emu
