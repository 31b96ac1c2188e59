// gpm::ooc::mapping: a byte range of a file mapped for GPU kernels that may be larger than GPU and
// host memory (DRAGON, SC'18), done in user space without a fault path: kernels access the data
// through gpm::ooc::array<T> (array.cuh), a software cache of lines in GPU memory; misses go
// through a queue in pinned host memory to host I/O threads, which serve them from a bounded
// pinned host cache and the file (pread/pwrite, O_DIRECT where the file system takes it), read
// ahead of sequential streams, and write dirty lines back. Design: docs/out-of-core.md.
//
//   gpm::ooc::mapping in("input.bin", n * sizeof(float));                     // read-write
//   gpm::ooc::mapping out("output.bin", n * sizeof(float), 0,
//                         {.mode = gpm::ooc::mode::write, .create = true});
//   gpm::launch(scale, blocks, 256, 0, stream, in.ref<float>(), out.ref<float>());
//   out.sync();   // the written bytes are in the file (fdatasync)
//
// Durability: sync() and unmap() (and the destructor) write every dirty byte back and fdatasync
// the file; data written by kernels since the last sync() is lost by a crash. By default a crash
// during sync() may leave the file with some lines new and some old; with
// `.crash_consistent = true` every sync() is an epoch commit through a redo log beside the file
// (epoch.hpp): a crash at any moment leaves the file at the previous or the new epoch.
// Host calls (sync, prefetch, stats, unmap) must not run while a kernel uses the mapping; sync and
// unmap wait for the device first. Thread-compatible: one host thread at a time per mapping.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gpm/ooc/array.cuh>
#include <gpm/ooc/epoch.hpp>
#include <gpm/ooc/status.hpp>
#include <gpm/platform/runtime.hpp>

namespace gpm::ooc {

enum class access_hint : std::uint8_t {
  sequential,  // read ahead of sequential streams of misses
  random,      // no read-ahead
};

struct mapping_options {
  ooc::mode mode = ooc::mode::read_write;
  // Create the file if it is missing and extend it to offset + size if it is shorter.
  bool create = false;
  // Bytes per cache line: a power of two, 64 KiB to 2 MiB on a GPU (256 bytes up on the host
  // emulator, for tests).
  std::uint64_t line_bytes = 1u << 20;
  // GPU cache (0: the whole mapping if it takes at most a quarter of free GPU memory, else that
  // quarter). At least one line; rounded down to lines.
  std::uint64_t gpu_cache_bytes = 0;
  // Pinned host cache, a hard cap (0: the whole mapping, at most 1 GiB). Rounded down to lines;
  // at least 2 lines per I/O thread plus 2.
  std::uint64_t host_cache_bytes = 0;
  access_hint hint = access_hint::sequential;
  // Lines read ahead when a sequential stream is seen (0: 32 MiB worth, at least 2 lines).
  std::uint32_t read_ahead_window = 0;
  // Most bytes one read-ahead read takes: consecutive queued lines go in one vectored read (0:
  // 16 MiB). Larger reads keep more of a disk's queue busy; the window bounds them (a run is
  // taken from the queued lines). Rounded down to lines, at least 1; at most 1 GiB.
  std::uint64_t read_ahead_run_bytes = 0;
  std::uint32_t io_threads = 2;     // 1..64
  std::uint32_t queue_slots = 128;  // misses in flight to the host at once (1..65536)
  // How long an idle I/O thread keeps polling for misses after its last work before it sleeps
  // between polls (up to 1 ms a sleep), in microseconds; at most 1,000,000. Longer polling answers
  // a kernel's first miss after a pause sooner, at the cost of a core per I/O thread while it
  // polls (on the host emulator, cores the kernels' threads need). 2 ms and 20 ms gave lavaMD out
  // of core no gain over 200 us on an H200 (ooc_ablation_io_poll).
  std::uint32_t idle_poll_us = 200;
  bool direct_io = true;            // O_DIRECT where the file system supports it
  // mode::volatile_data: directory of the private temporary file that holds lines spilled from
  // the host cache (default: the mapped file's directory, or the system's temporary directory).
  std::string spill_dir;
  // Crash-consistent sync (mode::read_write and mode::write, one file): the file changes only at
  // sync(), all or nothing. Dirty lines leaving the host cache between syncs are staged in a
  // private spill file (in spill_dir) instead of the file; sync() commits them as an epoch
  // through the range's epoch log (epoch.hpp), which mapping the range recovers first.
  bool crash_consistent = false;
  // Write-behind (mode::read_write and mode::write, not crash-consistent): an I/O thread with no
  // miss or read-ahead to serve writes dirty lines that have left the GPU cache back to the file
  // in runs (4 MiB and up where whole lines go to one file), while the kernels compute, so that
  // sync() and making room for misses find less to write. It stops by itself for data rewritten
  // pass after pass (once a quarter of the lines it wrote came back dirty), which sync then
  // writes once. false: dirty lines are written when room is needed and at sync, as before.
  bool write_behind = true;
  // Resident mapping: when the GPU cache holds every line of the mapping, map time loads them all
  // (large reads, double-buffered copies; mode::write and scratch data start at zero) and kernels
  // access line l in slot l directly, with no lookup, reference count, clock or miss; sync()
  // writes back exactly what was stored, as for any mapping. false: every access goes through the
  // cache (a mapping of which kernels use a few lines, or tests of the cache itself).
  bool resident = true;
};

// Telemetry since the mapping was made. GPU hits and misses count line acquisitions (the lanes of
// a warp on one line acquire it once; an element load that finds its line in the cache takes no
// reference and counts as neither); host hits and misses count the GPU misses that the host
// cache did or did not hold. A resident mapping acquires nothing: its kernels' accesses are
// neither hits nor misses (counting them would cost an atomic per access), and its load at map
// time counts in bytes_to_gpu and file_bytes_read only.
struct mapping_stats {
  std::uint64_t gpu_hits = 0;
  std::uint64_t gpu_misses = 0;
  std::uint64_t gpu_evictions = 0;   // dirty lines copied out of the GPU cache
  std::uint64_t gpu_io_errors = 0;   // accesses that returned status::io_error
  double gpu_wait_seconds = 0;       // kernel time waiting for lines, summed over leaders
  std::uint64_t bytes_to_gpu = 0;    // copied into the GPU cache
  std::uint64_t bytes_from_gpu = 0;  // copied out of it
  std::uint64_t host_hits = 0;
  std::uint64_t host_misses = 0;
  std::uint64_t host_evictions = 0;
  // Pinned memory the host cache holds now: it grows as lines arrive (a resident mapping's only
  // at the first sync of a mode::write or crash-consistent mapping).
  std::uint64_t host_cache_bytes_pinned = 0;
  std::uint64_t read_ahead_lines = 0;  // lines read ahead into the host cache
  std::uint64_t read_ahead_reads = 0;  // the reads that brought them (runs of lines, see above)
  double read_ahead_read_seconds = 0;  // those reads' summed wall time
  std::uint64_t read_ahead_hits = 0;   // of those, lines a GPU miss then used
  std::uint64_t file_bytes_read = 0;
  std::uint64_t file_bytes_written = 0;
  std::uint64_t write_behind_lines = 0;  // lines written behind (mapping_options::write_behind)
  std::uint64_t spill_bytes_written = 0;  // mode::volatile_data, crash-consistent staging
  std::uint64_t spill_bytes_read = 0;     // read back from the spill (staging) file
  // Disk space the spill (staging) file holds now: a crash-consistent mapping gives back the
  // blocks of what each epoch wrote in place, where the file system can punch holes.
  std::uint64_t spill_bytes_held = 0;
  std::uint64_t syncs = 0;  // sync() calls of a read_write or write mapping, unmap's included
  // fdatasync calls on the mapped files: a sync() with nothing written to them since the last one
  // (unmap after sync, say) makes none.
  std::uint64_t file_datasyncs = 0;
  std::string last_io_error;              // the most recent I/O failure, empty if none
  // Crash-consistent mappings: the epoch the file is at, epochs this mapping committed, the
  // bytes it wrote to the epoch log (records) and the bytes the epochs then wrote in place into
  // the files (not in file_bytes_written): the changed bytes reach the disk twice.
  std::uint64_t epoch = 0;
  std::uint64_t epochs_committed = 0;
  std::uint64_t log_bytes_written = 0;
  std::uint64_t log_bytes_applied = 0;
  std::uint64_t touch_hints = 0;  // lines kernels touch()ed that the host queued for read-ahead
  // A resident mapping's load at map time: its file reads and their summed wall time (0 for a
  // mapping that is not resident).
  std::uint64_t resident_reads = 0;
  double resident_read_seconds = 0;
  // GPU misses the I/O threads filled from the host cache, and the summed wall time each took, from
  // its start to its copy's end (host cache lookup, a file read where the line was not there, the
  // copy to the GPU; a thread has up to 8 under way at once, whose times overlap).
  std::uint64_t fills = 0;
  double fill_seconds = 0;
  // Where the mapping's construction (map time) went: its whole wall time and, of it, making its
  // caches and queue (GPU memory, pinned memory, the I/O service and its threads) and a resident
  // mapping's load (reads, copies to the GPU, zeroing what the files do not hold). The rest is
  // opening the files (and a spill file), recovering a file's epoch log and checking the options.
  // Of the making, the GPU cache and the queue's GPU and pinned memory (map_gpu_cache_seconds) and
  // the host cache (map_host_cache_seconds); the rest of it is the I/O service: its threads and
  // channels.
  double map_seconds = 0;
  double map_allocate_seconds = 0;
  double map_gpu_cache_seconds = 0;
  double map_host_cache_seconds = 0;
  double map_load_seconds = 0;
};

class mapping {
 public:
  // Maps bytes [offset, offset + size) of the file at `path`. Throws gpm::error:
  //   invalid_argument  size 0, offset + size overflows, a bad option, a special file (directory,
  //                     FIFO, device, socket), the file shorter than offset + size, or the
  //                     offset past its end (without create)
  //   not_found         the file is missing and create is off
  //   io                the file cannot be opened or created (e.g. read-only for a writing mode)
  //   busy              the range overlaps one mapped for writing, or is mapped for writing and
  //                     overlaps any other mapping (this or another process); or, for a mapping
  //                     that only reads, the range's epoch log holds a committed epoch that may
  //                     not be in the file yet (map it for writing once, or recover_epoch_log)
  //   out_of_memory     the GPU or host cache cannot be allocated
  //   corrupt, version, layout_mismatch
  //                     the range's epoch log (epoch.hpp) fails validation, or belongs to another
  //                     file or range: nothing is written or deleted
  // A mapping that writes first recovers the range's epoch log if there is one (see
  // recover_epoch_log; a striped range's lies beside its first file and names all of them: the
  // same files in the same order, or layout_mismatch); last_recovery() says what that did.
  // mode::volatile_data takes an empty path for zero-initialised scratch data.
  mapping(const std::string& path, std::uint64_t size, std::uint64_t offset = 0,
          const mapping_options& options = {});
  // Maps `size` bytes striped line by line over the files `paths` (n of them): line l of the
  // mapping is the (l / n)-th line of the range that starts at `offset` in file l % n, so n disks
  // serve a sequential stream together. Each file must hold its share of the lines (the last line
  // may be partial); the errors are those above, for each file, and invalid_argument when there
  // are more files than lines.
  mapping(const std::vector<std::string>& paths, std::uint64_t size, std::uint64_t offset = 0,
          const mapping_options& options = {});
  // Unmaps (see unmap()); if that fails, names on stderr what could not be written back.
  ~mapping();
  // A mapping moved from is empty: mapped() is false, unmap() does nothing, and every other
  // member throws invalid_argument.
  mapping(mapping&&) noexcept;
  mapping& operator=(mapping&&) noexcept;

  // The device view over the whole mapping as elements of T. Throws invalid_argument unless T's
  // size divides the mapping and the line size and, for mode::write, is a multiple of 4 bytes
  // (the granularity at which written bytes are tracked).
  template <class T>
  array<T> ref() const {
    check_element(sizeof(T));
    return array<T>(view());
  }

  // Writes every dirty byte of [offset, offset + bytes) of the mapping back to the file and
  // fdatasyncs it (mode::volatile_data: nothing to do). Waits for the device first. Throws
  // gpm::error (io) if a write fails, e.g. the disk is full: the dirty data is kept, so sync()
  // can be called again once the cause is fixed. Crash-consistent: the changes of the range are
  // one epoch (none if nothing changed), in the file entirely or not at all, whatever happens.
  void sync();
  void sync(std::uint64_t offset, std::uint64_t bytes);

  // Starts bringing [offset, offset + bytes) of the mapping into the host cache (read-ahead) and,
  // in `stream`, into the GPU cache (its first GPU-cache-capacity lines). mode::write and
  // resident mappings (every line is in the GPU already): nothing.
  void prefetch(std::uint64_t offset, std::uint64_t bytes, cudaStream_t stream = nullptr);

  // sync(), then stops the I/O threads and frees the caches; a volatile mapping's data is gone.
  // On failure the mapping stays mapped and usable. Idempotent.
  void unmap();
  bool mapped() const;

  mapping_stats stats() const;
  // What mapping the range recovered from its epoch log (all zero without one).
  const epoch_recovery& last_recovery() const;

  const std::string& path() const;  // the first file
  const std::vector<std::string>& paths() const;
  std::uint64_t size() const;
  std::uint64_t offset() const;
  const mapping_options& options() const;
  std::uint64_t gpu_cache_lines() const;
  std::uint64_t host_cache_lines() const;
  // Whether every line was loaded into the GPU cache at map time (mapping_options::resident).
  bool resident() const;
  bool direct_io() const;  // whether whole lines move with O_DIRECT

  struct impl;

 private:
  impl& self() const;  // throws invalid_argument once moved from
  void check_element(std::size_t bytes) const;
  detail::ooc::cache_view view() const;
  std::unique_ptr<impl> impl_;
};

}  // namespace gpm::ooc
