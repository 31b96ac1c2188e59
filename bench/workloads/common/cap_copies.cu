// The CAP baselines' double copies (cap_copies.hpp).
#include "workloads/common/cap_copies.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <gpm/platform/persist.hpp>

#include "workloads/common/object_header.hpp"

namespace gpmbench {

namespace {
constexpr gpm::format::object_kind kSelectorKind = bench_kind("CAP copy selector", "GCAPCOY1");
}

cap_mm_copies::cap_mm_copies(const mode_context& ctx, const std::string& pool_name,
                             std::uint64_t bytes)
    : bytes_(bytes),
      pool_(ctx, pool_name, pool_bytes_for(page_multiple(2 * bytes + 16 * bench_pool::kPageBytes)),
            bench_pool::kNoObject),
      offsets_{pool_.pool().allocate("copy.0", bytes, bench_pool::kPageBytes),
               pool_.pool().allocate("copy.1", bytes, bench_pool::kPageBytes)},
      selector_(pool_.pool().host_ptr<std::uint64_t>(
          create_with_header(pool_.pool(), "current", sizeof(std::uint64_t), kSelectorKind,
                             {bytes, 0, 0}) +
          kObjectHeaderBytes)),
      cap_(team_, bytes) {}

void cap_mm_copies::save(const void* gpu, cudaStream_t s) {
  const std::uint64_t next = 1 - *selector_;
  cap_.persist(pool_.pool().host_ptr<unsigned char>(offsets_[next]), gpu, bytes_, s);
  *selector_ = next;  // the copy is durable before it becomes current
  gpm::write_back(selector_, sizeof *selector_);
}

const unsigned char* cap_mm_copies::current() const {
  return pool_.pool().host_ptr<unsigned char>(offsets_[*selector_]);
}

cap_fs_copies::cap_fs_copies(const std::string& dir, const std::string& name, std::uint64_t bytes)
    : base_(dir + "/" + name),
      bytes_(bytes),
      files_{std::make_unique<cap_fs>(base_ + ".0", bytes),
             std::make_unique<cap_fs>(base_ + ".1", bytes)} {
  set_current(0);
}

cap_fs_copies::~cap_fs_copies() {
  std::error_code ec;
  std::filesystem::remove(base_ + ".current", ec);
}

void cap_fs_copies::save(const void* gpu, cudaStream_t s) {
  const std::uint64_t next = 1 - current_;
  files_[next]->write(0, gpu, bytes_, s);
  files_[next]->sync();
  set_current(next);
}

void cap_fs_copies::set_current(std::uint64_t which) {
  std::vector<unsigned char> word(sizeof which);
  std::memcpy(word.data(), &which, sizeof which);
  write_file_synced(base_ + ".current.tmp", word, word.size());
  std::filesystem::rename(base_ + ".current.tmp", base_ + ".current");
  current_ = which;
}

std::vector<unsigned char> cap_fs_copies::read_current() const {
  std::vector<unsigned char> data(bytes_);
  std::ifstream in(files_[current_]->path(), std::ios::binary);
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(bytes_));
  if (!in) check_failed("cannot read back " + files_[current_]->path());
  return data;
}

std::uint64_t cap_fs_copies::bytes_persisted() const {
  return files_[0]->bytes_persisted() + files_[1]->bytes_persisted();
}

}  // namespace gpmbench
