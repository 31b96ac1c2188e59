// The host side of a heap object in its pool (format: include/gpm/tx/detail/format.hpp): building
// and validating the header, the crash-atomic `applied` root, reading redo records back from the
// logs, and the reproducer, which applies records to the home image in commit order while kernels
// run and replays them at recovery. Host code only, free of device code (plain C++ in both
// backends); src/tx uses it, nothing else.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gpm/tx/detail/format.hpp>
#include <gpm/tx/detail/log_reader.hpp>

namespace gpm::detail::tx {

// The header of a new heap (checksum included). Throws invalid_argument for a bad geometry.
heap_header make_header(std::uint64_t words, std::uint32_t logs, std::uint64_t log_bytes);
// The header at `object` (a pool object of `object_bytes` bytes, its common header validated by
// pool::open_object): checks the geometry against the sizes. Throws corrupt, naming `what`.
heap_header check_geometry(const void* object, std::uint64_t object_bytes, const std::string& what);

// The home-image words written since they were last persisted, as one range: what a pass
// persists at once.
struct touched_words {
  std::uint64_t lo = ~std::uint64_t{0};
  std::uint64_t hi = 0;
  void add(std::uint64_t word) {
    lo = word < lo ? word : lo;
    hi = word > hi ? word : hi;
  }
  bool empty() const { return lo > hi; }
};

// The heap object as the host sees it (its mapping of the pool).
class heap_media {
 public:
  heap_media(char* object, const heap_header& h, std::string what);

  const heap_layout& layout() const { return layout_; }
  const std::string& what() const { return what_; }
  std::uint64_t salt() const { return reader_.salt; }
  std::uint32_t* home() const;
  log_control& control(std::uint32_t log) const;

  // The newer valid root record; throws corrupt when neither copy is valid.
  root_record root() const;
  // Writes {applied, epoch, undo} into the older slot with the next seq and persists it at the
  // persist site `site` (tx_heap.cu lists them): crash-atomic.
  void write_root(std::uint64_t applied, std::uint64_t epoch, bool undo, const char* site);
  // The record at stream position `pos` of `log` if one of `epoch` with a valid checksum lies
  // there whose words are all in the heap (a torn, stale or foreign one never does); a member of a
  // striped group is read with its group's stride; its seq is the one nearest `near` (the
  // applied seq) that its head's low bits allow. `undo`: an undo record (its pairs hold old
  // values) instead of a redo record.
  std::optional<record> read_record(std::uint32_t log, std::uint64_t pos, std::uint64_t epoch,
                                    std::uint64_t near, bool undo = false) const;
  // The plain record or the whole striped group that starts at `pos`, if every member is there.
  std::optional<log_unit> read_unit(std::uint32_t log, std::uint64_t pos, std::uint64_t epoch,
                                    std::uint64_t near) const;
  // Starts loading the log's chunks from stream position `pos` into the CPU's caches: where the
  // unit after the one just read lies. The reproducer reads the logs a unit at a time, in turns
  // across hundreds of logs, which the hardware's prefetchers do not follow.
  void prefetch(std::uint32_t log, std::uint64_t pos) const;
  // Writes the record's pairs into the home image (not persisted), adding their words to `touched`.
  void apply(const record& r, touched_words& touched) const;
  // The same for the unit's records whose seq is above `after` and at most `through`; returns
  // how many.
  std::uint64_t apply(const log_unit& u, std::uint64_t after, std::uint64_t through,
                      touched_words& touched) const;
  // Persists the touched words of the home image at the persist site `site`.
  void persist_home(const touched_words& touched, const char* site) const;

 private:
  // The host reads a slot with an atomic load (relaxed): kernels may be writing the logs.
  struct host_load {
    std::uint64_t operator()(const std::uint64_t* slot) const;
  };

  void apply_pairs(std::uint32_t log, std::uint64_t pos, std::uint32_t width, std::uint32_t count,
                   touched_words& touched) const;

  char* object_;
  heap_layout layout_;
  log_reader<host_load> reader_;
  std::string what_;
};

// The logs whose next unit has been read, by that unit's first seq, the lowest on top: a binary
// heap whose top can be replaced with one sift, the merge's step (the log just applied from goes
// back in with its next unit).
class log_queue {
 public:
  struct entry {
    std::uint64_t seq;
    std::uint32_t log;
  };
  bool empty() const { return heap_.empty(); }
  const entry& top() const { return heap_.front(); }
  // The entry with the lowest seq after the top (a child of the top); null with one entry.
  const entry* second() const;
  void push(entry e);
  void pop();
  void replace_top(entry e);
  void clear() { heap_.clear(); }

 private:
  // Puts `e` at `i` or below it, moving lower children up.
  void sift_down(std::size_t i, entry e);
  std::vector<entry> heap_;
};

// Applies persisted records to the home image in sequence order, never past a gap. Each log's
// records lie in sequence order (engine.cuh, "Commit order"), so the applied prefix grows by a
// merge of the logs' streams: the logs queued by the first seq of their next unit, each unit read
// and validated once, its pairs applied from the log itself.
class reproducer {
 public:
  // A pass stops applying at the end of the unit that brings it to kBatch records, then persists
  // them, flips the root and frees their log space: logs filling faster than passes drain them
  // get space back early.
  static constexpr std::uint64_t kBatch = 1 << 16;

  explicit reproducer(heap_media media);

  // At open: in an undo epoch rolls back every undo record not retired; otherwise replays the
  // records beyond the applied root up to the first gap or torn record; persists what it wrote,
  // then starts a new epoch (which invalidates every older record) with empty logs, of undo
  // records when `undo_next`. Idempotent: a crash at any point, then recover() again, gives the
  // same home image.
  struct recovered {
    std::uint64_t replayed = 0;     // records applied
    std::uint64_t discarded = 0;    // valid records after the first gap
    std::uint64_t rolled_back = 0;  // undo records rolled back
  };
  recovered recover(bool undo_next);
  // Undo epochs: every commit up to `seq` is in the home image (kernels wrote it there).
  void mark_applied(std::uint64_t seq);
  // While kernels run: reads new records, applies those that extend the applied prefix (a batch
  // at most: the pass stops at the end of the unit that reaches kBatch, or at the end of a unit
  // once `yield` is nonzero), flips the root, and frees the log space of applied records. Returns
  // how many it applied.
  std::uint64_t pass(const std::atomic<std::uint32_t>* yield = nullptr);

  // Records were applied elsewhere (gpu_replay) and their home words persisted: every commit up
  // to `seq` is in the home image, and each log's first unit not applied lies at positions[log].
  // Flips the root and frees their log space, as a pass does after applying.
  void advance(std::uint64_t seq, const std::vector<std::uint64_t>& positions);
  // At open, before recover(): starts every log's stream at its published head (where recovery
  // reads from), so that gpu_replay can apply the records there first.
  void start_at_heads();
  // Per log: the stream position of its first unit not applied.
  std::vector<std::uint64_t> positions() const;
  // Whether some log holds a record of this epoch at its cursor (one may extend the prefix).
  bool any_ready() const;

  std::uint64_t applied() const { return applied_; }
  std::uint64_t epoch() const { return epoch_; }
  bool undo_epoch() const { return undo_; }
  heap_media& media() { return media_; }
  const heap_media& media() const { return media_; }

 private:
  // Per log: the stream position of its first unit not applied, and that unit once read.
  struct cursor {
    std::uint64_t pos = 0;
    std::optional<log_unit> next;
  };

  // Starts every log's stream at `heads` (nullptr: at 0), nothing read.
  void restart(const std::vector<std::uint64_t>* heads);
  // Undo epochs: restores the old values of every undo record still valid; returns how many.
  std::uint64_t roll_back();
  // Reads the unit at the log's cursor into its `next`, passing over (the cursor moves) whole
  // units at or below applied_, which the home image has: one left to stand for its log in the
  // merge's queue would hide a later unit of that log that shares a number with the units being
  // applied (crafted logs only). Returns whether a unit is there.
  bool load_next(std::uint32_t log);
  // Applies up to `limit` records that continue the prefix (not persisted); returns how many.
  std::uint64_t apply_ready(std::uint64_t limit, touched_words& touched,
                            const std::atomic<std::uint32_t>* yield = nullptr);
  // Valid records left in the logs from their cursors on (after the first gap).
  std::uint64_t unreachable() const;
  // Publishes each log's cursor as its head: the space of applied records may be reused.
  void free_log_space();
  // After the home words of what was applied are persisted: the root flip and freeing the space.
  void finish_pass();

  heap_media media_;
  std::uint64_t applied_ = 0;
  std::uint64_t epoch_ = 0;
  bool undo_ = false;  // this epoch's logs hold undo records
  std::vector<cursor> cursors_;
  std::vector<std::uint64_t> published_;  // per log: the head last published
  log_queue queue_;                       // the logs whose cursor holds a unit
};

}  // namespace gpm::detail::tx
