// gpm::format::object_header, the header every on-media structure starts with: making and sealing
// one, and every class of problem the one validator reports (with its code and a message that
// says what is wrong and what to do).
#include <gpm/pool/object_header.hpp>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "gpm_test.hpp"

namespace {

namespace format = gpm::format;

// A module's header as modules write them: the common part, then its own fields.
struct widget_header {
  format::object_header common;
  std::uint64_t widgets;
  std::uint64_t reserved[7];
};
static_assert(sizeof(widget_header) == 128);

constexpr format::object_kind kWidget{
    "test widget", {'G', 'P', 'M', 'W', 'D', 'G', 'T', '\0'}, 3, 1, sizeof(widget_header)};
constexpr std::uint64_t kObjectBytes = 4096;

// A sound widget: its header, then the rest of its object.
std::vector<char> make_widget() {
  std::vector<char> object(kObjectBytes);
  widget_header h{};
  h.common = format::make_header(kWidget, kObjectBytes);
  h.widgets = 42;
  std::memcpy(object.data(), &h, sizeof h);
  format::seal_header(object.data());
  return object;
}

widget_header& header_of(std::vector<char>& object) {
  return *reinterpret_cast<widget_header*>(object.data());
}

void reseal(std::vector<char>& object) { format::seal_header(object.data()); }

// Expects check_header to report `code` with every one of `words` in its text.
void expect_problem(const std::vector<char>& object, std::uint64_t available, gpm::errc code,
                    const std::vector<std::string>& words) {
  const auto p = format::check_header(object.data(), available, kWidget);
  ASSERT_TRUE(p.has_value()) << "no problem found";
  EXPECT_EQ(p->code, code) << p->text;
  for (const std::string& w : words) EXPECT_NE(p->text.find(w), std::string::npos) << p->text;
}

TEST(ObjectHeader, MadeAndSealedHeadersValidate) {
  std::vector<char> object = make_widget();
  const widget_header& h = header_of(object);
  EXPECT_EQ(std::memcmp(h.common.magic, kWidget.magic, 8), 0);
  EXPECT_EQ(h.common.major, 3);
  EXPECT_EQ(h.common.minor, 1);
  EXPECT_EQ(h.common.header_bytes, sizeof(widget_header));
  EXPECT_EQ(h.common.object_bytes, kObjectBytes);
  EXPECT_EQ(h.common.incompat_features, 0u);
  EXPECT_GT(h.common.created_ns, 0u);
  EXPECT_EQ(h.common.uuid[6] >> 4, 4) << "RFC 4122 version 4";
  EXPECT_EQ(h.common.uuid[8] >> 6, 2) << "RFC 4122 variant";
  EXPECT_EQ(h.common.checksum, format::header_checksum(object.data(), sizeof(widget_header)));
  EXPECT_FALSE(format::check_header(object.data(), kObjectBytes, kWidget).has_value());
  EXPECT_NO_THROW(format::validate_header(object.data(), kObjectBytes, kWidget, "widget 'w'"));
}

TEST(ObjectHeader, EveryHeaderHasItsOwnUuid) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const format::object_header h = format::make_header(kWidget, kObjectBytes);
    const std::string u = format::uuid_string(h.uuid);
    EXPECT_EQ(u.size(), 36u);
    EXPECT_EQ(u[8], '-');
    EXPECT_EQ(u[14], '4');
    EXPECT_TRUE(seen.insert(u).second) << "uuid repeated: " << u;
  }
}

TEST(ObjectHeader, TheChecksumCoversTheModuleFieldsAndIgnoresBytesBeyondTheHeader) {
  std::vector<char> object = make_widget();
  header_of(object).widgets ^= 1;
  expect_problem(object, kObjectBytes, gpm::errc::corrupt, {"header checksum", "snapshot"});
  header_of(object).widgets ^= 1;
  object[sizeof(widget_header) + 10] ^= 1;  // the object's own data, not its header
  EXPECT_FALSE(format::check_header(object.data(), kObjectBytes, kWidget).has_value());
}

TEST(ObjectHeader, TooShortToHoldAHeader) {
  const std::vector<char> object = make_widget();
  expect_problem(object, 0, gpm::errc::corrupt, {"empty"});
  expect_problem(object, 40, gpm::errc::corrupt, {"40 bytes", "too short", "test widget"});
  // Room for the common part but not for the whole header.
  expect_problem(object, 100, gpm::errc::corrupt, {"100 bytes", "too short", "(128 bytes)"});
  // Too short is said before anything read from the bytes: a zeroed 64-byte object is not an
  // interrupted creation of a structure whose header alone takes 128.
  expect_problem(std::vector<char>(kObjectBytes), 64, gpm::errc::corrupt,
                 {"64 bytes", "too short"});
}

TEST(ObjectHeader, ZeroMagicMeansCreationWasInterrupted) {
  std::vector<char> object(kObjectBytes, 0);
  expect_problem(object, kObjectBytes, gpm::errc::corrupt, {"interrupted", "create it again"});
}

TEST(ObjectHeader, ForeignMagicNamesBothMagics) {
  std::vector<char> object = make_widget();
  std::memcpy(header_of(object).common.magic, "GPMHASH\0", 8);
  reseal(object);
  expect_problem(object, kObjectBytes, gpm::errc::corrupt,
                 {"not a test widget", "is \"GPMHASH\", not \"GPMWDGT\""});
  std::vector<char> text(kObjectBytes, 'x');
  expect_problem(text, kObjectBytes, gpm::errc::corrupt, {"not a test widget", "\"xxxxxxxx\""});
  // Bytes that are not text are shown in hex, without escapes a front end would escape again.
  std::vector<char> binary = make_widget();
  std::memcpy(header_of(binary).common.magic, "\x20\x29\\\x82\xe1\x00\x01\xfb", 8);
  expect_problem(binary, kObjectBytes, gpm::errc::corrupt,
                 {"its magic is bytes 20 29 5c 82 e1 00 01 fb, not \"GPMWDGT\""});
}

TEST(ObjectHeader, NewerAndOlderMajorVersionsAreRefusedEvenWithAnotherChecksum) {
  std::vector<char> object = make_widget();
  header_of(object).common.major = 4;  // not resealed: another version may checksum differently
  expect_problem(object, kObjectBytes, gpm::errc::version,
                 {"format version 4.1", "newer", "(3.x)", "upgrade gpmkit"});
  header_of(object).common.major = 2;
  reseal(object);
  expect_problem(object, kObjectBytes, gpm::errc::version,
                 {"format version 2.1", "older", "(3.x)", "release that wrote it"});
  header_of(object).common.major = 3;
  header_of(object).common.minor = 9;  // a newer minor is compatible
  reseal(object);
  EXPECT_FALSE(format::check_header(object.data(), kObjectBytes, kWidget).has_value());
}

TEST(ObjectHeader, AnotherHeaderSizeIsCorrupt) {
  std::vector<char> object = make_widget();
  header_of(object).common.header_bytes = 96;
  expect_problem(object, kObjectBytes, gpm::errc::corrupt, {"96 bytes", "128", "corrupt"});
  header_of(object).common.header_bytes = 1 << 30;  // never read past the object
  expect_problem(object, kObjectBytes, gpm::errc::corrupt, {"corrupt"});
}

TEST(ObjectHeader, UnknownIncompatibleFeaturesAreRefused) {
  std::vector<char> object = make_widget();
  header_of(object).common.incompat_features = 1ull << 40;
  reseal(object);
  expect_problem(object, kObjectBytes, gpm::errc::version,
                 {"features", "0x10000000000", "upgrade gpmkit"});
}

// A kind that knows a feature bit accepts headers with it and still refuses the others, naming
// only those.
TEST(ObjectHeader, KnownIncompatibleFeaturesAreAccepted) {
  format::object_kind knowing = kWidget;
  knowing.known_incompat = 0x5;
  std::vector<char> object = make_widget();
  header_of(object).common.incompat_features = 0x4;
  reseal(object);
  EXPECT_FALSE(format::check_header(object.data(), kObjectBytes, knowing).has_value());
  expect_problem(object, kObjectBytes, gpm::errc::version, {"features", "0x4"});
  header_of(object).common.incompat_features = 0x6;
  reseal(object);
  const auto problem = format::check_header(object.data(), kObjectBytes, knowing);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->code, gpm::errc::version);
  EXPECT_NE(problem->text.find("bits 0x2)"), std::string::npos) << problem->text;
}

TEST(ObjectHeader, TruncatedAndExtendedObjects) {
  const std::vector<char> object = make_widget();
  expect_problem(object, kObjectBytes - 1, gpm::errc::corrupt, {"4096 bytes", "4095", "truncated"});
  expect_problem(object, kObjectBytes + 8, gpm::errc::corrupt, {"4104", "extended"});
}

TEST(ObjectHeader, ValidateThrowsTheProblemAfterTheStructuresName) {
  std::vector<char> object = make_widget();
  header_of(object).common.major = 7;
  try {
    format::validate_header(object.data(), kObjectBytes, kWidget, "widget 'w' in pool /p");
    FAIL() << "a newer version was accepted";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::version);
    EXPECT_EQ(
        std::string(e.what()).rfind("widget 'w' in pool /p: written in format version 7.1", 0), 0u)
        << e.what();
  }
}

}  // namespace
