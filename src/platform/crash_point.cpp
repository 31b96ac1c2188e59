// Injected crash points (see crash_point.hpp).
#include <gpm/platform/crash_point.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace gpm {

namespace {

struct armed {
  std::string name;
  long remaining = 0;  // crash when this reaches zero
};

armed* parse_environment() {
  const char* v = std::getenv("GPMKIT_CRASH_POINT");
  if (v == nullptr || *v == '\0') return nullptr;
  auto* a = new armed();  // lives for the process
  const char* colon = std::strrchr(v, ':');
  a->name = colon != nullptr ? std::string(v, colon) : std::string(v);
  a->remaining = colon != nullptr ? std::strtol(colon + 1, nullptr, 10) : 1;
  if (a->remaining < 1) a->remaining = 1;
  return a;
}

armed* state() {
  static armed* a = parse_environment();
  return a;
}

std::atomic<long> hits{0};

}  // namespace

void crash_point(const char* name) {
  armed* a = state();
  if (a == nullptr || a->name != name) return;
  if (hits.fetch_add(1, std::memory_order_relaxed) + 1 >= a->remaining) {
    kill(getpid(), SIGKILL);
    pause();  // SIGKILL cannot be caught; never returns
  }
}

const char* armed_crash_point() {
  armed* a = state();
  return a == nullptr ? "" : a->name.c_str();
}

}  // namespace gpm
