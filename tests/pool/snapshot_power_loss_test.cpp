// Power loss during a snapshot, simulated exhaustively. The snapshot code's file operations run
// against a model disk that keeps only what was made durable: a file's contents by fsync of the
// file, its name by fsync of its directory (the weakest guarantees POSIX file systems give). The
// test cuts power after every single operation of a snapshot, and of the recovery that follows,
// and requires that the snapshot restored afterwards is exactly the previous one or the new one.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "layout.hpp"
#include "snapshot.hpp"

namespace {

using gpm::detail::snapshot_fs;
using gpm::detail::snapshot_store;

struct power_cut {};  // thrown by the model at the chosen operation

// A disk that forgets everything not fsynced when the power goes.
class model_disk final : public snapshot_fs {
 public:
  struct inode {
    std::vector<char> data;
    std::vector<char> durable;
  };

  // Cut the power when the `n`-th mutating operation from now is attempted (it does not happen).
  void cut_power_at(int n) { remaining_ = n; }
  int operations() const { return operations_; }

  // After the cut: what the disk holds when the machine comes back.
  void reboot() {
    names_ = durable_names_;
    for (auto& [name, node] : names_) node->data = node->durable;
    remaining_ = -1;
  }

  // A deep copy, so each trial starts from the same durable state.
  model_disk clone() const {
    model_disk d;
    std::map<const inode*, std::shared_ptr<inode>> copies;
    auto copy = [&](const std::shared_ptr<inode>& n) {
      auto& c = copies[n.get()];
      if (!c) c = std::make_shared<inode>(*n);
      return c;
    };
    for (const auto& [k, v] : names_) d.names_[k] = copy(v);
    for (const auto& [k, v] : durable_names_) d.durable_names_[k] = copy(v);
    return d;
  }

  std::optional<std::uint64_t> file_size(const std::string& path) override {
    auto it = names_.find(path);
    if (it == names_.end()) return std::nullopt;
    return it->second->data.size();
  }
  void read_at(const std::string& path, std::uint64_t offset, void* buf,
               std::uint64_t len) override {
    auto it = names_.find(path);
    if (it == names_.end()) gpm::throw_error(gpm::errc::not_found, path + " is missing");
    if (offset + len > it->second->data.size()) {
      gpm::throw_error(gpm::errc::corrupt, path + " is shorter than expected");
    }
    std::memcpy(buf, it->second->data.data() + offset, len);
  }
  void write_at(const std::string& path, std::uint64_t offset, const void* buf,
                std::uint64_t len) override {
    step();
    auto& node = names_[path];
    if (!node) node = std::make_shared<inode>();
    if (node->data.size() < offset + len) node->data.resize(offset + len);
    std::memcpy(node->data.data() + offset, buf, len);
  }
  void truncate(const std::string& path, std::uint64_t size) override {
    step();
    names_.at(path)->data.resize(size);
  }
  void sync_file(const std::string& path) override {
    step();
    auto& node = names_.at(path);
    node->durable = node->data;
  }
  void rename(const std::string& from, const std::string& to) override {
    step();
    names_[to] = names_.at(from);
    names_.erase(from);
  }
  void remove(const std::string& path) override {
    step();
    names_.erase(path);
  }
  void make_dir(const std::string&) override { step(); }
  void sync_dir(const std::string& dir) override {
    step();
    // Every name directly in that directory becomes durable as it is now (not names in its
    // subdirectories: those need their own directory's fsync).
    auto in_dir = [&](const std::string& name) {
      return name.size() > dir.size() + 1 && name.rfind(dir + "/", 0) == 0 &&
             name.find('/', dir.size() + 1) == std::string::npos;
    };
    std::erase_if(durable_names_, [&](const auto& kv) { return in_dir(kv.first); });
    for (const auto& [k, v] : names_) {
      if (in_dir(k)) durable_names_[k] = v;
    }
  }

 private:
  void step() {
    ++operations_;
    if (remaining_ == 0) throw power_cut{};
    if (remaining_ > 0) --remaining_;
  }

  std::map<std::string, std::shared_ptr<inode>> names_;
  std::map<std::string, std::shared_ptr<inode>> durable_names_;
  int remaining_ = -1;
  int operations_ = 0;
};

constexpr std::uint64_t kPages = 48;
constexpr std::uint64_t kBytes = kPages * 4096;
const std::string kDir = "/snap/p.pool.snapshot";
const std::string kPool = "/pm/p.pool";  // the pool the snapshots belong to

// A pool image in memory, read as a snapshot reads a pool file.
gpm::detail::pool_reader memory(const std::vector<char>& image) {
  return [&image](std::uint64_t offset, void* out, std::uint64_t bytes) {
    std::memcpy(out, image.data() + offset, bytes);
  };
}

// Pool images: version 0 is a formatted pool with patterned heap pages; each later version
// rewrites a different subset of pages.
std::vector<std::vector<char>> make_versions(int count) {
  std::vector<std::vector<char>> v;
  std::vector<char> image(kBytes, 0);
  gpm::detail::format_pool(image.data(), kBytes, "sim", 8);
  std::mt19937_64 rng(7);
  for (std::uint64_t p = 4; p < kPages; ++p)
    std::memset(&image[p * 4096], static_cast<int>(p), 4096);
  v.push_back(image);
  for (int k = 1; k < count; ++k) {
    for (std::uint64_t p = 4; p < kPages; ++p) {
      if (rng() % 3 == 0) std::memset(&image[p * 4096 + 100 * k], 0x40 + k, 1000);
    }
    v.push_back(image);
  }
  return v;
}

// What a fresh process restores from the disk: the version index it equals, or -1 if none.
int restored_version(model_disk& disk, const std::vector<std::vector<char>>& versions) {
  snapshot_store store(disk, kDir, kPool);
  if (!store.manifest()) return -1;
  std::vector<char> out(kBytes);
  store.restore_into(out.data());
  for (std::size_t i = 0; i < versions.size(); ++i) {
    if (out == versions[i]) return static_cast<int>(i);
  }
  return -2;  // a mixture: the failure this test exists to catch
}

// The disk after snapshots of versions 0..n-1 completed without interruption.
model_disk disk_with_snapshots(int n, const std::vector<std::vector<char>>& versions) {
  model_disk disk;
  for (int i = 0; i < n; ++i) snapshot_store(disk, kDir, kPool).take(memory(versions[i]), kBytes);
  return disk;
}

TEST(SnapshotPowerLoss, FirstSnapshotIsAllOrNothing) {
  const auto versions = make_versions(1);
  model_disk probe;
  snapshot_store(probe, kDir, kPool).take(memory(versions[0]), kBytes);
  const int ops = probe.operations();
  ASSERT_GT(ops, 5);
  for (int cut = 0; cut <= ops; ++cut) {
    model_disk disk;
    disk.cut_power_at(cut);
    bool completed = true;
    try {
      snapshot_store(disk, kDir, kPool).take(memory(versions[0]), kBytes);
    } catch (const power_cut&) {
      completed = false;
    }
    disk.reboot();
    const int got = restored_version(disk, versions);
    if (completed) {
      EXPECT_EQ(got, 0) << "cut after op " << cut;
    } else {
      EXPECT_TRUE(got == -1 || got == 0) << "cut at op " << cut << " restored " << got;
    }
  }
}

TEST(SnapshotPowerLoss, IncrementalSnapshotRestoresOldOrNewAfterEveryCut) {
  const auto versions = make_versions(3);
  const model_disk base = disk_with_snapshots(2, versions);  // snapshots of v0, v1
  model_disk probe = base.clone();
  const int before = probe.operations();
  snapshot_store(probe, kDir, kPool).take(memory(versions[2]), kBytes);
  const int ops = probe.operations() - before;
  int saw_old = 0, saw_new = 0;
  for (int cut = 0; cut <= ops; ++cut) {
    model_disk disk = base.clone();
    disk.cut_power_at(cut);
    bool completed = true;
    try {
      snapshot_store(disk, kDir, kPool).take(memory(versions[2]), kBytes);
    } catch (const power_cut&) {
      completed = false;
    }
    disk.reboot();
    const int got = restored_version(disk, versions);
    if (completed) {
      ASSERT_EQ(got, 2) << "cut after op " << cut;
    } else {
      ASSERT_TRUE(got == 1 || got == 2) << "cut at op " << cut << " restored " << got;
    }
    got == 1 ? ++saw_old : ++saw_new;
  }
  EXPECT_GT(saw_old, 0);
  EXPECT_GT(saw_new, 0);
}

// A second power cut during the next snapshot (which first finishes the interrupted one):
// every pair of cut points must still restore a version the program snapshotted, never older
// than the last snapshot that completed.
TEST(SnapshotPowerLoss, RecoveryIsIdempotentUnderRepeatedCuts) {
  const auto versions = make_versions(4);
  const model_disk base = disk_with_snapshots(2, versions);
  model_disk probe = base.clone();
  const int before = probe.operations();
  snapshot_store(probe, kDir, kPool).take(memory(versions[2]), kBytes);
  const int ops = probe.operations() - before;
  for (int first = 0; first < ops; ++first) {
    model_disk after_first = base.clone();
    after_first.cut_power_at(first);
    try {
      snapshot_store(after_first, kDir, kPool).take(memory(versions[2]), kBytes);
    } catch (const power_cut&) {
    }
    after_first.reboot();
    const int settled = restored_version(after_first, versions);
    ASSERT_TRUE(settled == 1 || settled == 2) << "first cut " << first;
    for (int second = 0; second < 2 * ops; second += 3) {
      model_disk disk = after_first.clone();
      disk.cut_power_at(second);
      bool completed = true;
      try {
        snapshot_store(disk, kDir, kPool).take(memory(versions[3]), kBytes);
      } catch (const power_cut&) {
        completed = false;
      }
      disk.reboot();
      const int got = restored_version(disk, versions);
      if (completed) {
        ASSERT_EQ(got, 3) << "cuts " << first << ", " << second;
      } else {
        ASSERT_TRUE(got == settled || got == 3)
            << "cuts " << first << ", " << second << ": restored " << got << " after " << settled;
      }
    }
  }
}

TEST(SnapshotPowerLoss, DamageToACommittedSnapshotIsDetected) {
  const auto versions = make_versions(2);
  model_disk disk = disk_with_snapshots(2, versions);
  std::vector<char> page(4096);
  disk.read_at(kDir + "/image", 9 * 4096, page.data(), page.size());
  page[10] ^= 0x20;
  disk.write_at(kDir + "/image", 9 * 4096, page.data(), page.size());
  std::vector<char> out(kBytes);
  try {
    snapshot_store(disk, kDir, kPool).restore_into(out.data());
    FAIL() << "a damaged image was restored";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::corrupt);
    EXPECT_NE(std::string(e.what()).find("page 9"), std::string::npos) << e.what();
  }
}

}  // namespace
