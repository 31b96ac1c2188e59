// gpm::conv_log host side: partition checks, the partitions' locks in GPU memory, creation and
// opening through the shared log object.
#include <gpm/log/conv_log.cuh>

#include <gpm/pool/pool.hpp>

namespace gpm {
namespace {

namespace L = detail::log;

L::header header_for(std::uint32_t partitions, std::uint64_t bytes_per_partition) {
  require(partitions > 0, "conv_log: partitions must be at least 1");
  require(bytes_per_partition >= conv_log::entry_footprint(1),
          "conv_log: bytes_per_partition must hold at least one entry (" +
              std::to_string(conv_log::entry_footprint(1)) + " bytes for a 1-byte entry), got " +
              std::to_string(bytes_per_partition));
  return L::make_header(L::kind::conv, 0, 0, partitions, L::chunks_for(bytes_per_partition));
}

}  // namespace

std::uint64_t conv_log::object_bytes(std::uint32_t partitions, std::uint64_t bytes_per_partition) {
  return header_for(partitions, bytes_per_partition).common.object_bytes;
}

conv_log::conv_log(L::log_object o) : object_(std::move(o)) {
  if (object_.owner().mapped_into_gpu()) {
    locks_ = device_buffer<std::uint32_t>(partitions());
    locks_.fill_bytes(0);
  }
}

conv_log conv_log::create(pool& p, std::string_view name, std::uint32_t partitions,
                          std::uint64_t bytes_per_partition) {
  return conv_log(L::log_object::create(p, name, header_for(partitions, bytes_per_partition)));
}

conv_log conv_log::open(pool& p, std::string_view name) {
  return conv_log(L::log_object::open(p, name, L::kind::conv));
}

conv_log_ref conv_log::ref() const { return conv_log_ref(object_.view(), locks_.data()); }

std::uint32_t conv_log::partitions() const {
  return static_cast<std::uint32_t>(object_.head().streams);
}

std::uint64_t conv_log::bytes_per_partition() const {
  return object_.head().stream_chunks * L::chunk_bytes;
}

std::uint64_t conv_log::checked_partition(std::uint32_t partition) const {
  require(partition < partitions(), "conv_log '" + name() + "': partition " +
                                        std::to_string(partition) + " does not exist; it has " +
                                        std::to_string(partitions()));
  return partition;
}

void conv_log::clear() { object_.next_generation(); }

void conv_log::clear(std::uint32_t partition) {
  object_.clear_stream(checked_partition(partition));
}

bool conv_log::is_empty() const { return object_.is_empty(); }

std::uint64_t conv_log::size(std::uint32_t partition) const {
  return object_.used_chunks(checked_partition(partition)) * L::chunk_bytes;
}

void conv_log::check_faults() const { object_.check_faults("conv_log", ""); }

}  // namespace gpm
