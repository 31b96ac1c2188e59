// gpm::basic_undo_tx host side, for both logs (undo_tx on an hcl_log, conv_undo_tx on a
// conv_log): the batch record (an active mark persisted in the pool) and the begin / commit /
// recover protocol around the log of undo entries. Order of persisted steps:
//   begin:   truncate the log; persist mark = active             (the log is empty when marked)
//   commit:  persist mark = inactive, committed + 1; truncate the log  (inactive: nothing to undo)
//   recover: if active: roll every stream back (GPU); persist mark = inactive; truncate the log
// A crash between any two steps leaves a state recover() handles: an active mark always comes
// with a log holding exactly the batch's undo entries, and rolling back twice restores the same
// bytes, because the log is truncated only after the mark is cleared.
#include <gpm/log/undo_tx.cuh>

#include <atomic>
#include <cstring>

#include <gpm/platform/checksum.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/persist.hpp>
#include <gpm/pool/pool.hpp>

namespace gpm {
namespace {

namespace L = detail::log;

constexpr std::uint64_t record_magic = 0x31584f444e554d47ull;  // "GMUNDOX1"
constexpr std::uint32_t record_version = 1;

struct record_header {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t reserved0;
  std::uint64_t reserved[13];
  std::uint64_t checksum;  // of every byte before it
};
static_assert(sizeof(record_header) == L::line_bytes);

// The mark: (batches committed << 1) | active, alone in its line.
constexpr std::uint64_t mark_offset = L::line_bytes;
constexpr std::uint64_t record_bytes = 2 * L::line_bytes;

std::uint64_t record_checksum(const record_header& h) {
  return checksum64(&h, offsetof(record_header, checksum));
}

std::string log_name(std::string_view name) { return std::string(name) + ".log"; }

template <class Log>
__global__ void roll_back_kernel(basic_undo_tx_ref<Log> tx) {
  tx.roll_back();
}

}  // namespace

template <class Log>
basic_undo_tx<Log>::basic_undo_tx(pool& p, std::string name, std::uint64_t record_offset, Log log)
    : pool_(&p), name_(std::move(name)), record_offset_(record_offset), log_(std::move(log)) {}

template <class Log>
std::uint64_t basic_undo_tx<Log>::object_bytes(const shape_type& shape) {
  return streams::object_bytes(shape) + record_bytes;
}

template <class Log>
basic_undo_tx<Log> basic_undo_tx<Log>::create(pool& p, std::string_view name,
                                              const shape_type& shape) {
  if (p.find(name)) {
    throw_error(errc::already_exists, "pool " + p.path() + " already holds an object named '" +
                                          std::string(name) + "'; open the undo_tx instead");
  }
  Log log = streams::create(p, log_name(name), shape);
  const std::uint64_t off = p.allocate(name, record_bytes, L::line_bytes);
  char* base = p.host_ptr<char>(off);
  record_header h{};
  h.magic = record_magic;
  h.version = record_version;
  h.checksum = record_checksum(h);
  // The mark is zero (allocation zero-fills); the header goes last so that open() rejects a
  // record whose creation a crash interrupted.
  std::memcpy(base, &h, sizeof h);
  persist(base, sizeof h);
  return basic_undo_tx(p, std::string(name), off, std::move(log));
}

template <class Log>
basic_undo_tx<Log> basic_undo_tx<Log>::open(pool& p, std::string_view name) {
  const L::record_site site = L::find_record(p, name, record_bytes, "undo_tx");
  record_header h;
  std::memcpy(&h, p.host_ptr<char>(site.object.offset), sizeof h);
  L::check_signature(
      site, "undo_tx batch record", {h.magic, h.version, record_checksum(h) == h.checksum},
      record_magic, record_version,
      "Free '" + std::string(name) + "' and '" + log_name(name) + "' and create it again");
  return basic_undo_tx(p, std::string(name), site.object.offset, Log::open(p, log_name(name)));
}

template <class Log>
std::uint64_t* basic_undo_tx<Log>::mark() const {
  return pool_->host_ptr<std::uint64_t>(record_offset_ + mark_offset);
}

template <class Log>
void basic_undo_tx<Log>::set_mark(std::uint64_t value) {
  std::atomic_ref<std::uint64_t>(*mark()).store(value);
  persist(mark(), sizeof(std::uint64_t));
}

template <class Log>
bool basic_undo_tx<Log>::active() const {
  return (std::atomic_ref<std::uint64_t>(*mark()).load() & 1) != 0;
}

template <class Log>
std::uint64_t basic_undo_tx<Log>::committed() const {
  return std::atomic_ref<std::uint64_t>(*mark()).load() >> 1;
}

template <class Log>
typename basic_undo_tx<Log>::ref_type basic_undo_tx<Log>::ref() const {
  return ref_type(log_.ref(), pool_->ref());
}

template <class Log>
void basic_undo_tx<Log>::begin() {
  require(!active(),
          "undo_tx '" + name_ + "': a batch is already active; commit it, or recover() to undo it");
  log_.clear();
  log_.clear_faults();
  crash_point("undo_tx.begin.log_cleared");
  set_mark((committed() << 1) | 1);
}

template <class Log>
void basic_undo_tx<Log>::commit() {
  require(active(), "undo_tx '" + name_ + "': commit without an active batch; call begin() first");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before undo_tx::commit");
  // A failed save means some update of the batch was skipped: the batch must not commit.
  log_.check_faults();
  set_mark((committed() + 1) << 1);
  crash_point("undo_tx.commit.unmarked");
  log_.clear();
}

template <class Log>
bool basic_undo_tx<Log>::recover(cudaStream_t stream) {
  if (!active()) {
    if (!log_.is_empty()) log_.clear();  // a commit cut short between its two steps
    return false;
  }
  log_.clear_faults();  // failures of the interrupted batch are not recovery's
  launch(roll_back_kernel<Log>, grid(), block(), 0, stream, ref());
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize after undo_tx recovery");
  log_.check_faults();
  crash_point("undo_tx.recover.rolled_back");
  set_mark(committed() << 1);
  crash_point("undo_tx.recover.unmarked");
  log_.clear();
  return true;
}

template class basic_undo_tx<hcl_log>;
template class basic_undo_tx<conv_log>;

}  // namespace gpm
