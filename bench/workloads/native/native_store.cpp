// The persistent state of a native-persistence run and the modes' ways of making steps durable
// (see native_store.hpp).
#include "native_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/error.hpp>
#include <gpm/platform/persist.hpp>
#include <gpm/pool/object_header.hpp>

#include "gpmbench/timing.hpp"

namespace gpmbench::native {

namespace {

constexpr std::size_t kMaxParams = 8;
constexpr std::size_t kMaxArrays = 8;

// The header of a run, written once when the run is created and never changed afterwards: the
// common object header, then what the run was made for.
struct run_header {
  gpm::format::object_header common;
  char workload[16];
  std::uint32_t params;
  std::uint32_t arrays;
  std::uint64_t param[kMaxParams];
  std::uint64_t array_bytes[kMaxArrays];
};
static_assert(sizeof(run_header) == 216 && offsetof(run_header, common) == 0);

// Version 2.0 put the common object header first; its magic keeps 1.0's bytes, so a run of 1.0
// is refused as older, not as foreign.
constexpr gpm::format::object_kind kKind{
    "native run header", {'G', 'P', 'M', 'N', 'A', 'T', 'V', '1'}, 2, 0, sizeof(run_header)};

run_header make_header(std::string_view workload, const std::vector<std::uint64_t>& params,
                       const std::vector<array_spec>& arrays) {
  gpm::require(workload.size() < sizeof(run_header::workload),
               "native run: a workload name must be shorter than 16 characters");
  gpm::require(params.size() <= kMaxParams && arrays.size() <= kMaxArrays,
               "native run: at most 8 parameters and 8 arrays");
  run_header h{};
  std::memcpy(h.workload, workload.data(), workload.size());
  h.params = static_cast<std::uint32_t>(params.size());
  h.arrays = static_cast<std::uint32_t>(arrays.size());
  for (std::size_t i = 0; i < params.size(); ++i) h.param[i] = params[i];
  for (std::size_t i = 0; i < arrays.size(); ++i) h.array_bytes[i] = arrays[i].bytes;
  return h;
}

// Whether two headers describe the same run: the bytes after their common parts.
bool same_run(const run_header& a, const run_header& b) {
  constexpr std::size_t own = sizeof(gpm::format::object_header);
  return std::memcmp(reinterpret_cast<const char*>(&a) + own,
                     reinterpret_cast<const char*>(&b) + own, sizeof a - own) == 0;
}

std::string object_name(std::string_view workload, std::string_view part) {
  return std::string(workload) + "." + std::string(part);
}

}  // namespace

std::string mode_name(way w) {
  switch (w) {
    case way::gpm: return "gpm";
    case way::gpm_ndp: return "gpm-ndp";
    case way::cap_mm: return "cap-mm";
    case way::cap_fs: return "cap-fs";
    case way::cpu: return "cpu";
  }
  return "?";
}

std::uint64_t run_store::pool_bytes(const std::vector<array_spec>& arrays) {
  std::uint64_t bytes = 0;
  for (const array_spec& a : arrays) bytes += (a.bytes + 4095) & ~4095ull;
  return pool_bytes_for(bytes + 2 * 4096);  // + header and progress objects
}

run_store run_store::create(gpm::pool& p, std::string_view workload,
                            const std::vector<std::uint64_t>& params,
                            const std::vector<array_spec>& arrays) {
  run_header h = make_header(workload, params, arrays);
  h.common = gpm::format::make_header(kKind, sizeof h);
  gpm::format::seal_header(&h);
  run_store s(p, arrays);
  // The arrays and the progress word exist before the header: a crash before the header is
  // durable leaves a run that open() refuses (not_found), never a header without its arrays.
  for (const array_spec& a : arrays) {
    s.offsets_.push_back(p.allocate(object_name(workload, a.name), a.bytes, 4096));
  }
  s.progress_ = p.allocate(object_name(workload, "progress"), sizeof(std::uint64_t), 128);
  const std::uint64_t off = p.allocate(object_name(workload, "header"), sizeof(run_header), 128);
  auto* stored = p.host_ptr<run_header>(off);
  std::memcpy(stored, &h, sizeof h);
  gpm::persist_at("native.store.header", stored, sizeof h);
  return s;
}

run_store run_store::open(gpm::pool& p, std::string_view workload,
                          const std::vector<std::uint64_t>& params,
                          const std::vector<array_spec>& arrays) {
  const std::string where = "pool " + p.path() + ", " + std::string(workload) + " run";
  const auto header = p.find(object_name(workload, "header"));
  if (!header) {
    gpm::throw_error(gpm::errc::not_found, where + ": no header; the pool holds no " +
                                               std::string(workload) +
                                               " run to resume (start a new run instead)");
  }
  gpm::format::validate_header(p.host_ptr<char>(header->offset), header->bytes, kKind, where);
  run_header h;
  std::memcpy(&h, p.host_ptr<run_header>(header->offset), sizeof h);
  if (!same_run(h, make_header(workload, params, arrays))) {
    gpm::throw_error(gpm::errc::invalid_argument,
                     where +
                         ": the run in the pool was made for other parameters (sizes, seed or "
                         "input); resume with the parameters it was started with");
  }
  run_store s(p, arrays);
  for (const array_spec& a : arrays) {
    const gpm::pool_object o = p.get(object_name(workload, a.name));
    if (o.bytes != a.bytes) {
      gpm::throw_error(gpm::errc::corrupt, where + ": array " + a.name + " has the wrong size");
    }
    s.offsets_.push_back(o.offset);
  }
  s.progress_ = p.get(object_name(workload, "progress")).offset;
  return s;
}

std::uint64_t run_store::file_offset(int array) const {
  std::uint64_t off = 0;
  for (int i = 0; i < array; ++i) off += arrays_[i].bytes;
  return off;
}

std::uint64_t run_store::file_bytes() const {
  return file_offset(arrays()) + sizeof(std::uint64_t);
}

std::uint64_t run_store::progress() const {
  // Host code (compiled without the CUDA atomics headers): the word is aligned and 8 bytes.
  return std::atomic_ref<std::uint64_t>(*progress_host()).load(std::memory_order_acquire);
}

void run_store::publish(std::uint64_t word) const {
  std::atomic_ref<std::uint64_t>(*progress_host()).store(word, std::memory_order_release);
  gpm::write_back(progress_host(), sizeof(std::uint64_t));
}

void run_store::reset() const {
  publish(0);  // first: a crash while zeroing leaves a run that restarts, not one that resumes
  for (int i = 0; i < arrays(); ++i) {
    std::memset(host<unsigned char>(i), 0, bytes(i));
    gpm::write_back(host<unsigned char>(i), bytes(i));
  }
}

sink::sink(way w, const run_store& store, const std::string& file, std::uint64_t staging_bytes)
    : way_(w), store_(store) {
  if (w == way::gpm_ndp || w == way::cap_mm || w == way::cpu) {
    team_ = std::make_unique<cpu_team>();
  }
  if (w == way::gpm_ndp) ndp_ = std::make_unique<ndp_persister>(*team_);
  if (w == way::cap_mm) mm_ = std::make_unique<cap_mm>(*team_, staging_bytes);
  if (w == way::cap_fs) {
    gpm::require(!file.empty(), "native run: cap-fs needs a file");
    fs_ = std::make_unique<cap_fs>(file, staging_bytes);
  }
}

sink::~sink() = default;

cpu_team& sink::team() {
  gpm::require(team_ != nullptr, "native run: this mode has no CPU team");
  return *team_;
}

void sink::commit(cudaStream_t s, const std::vector<array_range>& ranges, std::uint64_t word) {
  gpm::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize (native step)");
  // The step is computed; in the baselines its results are not durable yet (crash-image tests).
  gpm::crash_point("native.step.computed");
  switch (way_) {
    case way::gpm: return;  // the kernel persisted its stores and published the word itself
    case way::cpu:
      store_.publish(word);  // the CPU step wrote back what it stored
      return;
    case way::gpm_ndp:
      for (const array_range& r : ranges) {
        ndp_->persist(store_.host<unsigned char>(r.array) + r.offset, r.bytes);
      }
      break;
    case way::cap_mm:
      for (const array_range& r : ranges) {
        mm_->persist(store_.host<unsigned char>(r.array) + r.offset, r.device_src, r.bytes, s);
      }
      break;
    case way::cap_fs: {
      for (const array_range& r : ranges) {
        fs_->write(store_.file_offset(r.array) + r.offset, r.device_src, r.bytes, s);
      }
      fs_->sync();  // the data is durable before the word that covers it
      write_file_word(word);
      bytes_persisted_ += sizeof word;
      return;
    }
  }
  store_.publish(word);
  bytes_persisted_ += sizeof word;
}

std::uint64_t sink::bytes_persisted() const {
  return bytes_persisted_ + (ndp_ ? ndp_->bytes_persisted() : 0) +
         (mm_ ? mm_->bytes_persisted() : 0) + (fs_ ? fs_->bytes_persisted() : 0);
}

void sink::finish(cudaStream_t s, std::uint64_t word) {
  gpm::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize (native finish)");
  if (way_ == way::cap_fs) {
    write_file_word(word);
  } else {
    store_.publish(word);
  }
  bytes_persisted_ += sizeof word;
}

void sink::write_file_word(std::uint64_t word) {
  const int fd = ::open(fs_->path().c_str(), O_WRONLY | O_CLOEXEC);
  const auto at = static_cast<off_t>(store_.file_offset(store_.arrays()));
  const bool ok =
      fd >= 0 && ::pwrite(fd, &word, sizeof word, at) == sizeof word && ::fsync(fd) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok) {
    gpm::throw_error(gpm::errc::io, "cap-fs: cannot write the progress word to " + fs_->path() +
                                        ": " + std::strerror(err));
  }
}

void sink::read_durable(int array, void* dst) const {
  const std::uint64_t bytes = store_.bytes(array);
  if (fs_ == nullptr) {
    std::memcpy(dst, store_.host<unsigned char>(array), bytes);
    return;
  }
  const int fd = ::open(fs_->path().c_str(), O_RDONLY | O_CLOEXEC);
  std::uint64_t done = 0;
  while (fd >= 0 && done < bytes) {
    const ssize_t n = ::pread(fd, static_cast<char*>(dst) + done, bytes - done,
                              static_cast<off_t>(store_.file_offset(array) + done));
    if (n <= 0) break;
    done += static_cast<std::uint64_t>(n);
  }
  if (fd >= 0) ::close(fd);
  if (done != bytes) gpm::throw_error(gpm::errc::io, "cap-fs: cannot read back " + fs_->path());
}

run_summary run_in_pool(const std::string& path, const gpm::pool_options& options,
                        std::string_view workload, const std::vector<std::uint64_t>& params,
                        const std::vector<array_spec>& arrays, way how, bool resume,
                        const std::function<run_summary(const run_store&, sink&)>& solve) {
  gpm::require(how != way::cap_fs,
               "native run: cap-fs keeps its results in a file, not in the pool, so it cannot be "
               "resumed from a pool; use gpm, gpm-ndp, cap-mm or cpu");
  gpm::pool pool = resume
                       ? gpm::pool::open(path, kLayout, options)
                       : gpm::pool::create(path, run_store::pool_bytes(arrays), kLayout, options);
  const run_store st = resume ? run_store::open(pool, workload, params, arrays)
                              : run_store::create(pool, workload, params, arrays);
  sink out(how, st);
  run_summary r;
  const double seconds = seconds_on_host([&] { r = solve(st, out); });
  r.seconds = seconds;
  pool.close();
  return r;
}

geometry kernel_geometry(geometry requested) {
  if (requested.blocks != 0) return requested;
  const run_options options;
  const gpm::device_info device = gpm::query_device();
  const mode_context ctx{options, device, "", ""};
  return filling_geometry(ctx);
}

}  // namespace gpmbench::native
