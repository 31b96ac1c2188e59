// The gpmkit CLI, run as a separate program: every command on a real pool in a temporary PM
// directory, the errors a user can provoke (exit status and a message that names the problem),
// --help everywhere, and JSON that parses. Everything the tests create is removed.
#include <fcntl.h>
#include <linux/magic.h>
#include <spawn.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <gpm/config.hpp>
#include <gpm/pool/pool.hpp>

extern char** environ;

namespace {

namespace fs = std::filesystem;

struct cli_result {
  int code = -1;
  std::string out;
  std::string err;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A strict JSON validator (RFC 8259 grammar, no extensions): enough to prove --json output parses.
class json_checker {
 public:
  explicit json_checker(const std::string& text) : s_(text) {}
  bool valid() {
    skip();
    if (!value()) return false;
    skip();
    return i_ == s_.size();
  }

 private:
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (s_.compare(i_, w.size(), w) != 0) return false;
    i_ += w.size();
    return true;
  }
  bool string() {
    if (s_[i_] != '"') return false;
    for (++i_; i_ < s_.size(); ++i_) {
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        ++i_;
        if (i_ >= s_.size()) return false;
        if (s_[i_] == 'u') {
          for (int k = 0; k < 4; ++k) {
            if (++i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_]))) {
              return false;
            }
          }
        } else if (std::string("\"\\/bfnrt").find(s_[i_]) == std::string::npos) {
          return false;
        }
      }
    }
    return false;
  }
  bool number() {
    const std::size_t start = i_;
    if (s_[i_] == '-') ++i_;
    auto digits = [&] {
      const std::size_t b = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      return i_ > b;
    };
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else if (!digits()) {
      return false;
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (!digits()) return false;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digits()) return false;
    }
    return i_ > start;
  }
  template <class Item>
  bool sequence(char close, Item item) {
    ++i_;
    skip();
    if (i_ < s_.size() && s_[i_] == close) {
      ++i_;
      return true;
    }
    while (true) {
      skip();
      if (!item()) return false;
      skip();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == close) {
        ++i_;
        return true;
      }
      if (s_[i_++] != ',') return false;
    }
  }
  bool value() {
    if (i_ >= s_.size()) return false;
    switch (s_[i_]) {
      case '{':
        return sequence('}', [&] {
          if (i_ >= s_.size() || !string()) return false;
          skip();
          if (i_ >= s_.size() || s_[i_++] != ':') return false;
          skip();
          return value();
        });
      case '[': return sequence(']', [&] { return value(); });
      case '"': return string();
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return number();
    }
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

bool is_json(const std::string& text) { return json_checker(text).valid(); }

class GpmkitCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tag = "gpmkit-test-" + std::to_string(getpid());
    pm_dir_ = fs::path("/dev/shm") / tag;
    snapshot_dir_ = fs::current_path() / (tag + "-snapshots");  // beside the test: on disk
    scratch_ = fs::current_path() / (tag + "-scratch");
    TearDown();
    fs::create_directories(scratch_);
  }
  void TearDown() override {
    for (const fs::path& p : {pm_dir_, snapshot_dir_, scratch_}) fs::remove_all(p);
  }

  // A gpmkit process started by start() and not yet waited for.
  struct started {
    pid_t pid = -1;
    std::vector<std::string> args;
    std::string out, err;  // files its stdout and stderr go to
  };

  // Starts gpmkit with `args` and the test's PM and snapshot directories; `tag` names the files
  // its output goes to (processes running at once need their own).
  started start(const std::vector<std::string>& args, bool with_dirs = true,
                const std::string& tag = "") {
    std::vector<std::string> all = {GPMKIT_CLI};
    all.insert(all.end(), args.begin(), args.end());
    if (with_dirs) {
      all.insert(all.end(),
                 {"--pm-dir", pm_dir_.string(), "--snapshot-dir", snapshot_dir_.string()});
    }
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    started s;
    s.args = args;
    s.out = (scratch_ / ("stdout" + tag)).string();
    s.err = (scratch_ / ("stderr" + tag)).string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, s.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    posix_spawn_file_actions_addopen(&actions, 2, s.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    const int spawned = posix_spawn(&s.pid, GPMKIT_CLI, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
      ADD_FAILURE() << "cannot run " << GPMKIT_CLI << ": " << std::strerror(spawned);
      s.pid = -1;
    }
    return s;
  }

  // Waits for a started process; a death by a signal is a test failure.
  cli_result finish(const started& s) {
    cli_result r;
    if (s.pid < 0) return r;
    int status = 0;
    waitpid(s.pid, &status, 0);
    r.out = read_file(s.out);
    r.err = read_file(s.err);
    if (WIFEXITED(status)) {
      r.code = WEXITSTATUS(status);
    } else {
      ADD_FAILURE() << "gpmkit died of signal " << WTERMSIG(status) << " running:" << joined(s.args)
                    << "\nstderr: " << r.err;
    }
    return r;
  }

  // Runs gpmkit with `args` and the test's PM and snapshot directories.
  cli_result run(const std::vector<std::string>& args, bool with_dirs = true) {
    return finish(start(args, with_dirs));
  }

  static std::string joined(const std::vector<std::string>& args) {
    std::string s;
    for (const std::string& a : args) s += " " + a;
    return s;
  }

  fs::path pool_file(const std::string& name) const { return pm_dir_ / name; }

  gpm::pool_options library_options() const {
    gpm::pool_options o;
    o.pm_dir = pm_dir_.string();
    o.snapshot_dir = snapshot_dir_.string();
    o.gpu = gpm::gpu_mapping::none;
    o.notice = [](const std::string&) {};
    return o;
  }

  void create(const std::string& name) {
    const cli_result r =
        run({"pool", "create", name, "--size", "1MiB", "--layout", "test", "--objects", "16"});
    ASSERT_EQ(r.code, 0) << r.err;
  }

  fs::path pm_dir_;
  fs::path snapshot_dir_;
  fs::path scratch_;
};

#define EXPECT_OK(r) EXPECT_EQ((r).code, 0) << "stdout: " << (r).out << "\nstderr: " << (r).err
#define ASSERT_OK(r) ASSERT_EQ((r).code, 0) << "stdout: " << (r).out << "\nstderr: " << (r).err
#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST_F(GpmkitCli, InfoDescribesTheMachineInTextAndJson) {
  const cli_result text = run({"info"});
  EXPECT_OK(text);
  EXPECT_CONTAINS(text.out, "backend:");
  EXPECT_CONTAINS(text.out, "pm dir:");
  EXPECT_CONTAINS(text.out, pm_dir_.string());
  EXPECT_CONTAINS(text.out, "process-crash");
  EXPECT_CONTAINS(text.out, "snapshot dir:");

  const cli_result json = run({"info", "--json"});
  EXPECT_OK(json);
  EXPECT_TRUE(is_json(json.out)) << json.out;
  EXPECT_CONTAINS(json.out, "\"backend\": \"" GPM_BACKEND_NAME "\"");
  EXPECT_CONTAINS(json.out, "\"file_system\": \"tmpfs\"");
  EXPECT_CONTAINS(json.out, "\"durability\"");
  EXPECT_FALSE(fs::exists(pm_dir_)) << "info must not create the PM directory";
}

TEST_F(GpmkitCli, PoolLifecycleFromCreateToRestore) {
  create("life");
  const fs::path file = pool_file("life");
  ASSERT_TRUE(fs::exists(file));

  {  // a named object, made with the library, for `ls` to list
    gpm::pool p = gpm::pool::open("life", "test", library_options());
    p.allocate("alpha", 1000, 256, 7);
  }

  cli_result r = run({"pool", "info", "life"});
  EXPECT_OK(r);
  EXPECT_CONTAINS(r.out, "layout:");
  EXPECT_CONTAINS(r.out, "test");
  EXPECT_CONTAINS(r.out, "1048576");
  EXPECT_CONTAINS(r.out, "clean shutdown:     yes");

  r = run({"pool", "info", "life", "--json"});
  EXPECT_OK(r);
  EXPECT_TRUE(is_json(r.out)) << r.out;
  EXPECT_CONTAINS(r.out, "\"layout\": \"test\"");
  EXPECT_CONTAINS(r.out, "\"objects\": 1");

  r = run({"pool", "ls", "life"});
  EXPECT_OK(r);
  EXPECT_CONTAINS(r.out, "alpha");
  EXPECT_CONTAINS(r.out, "1000");
  r = run({"pool", "ls", "life", "--json"});
  EXPECT_OK(r);
  EXPECT_TRUE(is_json(r.out)) << r.out;
  EXPECT_CONTAINS(r.out, "\"type_tag\": 7");

  r = run({"pool", "check", "life"});
  EXPECT_OK(r);
  EXPECT_CONTAINS(r.out, "consistent: yes");

  r = run({"pool", "snapshot", "life"});
  EXPECT_OK(r);
  EXPECT_CONTAINS(r.out, "seq:");
  EXPECT_CONTAINS(r.out, "pages total:   256");
  r = run({"pool", "snapshot", "life", "--layout", "test", "--json"});
  EXPECT_OK(r);
  EXPECT_TRUE(is_json(r.out)) << r.out;
  EXPECT_CONTAINS(r.out, "\"seq\": 2");
  r = run({"pool", "snapshot", "life", "--layout", "other"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "other");

  r = run({"pool", "rm", "life"});
  EXPECT_OK(r);
  EXPECT_FALSE(fs::exists(file));
  r = run({"pool", "check", "life"});
  EXPECT_NE(r.code, 0);
  EXPECT_CONTAINS(r.err, "does not exist");

  r = run({"pool", "restore", "life"});
  EXPECT_OK(r);
  EXPECT_TRUE(fs::exists(file));
  r = run({"pool", "check", "life"});
  EXPECT_OK(r);
  EXPECT_CONTAINS(r.out, "not cleanly closed");  // a restored pool runs recovery when opened
  r = run({"pool", "ls", "life"});
  EXPECT_OK(r);
  EXPECT_CONTAINS(r.out, "alpha");

  // A restored pool reads as crashed: snapshotting it would hide that from its program.
  r = run({"pool", "snapshot", "life"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "not cleanly closed");
  // Restoring over an existing pool needs --force.
  r = run({"pool", "restore", "life"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "--force");
  r = run({"pool", "restore", "life", "--force"});
  EXPECT_OK(r);

  r = run({"pool", "rm", "life", "--snapshot"});
  EXPECT_OK(r);
  EXPECT_FALSE(fs::exists(file));
  EXPECT_TRUE(fs::is_empty(snapshot_dir_));
  r = run({"pool", "restore", "life"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "no snapshot");
  EXPECT_TRUE(fs::is_empty(pm_dir_));
}

TEST_F(GpmkitCli, CreateRefusesADiskDirectory) {
  struct statfs st {};
  ASSERT_EQ(statfs(scratch_.c_str(), &st), 0);
  if (static_cast<unsigned long>(st.f_type) == TMPFS_MAGIC) {
    GTEST_SKIP() << scratch_ << " is on tmpfs: no disk directory to try";
  }
  const cli_result r = run({"pool", "create", "p", "--size", "1MiB", "--layout", "test", "--pm-dir",
                            (scratch_ / "pm").string()},
                           false);
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "tmpfs");
  EXPECT_FALSE(fs::exists(scratch_ / "pm" / "p"));
}

TEST_F(GpmkitCli, CreateRejectsBadSizesAndArguments) {
  struct bad {
    std::vector<std::string> args;
    int code;
    const char* message;
  };
  const std::vector<bad> cases = {
      {{"--size", "0"}, 2, "greater than 0"},
      {{"--size", "12XB"}, 2, "unknown suffix"},
      {{"--size", "64MB"}, 2, "MiB"},
      {{"--size", "1.5GiB"}, 2, "fractions"},
      {{"--size", "-4096"}, 2, "not a size"},
      {{"--size", "99999999999999999999"}, 2, "too large"},
      {{"--size", "99999999T"}, 2, "too large"},
      {{"--size", "5000"}, 1, "multiple of the page size"},
      {{"--size", "4096"}, 1, "directory entries"},
      {{"--size", "1MiB", "--objects", "0"}, 2, "--objects"},
      {{"--size", "1MiB", "--objects", "many"}, 2, "whole number"},
      {{"--size", "1MiB", "--size", "2MiB"}, 2, "more than once"},
      {{"--size"}, 2, "needs a value"},
      {{}, 2, "needs --size"},
  };
  for (const bad& c : cases) {
    std::vector<std::string> args = {"pool", "create", "p", "--layout", "test"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const cli_result r = run(args);
    EXPECT_EQ(r.code, c.code) << joined(args) << "\n" << r.err;
    EXPECT_CONTAINS(r.err, c.message);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
    EXPECT_FALSE(fs::exists(pool_file("p"))) << joined(args);
  }
  const cli_result no_layout = run({"pool", "create", "p", "--size", "1MiB"});
  EXPECT_EQ(no_layout.code, 2);
  EXPECT_CONTAINS(no_layout.err, "--layout");

  create("twice");
  const cli_result again = run({"pool", "create", "twice", "--size", "1MiB", "--layout", "x"});
  EXPECT_EQ(again.code, 1);
  EXPECT_CONTAINS(again.err, "already exists");
}

TEST_F(GpmkitCli, CheckNamesACorruptHeader) {
  create("bad");
  {
    std::fstream f(pool_file("bad"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    const char c = static_cast<char>(f.get());
    f.seekp(100);
    f.put(static_cast<char>(c ^ 0x40));
  }
  cli_result r = run({"pool", "check", "bad"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.out, "consistent: no");
  EXPECT_CONTAINS(r.out, "header checksum");
  EXPECT_CONTAINS(r.err, "header checksum");

  r = run({"pool", "check", "bad", "--json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(is_json(r.out)) << r.out;
  EXPECT_CONTAINS(r.out, "\"consistent\": false");

  for (const char* cmd : {"info", "ls", "snapshot"}) {
    r = run({"pool", cmd, "bad"});
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_CONTAINS(r.err, "header checksum");
  }
  EXPECT_FALSE(fs::exists(snapshot_dir_)) << "a corrupt pool must not be snapshotted";
}

TEST_F(GpmkitCli, CheckNamesATruncatedFile) {
  create("short");
  fs::resize_file(pool_file("short"), 512 * 1024);
  cli_result r = run({"pool", "check", "short"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.out, "truncated");
  EXPECT_CONTAINS(r.err, "truncated");

  fs::resize_file(pool_file("short"), 100);
  r = run({"pool", "check", "short"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "too short");

  r = run({"pool", "info", "short"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "too short");
  r = run({"pool", "rm", "short"});
  EXPECT_OK(r);
}

TEST_F(GpmkitCli, CheckSaysWhichFormatAnOldPoolHasAndWhichItReads) {
  create("old");
  {
    // Major version 1 at offset 8 of the common object header: a pool of format 1.0.
    std::fstream f(pool_file("old"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.put(1);
    f.put(0);
  }
  cli_result r = run({"pool", "check", "old"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.out, "written in format version 1.0, older than this gpmkit reads (2.x)");
  EXPECT_CONTAINS(r.err, "written in format version 1.0, older than this gpmkit reads (2.x)");
  r = run({"pool", "info", "old"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "format version 1.0");
  // Another version is not "inconsistent": this gpmkit cannot read it.
  {
    std::fstream f(pool_file("old"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.put(9);
  }
  r = run({"pool", "check", "old"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "newer than this gpmkit reads (2.x): upgrade gpmkit");
  EXPECT_EQ(r.err.find("inconsistent"), std::string::npos) << r.err;
}

TEST_F(GpmkitCli, CommandLineMistakesAreUsageErrors) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"frobnicate"},
      {"pool"},
      {"pool", "frobnicate"},
      {"pool", "info"},
      {"pool", "info", "a", "b"},
      {"pool", "info", "a", "--frob"},
      {"pool", "rm", "a", "--snapshot=yes"},
      {"--size", "1", "pool", "info", "a"},
      {"info", "-x"},
  };
  for (const auto& args : cases) {
    const cli_result r = run(args);
    EXPECT_EQ(r.code, 2) << joined(args) << "\n" << r.err;
    EXPECT_CONTAINS(r.err, "gpmkit: ");
    EXPECT_CONTAINS(r.err, "--help");
  }
}

TEST_F(GpmkitCli, EveryCommandHasHelp) {
  for (const char* cmd : {"info", "pool create", "pool info", "pool ls", "pool check",
                          "pool snapshot", "pool restore", "pool rm", "ooc stat", "ooc recover"}) {
    std::vector<std::string> args;
    std::istringstream words(cmd);
    for (std::string w; words >> w;) args.push_back(w);
    args.push_back("--help");
    const cli_result r = run(args, false);
    EXPECT_OK(r);
    EXPECT_CONTAINS(r.out, std::string("usage: gpmkit ") + cmd);
    EXPECT_CONTAINS(r.out, "--pm-dir");
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, {"pool", "--help"}, {"help", "pool", "ls"}}) {
    const cli_result r = run(args, false);
    EXPECT_OK(r);
    EXPECT_CONTAINS(r.out, "usage: gpmkit");
  }
}

TEST_F(GpmkitCli, APoolOpenForWritingIsBusyNotInconsistent) {
  create("held");
  gpm::pool p = gpm::pool::open("held", "test", library_options());
  for (const char* cmd : {"info", "ls", "check", "snapshot", "rm"}) {
    const auto start = std::chrono::steady_clock::now();
    const cli_result r = run({"pool", cmd, "held"});
    // A running holder is reported at once (every "busy" used to wait 3 s first).
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)) << cmd;
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_CONTAINS(r.err, "open for writing");
    EXPECT_EQ(r.err.find("inconsistent"), std::string::npos) << r.err;
  }
  p.close();
  EXPECT_OK(run({"pool", "rm", "held"}));
}

TEST_F(GpmkitCli, RmRefusesFilesThatAreNotPools) {
  fs::create_directories(pm_dir_);
  { std::ofstream(pool_file("notes.txt")) << "my notes\n"; }
  cli_result r = run({"pool", "rm", "notes.txt"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "not a gpmkit pool");
  EXPECT_TRUE(fs::exists(pool_file("notes.txt")));
  r = run({"pool", "rm", "/dev/null"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "device node");
  EXPECT_TRUE(fs::exists("/dev/null"));
}

// Pools named alike in two PM directories: each has its own snapshot, `restore --force` of the
// one never snapshotted finds nothing, and a plain file at a pool's path is never replaced.
TEST_F(GpmkitCli, RestoreUsesOnlyThePoolsOwnSnapshot) {
  create("twin");
  ASSERT_OK(run({"pool", "snapshot", "twin"}));
  const std::string other = (pm_dir_ / "other").string();
  cli_result r = run({"pool", "create", "twin", "--size", "1MiB", "--layout", "test", "--pm-dir",
                      other, "--snapshot-dir", snapshot_dir_.string()},
                     false);
  ASSERT_OK(r);
  r = run({"pool", "restore", "twin", "--force", "--pm-dir", other, "--snapshot-dir",
           snapshot_dir_.string()},
          false);
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "no snapshot");

  fs::remove(pool_file("twin"));
  { std::ofstream(pool_file("twin")) << "not a pool\n"; }
  r = run({"pool", "restore", "twin", "--force"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "not a gpmkit pool");
  EXPECT_EQ(read_file(pool_file("twin")), "not a pool\n");
}

TEST_F(GpmkitCli, AFifoOrADirectoryIsRefusedAtOnce) {
  fs::create_directories(pm_dir_ / "dir");
  ASSERT_EQ(::mkfifo(pool_file("fifo").c_str(), 0600), 0);
  for (const char* cmd : {"info", "ls", "check", "snapshot"}) {
    cli_result r = run({"pool", cmd, "fifo"});
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_CONTAINS(r.err, "FIFO");
    r = run({"pool", cmd, "dir"});
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_CONTAINS(r.err, "is a directory");
    EXPECT_EQ(r.err.find("No such device"), std::string::npos) << r.err;
  }
}

// Names are data: an object named with an ANSI escape and a newline is printed escaped in text
// (it used to reach the terminal raw), and as JSON escapes in JSON.
TEST_F(GpmkitCli, TextOutputEscapesControlCharacters) {
  create("names");
  {
    gpm::pool p = gpm::pool::open("names", "test", library_options());
    p.allocate("\x1b[31mred\nline\x9b\xc2\x9b\\", 64);  // a stray byte, then C1 CSI in UTF-8
  }
  cli_result r = run({"pool", "ls", "names"});
  EXPECT_OK(r);
  EXPECT_CONTAINS(r.out, "\\x1b[31mred\\x0aline\\x9b\\xc2\\x9b\\x5c");
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "a raw escape reached the output";
  r = run({"pool", "ls", "names", "--json"});
  EXPECT_OK(r);
  EXPECT_TRUE(is_json(r.out)) << r.out;
  EXPECT_CONTAINS(r.out, "\\u001b[31mred\\nline");
  // Messages on stderr too.
  const std::string odd = "odd\x1b[2Jname";
  r = run({"pool", "info", odd});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "odd\\x1b[2Jname");
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
}

// docs/cli.md: with --json, stdout always parses, failures included.
TEST_F(GpmkitCli, JsonFailuresPrintAnErrorObjectOnStdout) {
  cli_result r = run({"pool", "info", "missing", "--json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(is_json(r.out)) << r.out;
  EXPECT_CONTAINS(r.out, "\"code\": \"not_found\"");
  EXPECT_CONTAINS(r.out, "does not exist");
  EXPECT_CONTAINS(r.err, "does not exist");
  r = run({"pool", "info", "--json"});  // no PATH: a usage error
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(is_json(r.out)) << r.out;
  EXPECT_CONTAINS(r.out, "\"code\": \"usage\"");
  create("held");
  gpm::pool p = gpm::pool::open("held", "test", library_options());
  r = run({"pool", "snapshot", "held", "--json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(is_json(r.out)) << r.out;
  EXPECT_CONTAINS(r.out, "\"code\": \"busy\"");
  r = run({"pool", "rm", "held", "--json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(is_json(r.out)) << r.out;
}

// Commands run at once on one pool (snapshots, a forced restore, readers): each ends with a
// status (never a signal), prints JSON on stdout either way, and leaves a pool that checks and a
// snapshot that restores.
TEST_F(GpmkitCli, ConcurrentCommandsOnOnePoolEndCleanly) {
  create("shared");
  ASSERT_OK(run({"pool", "snapshot", "shared"}));
  const std::vector<std::vector<std::string>> commands = {
      {"pool", "snapshot", "shared", "--json"},
      {"pool", "snapshot", "shared", "--json"},
      {"pool", "restore", "shared", "--force", "--json"},
      {"pool", "info", "shared", "--json"},
      {"pool", "check", "shared", "--json"},
      {"pool", "ls", "shared", "--json"}};
  for (int round = 0; round < 3; ++round) {
    std::vector<started> running;
    for (std::size_t i = 0; i < commands.size(); ++i) {
      running.push_back(start(commands[i], true, std::to_string(i)));
    }
    for (const started& s : running) {
      const cli_result r = finish(s);
      EXPECT_TRUE(r.code == 0 || r.code == 1) << joined(s.args) << ": " << r.code << "\n" << r.err;
      EXPECT_TRUE(is_json(r.out)) << joined(s.args) << ": " << r.out << "\n" << r.err;
    }
    const cli_result check = run({"pool", "check", "shared"});
    EXPECT_OK(check);
  }
  EXPECT_OK(run({"pool", "restore", "shared", "--force"}));
  EXPECT_OK(run({"pool", "check", "shared"}));
}

TEST_F(GpmkitCli, PathsWithASlashIgnoreThePmDirectory) {
  create("named");
  const std::string full = pool_file("named").string();
  const cli_result r = run({"pool", "info", full, "--pm-dir", "/nonexistent"}, false);
  EXPECT_OK(r);
  EXPECT_CONTAINS(r.out, full);
}

// `gpmkit ooc`: a file without an epoch log, a scan through a read-only mapping (per-tier
// telemetry), recovery with nothing to do, and the errors: a foreign log, a missing file, a FIFO
// and a device, no subcommand.
TEST_F(GpmkitCli, OocStatShowsTheEpochLogAndScanTelemetry) {
  const std::string data = (scratch_ / "data.bin").string();
  {
    std::ofstream f(data, std::ios::binary);
    const std::string mib(1 << 20, 'x');
    f << mib;
  }
  cli_result r = run({"ooc", "stat", data});
  EXPECT_OK(r);
  EXPECT_CONTAINS(r.out, "never mapped crash-consistently");
  r = run({"ooc", "stat", data, "--scan", "--line-bytes", "64K", "--gpu-cache", "256K", "--json"});
  EXPECT_OK(r);
  EXPECT_TRUE(is_json(r.out)) << r.out;
  EXPECT_CONTAINS(r.out, "\"misses\": 16");  // 16 lines of 64 KiB, each missed once
  EXPECT_CONTAINS(r.out, "\"bytes_read\": 1048576");
  EXPECT_CONTAINS(r.out, "\"map_seconds\": ");
  r = run({"ooc", "recover", data});
  EXPECT_OK(r);
  EXPECT_CONTAINS(r.out, "replayed:        no");
  {
    std::ofstream log(data + ".ooc-log", std::ios::binary);
    log << std::string(8192, 'z');
  }
  for (const char* cmd : {"stat", "recover"}) {
    r = run({"ooc", cmd, data});
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_CONTAINS(r.err, "not a gpm::ooc epoch log");
  }
  EXPECT_TRUE(fs::exists(data + ".ooc-log"));
  r = run({"ooc", "stat", (scratch_ / "missing.bin").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "missing.bin");
  const std::string fifo = (scratch_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const char* cmd : {"stat", "recover"}) {
    for (const std::string& special : {fifo, std::string("/dev/null")}) {
      r = run({"ooc", cmd, special});
      EXPECT_EQ(r.code, 1) << cmd << " " << special;
      EXPECT_CONTAINS(r.err, special + " is a ");
      EXPECT_CONTAINS(r.err, "regular files");
    }
  }
  r = run({"ooc"});
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "stat, recover");
}

TEST(JsonChecker, AcceptsJsonAndRejectsTheRest) {
  EXPECT_TRUE(is_json(R"({"a": [1, -2.5e3, true, null, "x\u00e9\n"], "b": {}})"));
  EXPECT_FALSE(is_json(R"({"a": 1,})"));
  EXPECT_FALSE(is_json(R"({"a" 1})"));
  EXPECT_FALSE(is_json("01"));
  EXPECT_FALSE(is_json("\"unterminated"));
  EXPECT_FALSE(is_json("{} {}"));
}

}  // namespace
