// The host tier of a gpm::ooc mapping: a bounded cache of lines in pinned host memory (the copy
// engines transfer to and from it directly) over the mapped file (or the files it is striped
// over), or for mode::volatile_data over the source file and a private spill file (which also
// stages the lines of a crash-consistent mapping between epochs). Entries are
// chosen for reuse by a clock that prefers clean entries; a dirty entry is written to the file
// before its memory is reused, and on a write failure (disk full) it stays dirty, so nothing is
// lost. Shared by the I/O threads, sync() and read-ahead; one mutex guards the bookkeeping and no
// I/O runs under it.
//
// The pinned memory grows in segments as lines arrive, up to the cap: pinning a cap of gigabytes
// at map time (and freeing it at unmap) cost more than a streaming pass's reads. While no line
// has been read again after leaving the cache, the cache reuses clean lines that kernels have
// used, and dirty ones written back, before it grows, so a stream runs in a few segments; once a
// line comes back (a second pass over the data; volatile data, which exists to be read again,
// from the start) it grows before it evicts anything, up to the cap.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <gpm/ooc/detail/file.hpp>
#include <gpm/ooc/detail/protocol.hpp>
#include <gpm/ooc/status.hpp>
#include "staging.hpp"

namespace gpm::detail::ooc {

struct host_cache_config {
  gpm::ooc::mode mode = gpm::ooc::mode::read_write;
  std::uint64_t line_bytes = 0;
  std::uint64_t mapping_bytes = 0;
  std::uint64_t lines = 0;  // entries (the cap)
  // Crash-consistent sync: dirty lines leaving the host cache go to the spill file, never to the
  // mapped file, which changes only when an epoch is applied (see log_epoch).
  bool staged = false;
  // Pinned memory is allocated this many bytes at a time (at least a line).
  std::uint64_t segment_bytes = 32ull << 20;
  // Whether the first segment is pinned at construction (a cache that serves misses), or when the
  // first line arrives (a resident mapping's, which most mappings never fill).
  bool pin_at_start = true;
  // Background write-back (write_behind) asked for; the cache has it only where it applies: a
  // read_write or write cache over the mapped files, not staged.
  bool write_behind = false;
};

struct host_cache_counters {
  std::atomic<std::uint64_t> hits{0};
  std::atomic<std::uint64_t> misses{0};
  std::atomic<std::uint64_t> evictions{0};
  std::atomic<std::uint64_t> read_ahead_lines{0};
  std::atomic<std::uint64_t> read_ahead_reads{0};
  std::atomic<std::uint64_t> read_ahead_read_ns{0};  // the read-ahead reads' summed wall time
  std::atomic<std::uint64_t> read_ahead_hits{0};
  std::atomic<std::uint64_t> file_bytes_read{0};
  std::atomic<std::uint64_t> file_bytes_written{0};
  std::atomic<std::uint64_t> file_writes{0};  // writes of the mapped files (a run is one)
  std::atomic<std::uint64_t> spill_bytes_written{0};
  std::atomic<std::uint64_t> spill_bytes_read{0};    // bytes read back from the spill file
  std::atomic<std::uint64_t> write_behind_lines{0};  // lines write_behind wrote
};

class host_cache {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  static constexpr std::uint32_t kZeros = 0xfffffffeu;  // pin(): the line is zeros, no entry
  // Bytes one write-back write takes at most, in whole lines (at least one), as read-ahead reads
  // runs of 16 MiB: a line at a time, a virtual disk read 1 MiB lines at 1.0 GB/s, large reads at
  // 1.6 (docs/out-of-core.md, "Read-ahead").
  static constexpr std::uint64_t kWriteRunBytes = 16ull << 20;
  // write_behind's smallest run (at most a quarter of the cap, at least a line), and how many
  // lines written behind must have come back dirty before it stops.
  static constexpr std::uint64_t kWriteBehindRunBytes = 4ull << 20;
  static constexpr std::uint64_t kRewritesOff = 4;

  // Why an entry is pinned: to send it to the GPU (filled from the file if absent; counted as a
  // hit or miss), or to receive a line leaving the GPU (never read from the file).
  enum class purpose { fetch, store };

  // `files`: the mapped file, or the files it is striped over (none for volatile scratch
  // data); `spill`: volatile data and staged caches only (sized here to hold every line); none
  // for resident volatile data, whose lines never leave the GPU. Throws gpm::error
  // (out_of_memory) if pin_at_start and the first segment cannot be pinned.
  host_cache(const host_cache_config& config, std::vector<const backing_file*> files,
             const backing_file* spill);
  ~host_cache();
  host_cache(const host_cache&) = delete;
  host_cache& operator=(const host_cache&) = delete;

  // Pins the entry of `line`, making room (writing a dirty entry back if it must) and, for
  // purpose::fetch, filling it; for purpose::store the entry stays busy (no other thread uses its
  // bytes) until store(), or unpin() with discard. A fetch of a line that can only be zeros (not
  // in the cache or the spill file, and past what its file held, or scratch data never stored;
  // zeros_only) takes no entry and returns kZeros: the caller copies zeros, and unpins nothing.
  // Throws gpm::error (io) if no room can be made or the read fails: then nothing changed.
  std::uint32_t pin(std::uint64_t line, purpose why);
  // Undoes pin(). `discard`: the entry's contents are unreliable (a copy into it failed): a clean
  // entry is dropped.
  void unpin(std::uint32_t entry, bool discard = false);
  std::byte* data(std::uint32_t entry) const;
  // The line that left the GPU is now in pinned entry `entry`: at data(entry) already (`src`
  // null; the whole line), or at `src` with the bytes written marked in `mask` (one bit per 4
  // bytes; null: the whole line), merged over what the entry held.
  void store(std::uint32_t entry, const std::byte* src, const std::uint32_t* mask);

  // Reads lines [first, first + n) that are not present into free or clean entries (making room
  // may write a dirty entry back, off the kernels' path), stopping at the first line without
  // one; lines that lie one after another in the one mapped file go in one vectored read (a virtual
  // disk read 1 MiB lines at 1.0 GB/s, the chunked pipeline's large reads at 1.6). Throws
  // gpm::error (io) if a read fails: its lines are not kept.
  void read_ahead(std::uint64_t first, std::uint64_t n);

  // The resident load at map time, before any other use of the cache: reads lines
  // [first, first + n) of the mapping from the files (zeros for scratch data; past the mapping's
  // end, and past what the file held before create extended it, zeros without reading) into
  // `dst`, n lines of room, with one read where they are contiguous in one file.
  // Bypasses the entries; counts file_bytes_read. Throws gpm::error (io).
  void read_lines(std::uint64_t first, std::uint64_t n, std::byte* dst);
  // Whether the mapping is one file read with O_DIRECT: its reads go to the device in the order
  // they are made, so one reader keeps them sequential (readers at several offsets at once read a
  // virtual disk 15-35% slower than one: docs/out-of-core.md, "Resident mappings").
  bool direct_file() const { return files_.size() == 1 && files_.front()->direct(); }
  // Lines [0, held_lines()) of the mapping are all that may hold data in the files (what each held
  // before create extended it, backing_file::held; none for scratch data); the lines after them
  // can only be zeros.
  std::uint64_t held_lines() const;
  // Whether a fetch may find a line that can only be zeros (pin returns kZeros): scratch data, or
  // a file that held less than the mapping before create extended it.
  bool may_fill_zeros() const;
  // The disk (st_dev) read-ahead reads from: the first file's, the spill file's for scratch data,
  // 0 for neither.
  std::uint64_t disk() const;
  // The write-back of a resident read_write mapping at sync: lines [first, first + n), n lines
  // at `src`, written to the files with one write where they are contiguous in one file (the last
  // line's valid bytes only). Bypasses the entries, which such a mapping never fills; counts
  // file_bytes_written. Throws gpm::error (io; ENOSPC: the disk is full).
  void write_lines(std::uint64_t first, std::uint64_t n, const std::byte* src);
  // Entries with pinned memory now (at most the cap).
  std::uint64_t allocated_entries() const;

  // Writes the dirty entries of lines [first, last] back. Throws gpm::error (io) naming the first
  // failure after trying them all; failed entries stay dirty.
  void write_back(std::uint64_t first, std::uint64_t last);

  // Background write-back, for an I/O thread with nothing else to do: writes one run of dirty
  // entries that nobody uses to the mapped file (the lowest such line and the dirty lines after
  // it, as a dirty victim is written when room is made), so that sync() and making room find
  // less to write and the disk writes while the kernels compute. Where lines go in runs (one
  // file, mode::read_write), a run shorter than kWriteBehindRunBytes and a quarter of the cap
  // waits for more. Off where the config says so, and once lines written behind keep coming back
  // dirty (data rewritten pass after pass, as srad's image: at least kRewritesOff of them, a
  // quarter of those written behind), when writing them once at sync costs the disk less. False
  // when it wrote nothing. Throws gpm::error (io) as write_back does; the run stays dirty.
  bool write_behind();
  // Whether `line`'s entry is being written to a file now (by write-behind, or to make room).
  bool writing(std::uint64_t line) const;
  // Whether write_behind may find something to write: on, not stopped, and lines stored since it
  // last found nothing. Takes no lock (the I/O threads ask whenever they are idle).
  bool write_behind_wanted() const {
    return config_.write_behind && stores_unseen_.load(std::memory_order_relaxed) != 0 &&
           !behind_off_.load(std::memory_order_relaxed);
  }

  // Staged caches: calls emit(line, bytes, valid, mask, mask_words, staged_at) for every change
  // of lines [first, last] since the last epoch, lines in ascending order and, for a line, older
  // changes first (its staged copy, which lies at byte staged_at of the spill file, then its
  // dirty entry, staged_at kNotStaged); mask null: the line's `valid` bytes all changed. The
  // caller must keep kernels and other syncs away until it ends the epoch (finish_epoch or
  // release_epoch). Until then the range's dirty entries stay pinned, and the staged copies
  // emitted stay where they are: a line staged again before its epoch is in the file goes to its
  // other slot of the spill file (each line has two), so that the committed epoch's records may
  // name their bytes there. Throws gpm::error (io) if a staged line cannot be read, or what emit
  // throws (the epoch then ends as release_epoch(false)).
  static constexpr std::uint64_t kNotStaged = ~0ull;
  using epoch_sink = void (*)(void* ctx, std::uint64_t line, const std::byte* bytes,
                              std::uint64_t valid, const std::uint32_t* mask,
                              std::uint32_t mask_words, std::uint64_t staged_at);
  void log_epoch(std::uint64_t first, std::uint64_t last, epoch_sink emit, void* ctx);
  // Staged caches: the changes log_epoch emitted are in the file now: lines [first, last] are
  // clean and read from the file again. Their staged copies' blocks are given back by a thread of
  // their own, off the sync's path (see trimmer_).
  void finish_epoch(std::uint64_t first, std::uint64_t last);
  // Staged caches: ends the epoch log_epoch began without its changes reaching the file.
  // `committed`: its log committed it (it is durable there and is applied later), so the staged
  // copies it names stay where they are until the line is staged again; otherwise nothing holds
  // them and staging a line again goes over its copy, as between epochs.
  void release_epoch(bool committed);

  const host_cache_counters& counters() const { return counters_; }

 private:
  struct entry {
    std::uint64_t line = kNoLine;
    std::uint32_t pins = 0;
    bool busy = false;     // being filled or replaced outside the lock: nobody may use it
    bool writing = false;  // being written to a file outside the lock: fetches may read it
    bool dirty = false;
    bool whole = false;               // mode::write: every byte of the line is valid
    bool referenced = false;          // the clock's second chance
    bool read_ahead = false;          // filled by read-ahead and not used yet
    bool behind = false;              // written back by write_behind, not stored since
    std::vector<std::uint32_t> mask;  // mode::write: bytes valid, one bit per 4 bytes
  };

  // What one sweep of the clock over the allocated entries found (kNone: nothing of that kind);
  // it stops at the first clean one.
  struct victims {
    std::uint32_t clean = kNone;   // clean, unreferenced, used (or never asked for)
    std::uint32_t dirty = kNone;   // unreferenced, must be written back first
    std::uint32_t unused = kNone;  // read ahead, not used yet
  };
  victims sweep();
  // An allocated entry holding no line (free_ > 0; lock held).
  std::uint32_t take_free();
  // An entry for a new line (lock held; unlocked while a segment is pinned or a dirty victim
  // written back), pinned by nobody, holding no line or a clean one; kNone only for read-ahead
  // (nothing can go without wasting a read). Throws what writing a dirty victim back throws.
  std::uint32_t room(std::unique_lock<std::mutex>& lock, bool for_read_ahead);
  // Pins one more segment outside the lock (false: none could be pinned; the cache stops growing).
  // Throws gpm::error (out_of_memory) if the cache has no pinned memory at all then.
  bool grow(std::unique_lock<std::mutex>& lock);
  // Notes that `line` is read from the file again after it left the cache (lock held).
  void note_reread(std::uint64_t line);
  // Installs `line` in the free or clean entry e (lock held), pinned once.
  void install(std::uint32_t e, std::uint64_t line, bool busy, bool by_read_ahead);
  // Makes entry e free, holding no line (lock held).
  void forget(std::uint32_t e);
  // Runs `io` on entries `run` outside the lock with `flag` (busy, or writing) set on each;
  // rethrows its failure after `undo`.
  template <class Io, class Undo>
  void unlocked_io(std::unique_lock<std::mutex>& lock, std::span<const std::uint32_t> run,
                   bool entry::*flag, Io&& io, Undo&& undo);
  // Whether I/O is under way on x outside the lock (busy or writing): nothing may change it.
  static bool in_io(const entry& x) { return x.busy || x.writing; }
  // Makes a dirty victim clean by writing it back, with the dirty lines that follow it in the
  // one mapped file and nobody uses, up to kWriteRunBytes, in one write (lock held on entry and
  // return; unlocked while writing, the run's entries `writing`: fetches may pin and read them
  // meanwhile, nothing else may use them).
  void clean(std::unique_lock<std::mutex>& lock, std::uint32_t e, bool behind = false);
  // Whether clean() writes runs of lines (whole lines to the one mapped file).
  bool writes_runs() const;
  // Writes the lines of entries `run` (one, or consecutive lines of the one mapped file) back;
  // runs outside the lock, so it touches no bookkeeping.
  void write_entries(std::span<const std::uint32_t> run);
  // Records that the spill file holds entry x's line now (lock held).
  void note_spilled(const entry& x);
  // Reads `line` (from the spill file, the files, or zeros for scratch data) into dst, a line of
  // room, zeroing what the mapping or the file does not hold (stored_bytes).
  void read_line(std::uint64_t line, bool from_spill, std::byte* dst);
  // read_ahead's reads of `run` (line, entry: installed, busy, pinned once), consecutive lines of
  // the one file unless the run is a single line; then the entries are unpinned and counted, or,
  // if the read failed, forgotten. Clears `run`. Throws gpm::error (io).
  void read_run(std::unique_lock<std::mutex>& lock,
                std::vector<std::pair<std::uint64_t, std::uint32_t>>& run);
  // Writes entry x's line to the file or the spill file; runs outside the lock, so it touches
  // no bookkeeping.
  void write_entry(const entry& x, const std::byte* src);
  // log_epoch's record of dirty entry d.second, which holds line d.first.
  void emit_entry(const std::pair<std::uint64_t, std::uint32_t>& d, epoch_sink emit,
                  void* ctx) const;
  bool in_spill(std::uint64_t line) const;
  // Where the spill file holds `line`: at line * line_bytes, or, staged, in its slot (slot_).
  std::uint64_t spill_at(std::uint64_t line) const;
  // Under the lock, before a line is staged: a copy an epoch's records name stays, the line goes
  // to its other slot (and starts there with nothing staged).
  void restage(std::uint64_t line);
  // Under the lock: unpins log_epoch's entries; `unfreeze`: no epoch's records name a staged copy
  // any more.
  void end_epoch(bool unfreeze);
  // Whether `line`, absent from the cache, can only be zeros: not in the spill file, and scratch
  // data or past what its file held (lock held).
  bool zeros_only(std::uint64_t line) const;
  // The bytes of `line` inside the mapping (the last line may be partial).
  std::uint64_t valid_bytes(std::uint64_t line) const;
  // Of `bytes` bytes at byte `at` of `file`'s range, how many from `at` on the file may hold data
  // in: none past what it held before create extended it (backing_file::held, which writes move
  // on). The rest can only be zeros and is never read: an output mapped read_write on a fresh
  // file read its every line from the file's holes before its kernels overwrote them.
  static std::uint64_t stored_bytes(const backing_file& file, std::uint64_t at,
                                    std::uint64_t bytes);
  // The file holding `line` and the line's byte offset in that file's range.
  std::pair<const backing_file*, std::uint64_t> place(std::uint64_t line) const;

  host_cache_config config_;
  std::vector<const backing_file*> files_;
  const backing_file* spill_;
  std::uint32_t mask_words_;
  std::uint64_t per_segment_;  // entries per segment
  // segment_[k]: the pinned memory of entries [k * per_segment_, (k + 1) * per_segment_), set
  // under m_ before any of them is handed out and never moved (the array is sized at
  // construction), so data() reads it without the lock.
  std::vector<std::byte*> segment_;
  // Owns segment_'s memory, lent by the process's pool of pinned memory (staging.hpp), which it
  // goes back to with the cache: pinned per mapping, a mapping of a few lines paid as much to pin
  // and unpin its first segment as to read its data.
  std::vector<std::unique_ptr<staging_buffer>> pinned_;

  mutable std::mutex m_;
  std::condition_variable cv_;
  std::vector<entry> entries_;
  std::unordered_map<std::uint64_t, std::uint32_t> index_;
  // Volatile data and staged caches: lines whose newest copy left the host cache for the spill
  // file; for a staged mode::write cache also the bytes of it written (one bit per 4 bytes).
  // Guarded by m_ like the entries.
  std::vector<bool> spilled_;
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> spill_mask_;
  // Staged caches, per line: which of its two slots of the spill file holds its staged copy, and
  // whether an epoch's records name that copy (log_epoch), so that staging it again must go to
  // the other slot. Bytes, not bits: write_entry reads a line's slot without the lock while
  // others change under it. Guarded by m_.
  std::vector<std::uint8_t> slot_;
  std::vector<std::uint8_t> frozen_;
  // Staged caches: gives back the blocks of the slots an epoch's lines were staged in, while the
  // lines stage into their other slots (finish_epoch flips them). Punching a staging file's
  // written-back blocks took 0.2 s of a 0.4 s sync on the host emulator. Joined before a slot is
  // flipped again (so nothing is staged into a slot being punched) and at destruction.
  std::thread trimmer_;
  void join_trimmer();
  // The dirty entries log_epoch pinned (line, entry), until the epoch ends.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> epoch_pins_;
  std::uint64_t hand_ = 0;
  std::uint64_t allocated_ = 0;  // entries with memory: whole segments, at most cap_
  std::uint64_t cap_;            // config_.lines, or what was pinned when pinning more failed
  std::uint64_t free_ = 0;       // allocated entries holding no line
  // write_behind: of the lines it wrote (counters_.write_behind_lines), those stored again
  // afterwards (under m_).
  std::uint64_t behind_rewritten_ = 0;
  std::atomic<bool> behind_off_{false};          // stopped (too many rewrites)
  std::atomic<std::uint64_t> stores_unseen_{0};  // stores since write_behind found nothing
  bool growing_ = false;                         // a thread is pinning a segment
  bool grow_first_ = false;                      // lines are read again: grow before evicting
  std::vector<bool> evicted_;                    // per line of the mapping: it left the cache once
  host_cache_counters counters_;
};

}  // namespace gpm::detail::ooc
