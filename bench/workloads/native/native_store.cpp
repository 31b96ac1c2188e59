// The persistent state of a native-persistence run and the modes' ways of making steps durable
// (see native_store.hpp).
#include "native_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <gpm/platform/checksum.hpp>
#include <gpm/platform/error.hpp>
#include <gpm/platform/persist.hpp>

#include "gpmbench/timing.hpp"

namespace gpmbench::native {

namespace {

constexpr std::uint64_t kMagic = 0x31565441'4e4d5047ull;  // "GPMNATV1"
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kMaxParams = 8;
constexpr std::size_t kMaxArrays = 8;

// The header of a run, written once when the run is created and never changed afterwards.
struct run_header {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t header_bytes;
  char workload[16];
  std::uint32_t params;
  std::uint32_t arrays;
  std::uint64_t param[kMaxParams];
  std::uint64_t array_bytes[kMaxArrays];
  std::uint64_t checksum;  // of everything above
};

std::uint64_t header_checksum(const run_header& h) {
  return gpm::checksum64(&h, offsetof(run_header, checksum));
}

run_header make_header(std::string_view workload, const std::vector<std::uint64_t>& params,
                       const std::vector<array_spec>& arrays) {
  gpm::require(workload.size() < sizeof(run_header::workload),
               "native run: a workload name must be shorter than 16 characters");
  gpm::require(params.size() <= kMaxParams && arrays.size() <= kMaxArrays,
               "native run: at most 8 parameters and 8 arrays");
  run_header h{};
  h.magic = kMagic;
  h.version = kVersion;
  h.header_bytes = sizeof(run_header);
  std::memcpy(h.workload, workload.data(), workload.size());
  h.params = static_cast<std::uint32_t>(params.size());
  h.arrays = static_cast<std::uint32_t>(arrays.size());
  for (std::size_t i = 0; i < params.size(); ++i) h.param[i] = params[i];
  for (std::size_t i = 0; i < arrays.size(); ++i) h.array_bytes[i] = arrays[i].bytes;
  h.checksum = header_checksum(h);
  return h;
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
  const run_header h = make_header(workload, params, arrays);
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
  gpm::persist(stored, sizeof h);
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
  if (header->bytes < sizeof(run_header)) {
    gpm::throw_error(gpm::errc::corrupt, where + ": the header object is too small");
  }
  run_header h;
  std::memcpy(&h, p.host_ptr<run_header>(header->offset), sizeof h);
  if (h.magic != kMagic) {
    gpm::throw_error(gpm::errc::corrupt,
                     where + ": the header's magic is wrong (not a native run)");
  }
  if (h.version != kVersion) {
    gpm::throw_error(gpm::errc::version, where + ": header format version " +
                                             std::to_string(h.version) + ", this build reads " +
                                             std::to_string(kVersion) + "; start a new run");
  }
  if (h.header_bytes != sizeof(run_header) || h.checksum != header_checksum(h)) {
    gpm::throw_error(gpm::errc::corrupt, where +
                                             ": the header's checksum does not match; the "
                                             "run is damaged, start a new run");
  }
  const run_header want = make_header(workload, params, arrays);
  if (std::memcmp(&h, &want, sizeof h) != 0) {
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
