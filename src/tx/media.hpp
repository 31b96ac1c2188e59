// The host side of a heap object in its pool (format: include/gpm/tx/detail/format.hpp): building
// and validating the header, the crash-atomic `applied` root, reading redo records back from the
// logs, and the reproducer, which applies records to the home image in commit order while kernels
// run and replays them at recovery. Host code only, free of device code (plain C++ in both
// backends); src/tx uses it, nothing else.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gpm/tx/detail/format.hpp>

namespace gpm::detail::tx {

// The header of a new heap (checksum included). Throws invalid_argument for a bad geometry.
heap_header make_header(std::uint64_t words, std::uint32_t logs, std::uint64_t log_bytes);
// Checks the header at `object` (a pool object of `object_bytes` bytes): magic, version,
// checksum, sizes, geometry. Throws corrupt or version, naming `what`; returns the header.
heap_header validate_header(const void* object, std::uint64_t object_bytes,
                            const std::string& what);

// One redo record read back from a log.
struct record {
  std::uint64_t seq = 0;
  std::uint32_t log = 0;
  std::uint64_t pos = 0;
  std::uint64_t chunks = 0;
  std::uint32_t width = 1;           // of its striped group (1: a plain record)
  std::uint32_t rank = 0;            // within the group
  std::vector<std::uint64_t> pairs;  // pair_slot(word, value)
};

// What one reservation left in a log: a plain record, or every member of a striped group.
struct log_unit {
  std::uint64_t chunks = 0;     // stream positions it occupies
  std::vector<record> records;  // consecutive sequence numbers
};

// The heap object as the host sees it (its mapping of the pool).
class heap_media {
 public:
  heap_media(char* object, const heap_header& h, std::string what);

  const heap_layout& layout() const { return layout_; }
  const std::string& what() const { return what_; }
  std::uint64_t salt() const { return salt_; }
  std::uint32_t* home() const;
  log_control& control(std::uint32_t log) const;

  // The newer valid root record; throws corrupt when neither copy is valid.
  root_record root() const;
  // Writes {applied, epoch, undo} into the older slot with the next seq and persists it:
  // crash-atomic.
  void write_root(std::uint64_t applied, std::uint64_t epoch, bool undo);
  // The record at stream position `pos` of `log` if one of `epoch` with a valid checksum lies
  // there (a torn, stale or foreign one never does); a member of a striped group is read with its
  // group's stride. `undo`: an undo record (its pairs hold old values) instead of a redo record.
  std::optional<record> read_record(std::uint32_t log, std::uint64_t pos, std::uint64_t epoch,
                                    bool undo = false) const;
  // The plain record or the whole striped group that starts at `pos`, if every member is there.
  std::optional<log_unit> read_unit(std::uint32_t log, std::uint64_t pos,
                                    std::uint64_t epoch) const;
  // Writes the record's pairs into the home image (not persisted).
  void apply(const record& r) const;

 private:
  char* object_;
  heap_layout layout_;
  std::uint64_t salt_;
  std::string what_;
};

// Applies persisted records to the home image in sequence order, never past a gap.
class reproducer {
 public:
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
  // While kernels run: reads new records, applies those that extend the applied prefix, flips the
  // root, and frees the log space of applied records. Returns whether it applied any.
  bool pass();

  std::uint64_t applied() const { return applied_; }
  std::uint64_t epoch() const { return epoch_; }
  heap_media& media() { return media_; }
  const heap_media& media() const { return media_; }

 private:
  void scan(std::uint32_t log);
  // Undo epochs: restores the old values of every undo record still valid; returns how many.
  std::uint64_t roll_back();
  // Applies ready records that continue the prefix and persists what they wrote.
  std::uint64_t apply_ready();

  heap_media media_;
  std::uint64_t applied_ = 0;
  std::uint64_t epoch_ = 0;
  bool undo_ = false;                // this epoch's logs hold undo records
  std::vector<std::uint64_t> scan_;  // per log: the next position to read
  // Per log: (position, seq) of the records read and not yet freed, in position order.
  std::vector<std::deque<std::pair<std::uint64_t, std::uint64_t>>> queued_;
  std::map<std::uint64_t, record> ready_;  // read, not yet applied, by seq
};

}  // namespace gpm::detail::tx
