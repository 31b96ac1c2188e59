// The check a crash-image test hands to gpm::crash_image_checker when kernels on the emulator
// reach crash points (docs/crash-checking.md). Inside a kernel (another thread: the emulator's
// worker, where recovering an image would run kernels from a kernel) an image is kept with what
// the test knew at that moment (`State`); in host code the kept images are checked first, then
// the image at hand. An image whose bytes and state were checked already is not checked again.
// The checker serializes its checks.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gpm::test {

template <class State>
class kernel_image_checks {
 public:
  // capture(): the state now; key(state): a string that names it in messages (two images with
  // equal bytes and keys are one); check(path, kept, now): "" or what is wrong with the image at
  // `path`, taken in state `kept`, checked in state `now`. Kept images are written to `kept_path`.
  kernel_image_checks(
      std::function<State()> capture, std::function<std::string(const State&)> key,
      std::function<std::string(const std::string&, const State&, const State&)> check,
      std::string kept_path)
      : capture_(std::move(capture)),
        key_(std::move(key)),
        check_(std::move(check)),
        kept_path_(std::move(kept_path)) {}

  std::string operator()(const std::string& image) {
    std::ifstream in(image, std::ios::binary | std::ios::ate);
    std::string bytes(static_cast<std::size_t>(in.tellg()), '\0');
    in.seekg(0).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    State now = capture_();
    const bool fresh =
        seen_.insert(std::to_string(std::hash<std::string>{}(bytes)) + " " + key_(now)).second;
    if (std::this_thread::get_id() != host_) {
      ++kernel_images_;
      if (fresh) kept_.push_back({std::move(bytes), std::move(now)});
      return "";
    }
    std::vector<kept_image> kept = std::move(kept_);
    kept_.clear();
    for (const kept_image& k : kept) {
      std::ofstream(kept_path_, std::ios::binary | std::ios::trunc)
          .write(k.bytes.data(), static_cast<std::streamsize>(k.bytes.size()));
      ++checked_;
      if (std::string bad = check_(kept_path_, k.state, now); !bad.empty()) {
        return "an image taken inside a kernel (" + key_(k.state) + ") fails: " + bad;
      }
    }
    if (!fresh) return "";
    ++checked_;
    return check_(image, now, now);
  }

  std::uint64_t kernel_images() const { return kernel_images_; }  // taken inside kernels
  std::uint64_t checked() const { return checked_; }              // recovered and checked

 private:
  struct kept_image {
    std::string bytes;
    State state;
  };
  std::function<State()> capture_;
  std::function<std::string(const State&)> key_;
  std::function<std::string(const std::string&, const State&, const State&)> check_;
  std::string kept_path_;
  std::thread::id host_ = std::this_thread::get_id();
  std::vector<kept_image> kept_;
  std::set<std::string> seen_;
  std::uint64_t kernel_images_ = 0;
  std::uint64_t checked_ = 0;
};

}  // namespace gpm::test
