// The snapshot layer's real file system (src/pool/snapshot.cpp, make_posix_fs): reading a
// snapshot file opens it read-only, so a restore works from snapshot files the process may not
// write (read-only files, a read-only mount); writing reopens it for writing; anything but a
// regular file under a snapshot file's name is refused at once.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include <gpm/platform/error.hpp>

#include "snapshot.hpp"

namespace {

namespace fs = std::filesystem;

// The access mode (O_RDONLY, O_WRONLY or O_RDWR) of this process's descriptor of `path`.
int access_mode_of_open(const fs::path& path) {
  for (const fs::directory_entry& e : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (fs::read_symlink(e.path(), ec) != path) continue;
    std::ifstream info("/proc/self/fdinfo/" + e.path().filename().string());
    std::string key, value;
    while (info >> key >> value) {
      if (key == "flags:") return static_cast<int>(std::stoul(value, nullptr, 8)) & O_ACCMODE;
    }
  }
  return -1;
}

TEST(SnapshotPosixFs, ReadsOpenReadOnlyAndWritesReopenForWriting) {
  const fs::path dir = fs::temp_directory_path() / ("gpmkit-snapfs-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "image";
  std::ofstream(file) << "snapshot bytes";
  fs::permissions(file, fs::perms::owner_read);
  {
    auto disk = gpm::detail::make_posix_fs();
    char buf[8] = {};
    disk->read_at(file.string(), 0, buf, sizeof buf);
    EXPECT_EQ(std::string(buf, sizeof buf), "snapshot");
    EXPECT_EQ(access_mode_of_open(file), O_RDONLY);
    disk->sync_file(file.string());
    EXPECT_EQ(access_mode_of_open(file), O_RDONLY);
    fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
    disk->write_at(file.string(), 0, "SNAP", 4);
    EXPECT_EQ(access_mode_of_open(file), O_RDWR);
    disk->read_at(file.string(), 0, buf, 4);
    EXPECT_EQ(std::string(buf, 4), "SNAP");
  }
  fs::remove_all(dir);
}

// A FIFO under a snapshot file's name would block open() until a writer came: refused at once.
TEST(SnapshotPosixFs, ASpecialFileUnderASnapshotNameIsRefusedAtOnce) {
  const fs::path dir = fs::temp_directory_path() / ("gpmkit-snapfifo-" + std::to_string(getpid()));
  fs::create_directories(dir);
  ASSERT_EQ(::mkfifo((dir / "image").c_str(), 0600), 0);
  fs::create_symlink("/etc/hostname", dir / "pages");
  auto disk = gpm::detail::make_posix_fs();
  char buf[8];
  for (const char* name : {"image", "pages"}) {
    try {
      disk->read_at((dir / name).string(), 0, buf, sizeof buf);
      ADD_FAILURE() << name << " was read";
    } catch (const gpm::error& e) {
      EXPECT_EQ(e.code(), gpm::errc::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
  }
  fs::remove_all(dir);
}

}  // namespace
