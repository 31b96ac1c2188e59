// DRAGON's user-level API on gpmkit (see include/gpm/compat/dragon.hpp): a mapping is GPU memory
// filled from the file range through a pinned staging buffer and written back the same way; the
// file is opened, validated and locked as gpm::ooc mappings are (gpm::detail::ooc::backing_file).
#include <gpm/compat/dragon.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include <gpm/ooc/detail/file.hpp>
#include <gpm/platform/pinned_buffer.hpp>
#include <gpm/platform/runtime.hpp>

namespace {

using gpm::detail::ooc::backing_file;

constexpr std::uint64_t kChunk = 8ull << 20;  // bytes per staged copy
constexpr double kUsableFraction = 0.9;       // of free GPU memory one mapping may take

struct mapped_range {
  std::unique_ptr<backing_file> file;  // null: volatile data with no file
  gpm::device_buffer<std::byte> data;
  unsigned short flags = 0;
  bool writes_back() const {
    return (flags & D_VOLATILE) == 0 && (flags & (D_READ | D_WRITE)) != D_READ;
  }
};

// A failure with its DRAGON code, thrown inside this file only.
struct dragon_failure {
  dError_t code;
  std::string what;
};

std::mutex registry_mutex;
std::map<const std::byte*, mapped_range>& registry() {
  static std::map<const std::byte*, mapped_range> r;
  return r;
}

thread_local std::string last_message;

dError_t code_of(gpm::errc c) {
  switch (c) {
    case gpm::errc::not_found: return D_ERR_FILE;
    case gpm::errc::busy: return D_ERR_BUSY;
    case gpm::errc::io: return D_ERR_IO;
    case gpm::errc::out_of_memory: return D_ERR_NOMEM;
    case gpm::errc::cuda:
    case gpm::errc::no_device: return D_ERR_DEVICE;
    default: return D_ERR_ARG;
  }
}

// Runs `body`, turning every exception into a code and this thread's message.
template <class F>
dError_t guarded(const char* function, F&& body) {
  const auto fail = [&](dError_t code, const std::string& what) {
    last_message = std::string(function) + ": " + what;
    return code;
  };
  try {
    last_message.clear();
    body();
    return D_OK;
  } catch (const dragon_failure& e) {
    return fail(e.code, e.what);
  } catch (const gpm::error& e) {
    return fail(code_of(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(D_ERR_NOMEM, "out of host memory");
  } catch (const std::exception& e) {
    return fail(D_ERR_IO, e.what());
  } catch (...) {
    return fail(D_ERR_IO, "an unknown failure");
  }
}

// Copies bytes [at, at + bytes) of the mapping between its file and the GPU, in staged chunks.
void transfer(mapped_range& m, std::uint64_t at, std::uint64_t bytes, bool to_gpu) {
  if (bytes == 0) return;
  auto staging = gpm::pinned_buffer<std::byte>::for_io(std::min(kChunk, bytes));
  for (std::uint64_t done = 0; done < bytes;) {
    const std::uint64_t n = std::min<std::uint64_t>(staging.size(), bytes - done);
    std::byte* dev = m.data.data() + at + done;
    if (to_gpu) {
      m.file->read(at + done, staging.data(), n, staging.size());
      gpm::check_cuda(cudaMemcpy(dev, staging.data(), n, cudaMemcpyHostToDevice), "cudaMemcpy");
    } else {
      gpm::check_cuda(cudaMemcpy(staging.data(), dev, n, cudaMemcpyDeviceToHost), "cudaMemcpy");
      m.file->write(at + done, staging.data(), n);
    }
    done += n;
  }
}

// The mapping holding [p, p + bytes) (lock held), or a D_ERR_ARG failure.
std::map<const std::byte*, mapped_range>::iterator containing(const void* p, std::uint64_t bytes) {
  const auto* b = static_cast<const std::byte*>(p);
  auto it = registry().upper_bound(b);
  if (it != registry().begin()) {
    --it;
    const std::uint64_t off = static_cast<std::uint64_t>(b - it->first);
    if (off < it->second.data.size() && bytes <= it->second.data.size() - off) return it;
  }
  throw dragon_failure{D_ERR_ARG, "the range does not lie inside one mapping made by dragon_map"};
}

void write_back(mapped_range& m, std::uint64_t at, std::uint64_t bytes) {
  if (!m.writes_back()) return;
  gpm::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  transfer(m, at, bytes, false);
  m.file->datasync();
}

}  // namespace

extern "C" {

dError_t dragon_map(const char* filename, size_t size, off_t offset, unsigned short flags,
                    void** addr) {
  return guarded("dragon_map", [&] {
    if (addr == nullptr) throw dragon_failure{D_ERR_ARG, "addr is null"};
    *addr = nullptr;
    if (filename == nullptr) throw dragon_failure{D_ERR_ARG, "the file name is null"};
    if ((flags & ~(D_READ | D_WRITE | D_VOLATILE)) != 0) {
      throw dragon_failure{D_ERR_ARG, "unknown flags " + std::to_string(flags) +
                                          ": use D_READ, D_WRITE and D_VOLATILE"};
    }
    if (offset < 0) throw dragon_failure{D_ERR_ARG, "the offset is negative"};
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    gpm::check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    if (static_cast<double>(size) > kUsableFraction * static_cast<double>(free_bytes)) {
      throw dragon_failure{
          D_ERR_TOO_LARGE,
          std::string(filename) + ": " + std::to_string(size) +
              " bytes do not fit in the GPU's free memory (" + std::to_string(free_bytes) +
              " bytes). DRAGON pages such mappings through the GPU with a driver fault path, "
              "which does not exist in user space: map the file with gpm::ooc::mapping and "
              "access it through gpm::ooc::array<T> (docs/out-of-core.md)"};
    }
    const bool volatile_data = (flags & D_VOLATILE) != 0;
    const bool write_only = (flags & (D_READ | D_WRITE)) == D_WRITE;
    mapped_range m;
    m.flags = flags;
    struct stat st {};
    const bool scratch = volatile_data && ::stat(filename, &st) != 0 && errno == ENOENT;
    if (!scratch) {
      m.file = std::make_unique<backing_file>(filename, size, static_cast<std::uint64_t>(offset),
                                              m.writes_back(), write_only && !volatile_data, true);
    }
    m.data = gpm::device_buffer<std::byte>(size);
    if (scratch || write_only) {
      m.data.fill_bytes(0);
    } else {
      transfer(m, 0, size, true);
    }
    std::lock_guard lock(registry_mutex);
    std::byte* base = m.data.data();
    registry().emplace(base, std::move(m));
    *addr = base;
  });
}

dError_t dragon_sync(void* addr, size_t size) {
  return guarded("dragon_sync", [&] {
    std::lock_guard lock(registry_mutex);
    const auto it = containing(addr, size);
    write_back(it->second, static_cast<std::uint64_t>(static_cast<std::byte*>(addr) - it->first),
               size);
  });
}

dError_t dragon_unmap(void* addr) {
  return guarded("dragon_unmap", [&] {
    std::lock_guard lock(registry_mutex);
    const auto it = registry().find(static_cast<const std::byte*>(addr));
    if (it == registry().end()) {
      throw dragon_failure{D_ERR_ARG, "not an address that dragon_map returned"};
    }
    write_back(it->second, 0, it->second.data.size());  // on failure the mapping stays
    registry().erase(it);
  });
}

const char* dragon_error_message(void) { return last_message.c_str(); }

}  // extern "C"
