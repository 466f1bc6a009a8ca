#include <zlib.h>
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "lib/io/tfrecord.h"
#include "tests/test_util.h"

using namespace tfdata;
using tfdata::testing::ReadFile;
using tfdata::testing::TempDir;
using tfdata::testing::WriteFile;

namespace {

// The record "hello" written by hand from the format description. The CRCs were computed
// independently (a bitwise CRC-32C in a Python one-off), not with lib/io/crc32c:
//   length 5 (uint64 LE), masked crc32c(length bytes) = 0x3e04b2ea,
//   "hello", masked crc32c("hello") = 0x191c1fbb.
const std::string kHelloRecord(
    "\x05\x00\x00\x00\x00\x00\x00\x00"
    "\xea\xb2\x04\x3e"
    "hello"
    "\xbb\x1f\x1c\x19",
    21);
// The empty record: masked length crc 0x07980329, masked crc32c("") = 0xa282ead8.
const std::string kEmptyRecord(
    "\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x29\x03\x98\x07"
    "\xd8\xea\x82\xa2",
    16);

std::vector<std::string> ReadAll(const std::string& path, Compression c) {
  auto reader = TFRecordReader::Open(path, c);
  REQUIRE(reader.ok());
  std::vector<std::string> out;
  std::string rec;
  for (;;) {
    auto more = (*reader)->Next(&rec);
    REQUIRE(more.ok());
    if (!*more) break;
    out.push_back(rec);
  }
  return out;
}

void WriteAll(const std::string& path, Compression c, const std::vector<std::string>& records) {
  auto writer = TFRecordWriter::Open(path, c);
  REQUIRE(writer.ok());
  for (const auto& r : records) REQUIRE((*writer)->Write(r).ok());
  REQUIRE((*writer)->Close().ok());
}

// Reads until the end or the first error; returns the error (OK if none).
absl::Status Drain(const std::string& path, Compression c, int* records = nullptr) {
  auto reader = TFRecordReader::Open(path, c);
  if (!reader.ok()) return reader.status();
  std::string rec;
  int n = 0;
  for (;;) {
    auto more = (*reader)->Next(&rec);
    if (!more.ok()) {
      if (records) *records = n;
      return more.status();
    }
    if (!*more) break;
    ++n;
  }
  if (records) *records = n;
  return absl::OkStatus();
}

std::vector<std::string> SampleRecords() {
  std::vector<std::string> r = {"hello", "", std::string(1, '\0'), "world"};
  std::string big;
  for (int i = 0; i < 700000; ++i) big.push_back(static_cast<char>(i * 31 + (i >> 9)));
  r.push_back(big);  // larger than the stream buffers
  for (int i = 0; i < 100; ++i) r.push_back(std::string(static_cast<size_t>(i), static_cast<char>('a' + i % 26)));
  return r;
}

}  // namespace

TEST_CASE("a hand-written TFRecord fixture reads back", "[tfrecord]") {
  TempDir dir;
  const std::string path = dir.Join("hello.tfrecord");
  WriteFile(path, kHelloRecord + kEmptyRecord);
  CHECK(ReadAll(path, Compression::kNone) == std::vector<std::string>{"hello", ""});
}

TEST_CASE("writing records produces exactly the published bytes", "[tfrecord]") {
  TempDir dir;
  const std::string path = dir.Join("out.tfrecord");
  WriteAll(path, Compression::kNone, {"hello", ""});
  CHECK(ReadFile(path) == kHelloRecord + kEmptyRecord);
}

TEST_CASE("tfrecord round trips with every compression", "[tfrecord]") {
  TempDir dir;
  const auto records = SampleRecords();
  for (Compression c : {Compression::kNone, Compression::kGzip, Compression::kZlib}) {
    INFO(CompressionName(c));
    const std::string path = dir.Join(std::string("r.") + CompressionName(c));
    WriteAll(path, c, records);
    CHECK(ReadAll(path, c) == records);
    auto from_memory = TFRecordReader::FromString("mem", ReadFile(path), c);
    REQUIRE(from_memory.ok());
    std::string rec;
    auto first = (*from_memory)->Next(&rec);
    REQUIRE(first.ok());
    CHECK(*first);
    CHECK(rec == "hello");
    CHECK((*from_memory)->offset() == 21);
  }
}

TEST_CASE("compressed tfrecord files have the right container format", "[tfrecord]") {
  TempDir dir;
  const std::string gz = dir.Join("a.gz");
  WriteAll(gz, Compression::kGzip, {"hello"});
  const std::string gz_bytes = ReadFile(gz);
  REQUIRE(gz_bytes.size() > 2);
  CHECK(static_cast<uint8_t>(gz_bytes[0]) == 0x1f);
  CHECK(static_cast<uint8_t>(gz_bytes[1]) == 0x8b);

  const std::string zl = dir.Join("a.zlib");
  WriteAll(zl, Compression::kZlib, {"hello"});
  const std::string zl_bytes = ReadFile(zl);
  std::string plain(kHelloRecord.size() + 16, '\0');
  uLongf plain_len = plain.size();
  REQUIRE(uncompress(reinterpret_cast<Bytef*>(plain.data()), &plain_len,
                     reinterpret_cast<const Bytef*>(zl_bytes.data()), zl_bytes.size()) == Z_OK);
  plain.resize(plain_len);
  CHECK(plain == kHelloRecord);
}

TEST_CASE("concatenated gzip members read as one stream", "[tfrecord]") {
  TempDir dir;
  WriteAll(dir.Join("a.gz"), Compression::kGzip, {"one", "two"});
  WriteAll(dir.Join("b.gz"), Compression::kGzip, {"three"});
  const std::string both = dir.Join("both.gz");
  WriteFile(both, ReadFile(dir.Join("a.gz")) + ReadFile(dir.Join("b.gz")));
  CHECK(ReadAll(both, Compression::kGzip) == std::vector<std::string>{"one", "two", "three"});
}

TEST_CASE("an empty file holds zero records", "[tfrecord]") {
  TempDir dir;
  const std::string path = dir.Join("empty");
  WriteFile(path, "");
  for (Compression c : {Compression::kNone, Compression::kGzip, Compression::kZlib}) {
    CHECK(ReadAll(path, c).empty());
  }
  WriteAll(dir.Join("empty.gz"), Compression::kGzip, {});
  CHECK(ReadAll(dir.Join("empty.gz"), Compression::kGzip).empty());
}

TEST_CASE("a torn file gives a truncated-record error at every cut", "[tfrecord]") {
  TempDir dir;
  const std::string whole = kHelloRecord + kHelloRecord;
  const std::string path = dir.Join("torn.tfrecord");
  for (size_t cut = 1; cut < whole.size(); ++cut) {
    if (cut == kHelloRecord.size()) continue;  // a record boundary: a valid shorter file
    INFO("cut at " << cut);
    WriteFile(path, whole.substr(0, cut));
    int records = -1;
    absl::Status s = Drain(path, Compression::kNone, &records);
    CHECK(absl::IsDataLoss(s));
    const uint64_t at = cut < kHelloRecord.size() ? 0 : kHelloRecord.size();
    CHECK(std::string(s.message()) == path + ": truncated record at byte " + std::to_string(at));
    CHECK(records == (cut < kHelloRecord.size() ? 0 : 1));
  }
}

TEST_CASE("a torn compressed file is an error, never a crash", "[tfrecord]") {
  TempDir dir;
  for (Compression c : {Compression::kGzip, Compression::kZlib}) {
    INFO(CompressionName(c));
    const std::string full_path = dir.Join("full");
    WriteAll(full_path, c, {"hello", "world", std::string(3000, 'x')});
    const std::string full = ReadFile(full_path);
    const std::string path = dir.Join("torn");
    for (size_t cut = 1; cut < full.size(); ++cut) {
      INFO("cut at " << cut);
      WriteFile(path, full.substr(0, cut));
      absl::Status s = Drain(path, c);
      CHECK(absl::IsDataLoss(s));
      CHECK(std::string(s.message()).find(path + ": ") == 0);
      CHECK(std::string(s.message()).find("truncated") != std::string::npos);
    }
  }
}

TEST_CASE("a flipped byte gives a checksum error naming the offset", "[tfrecord]") {
  TempDir dir;
  const std::string path = dir.Join("bad.tfrecord");
  const std::string good = kHelloRecord + kHelloRecord;

  std::string bad_data = good;
  bad_data[kHelloRecord.size() + 13] ^= 0x01;  // inside the second record's "hello"
  WriteFile(path, bad_data);
  int records = -1;
  absl::Status s = Drain(path, Compression::kNone, &records);
  CHECK(absl::IsDataLoss(s));
  CHECK(std::string(s.message()) == path + ": corrupted record at byte 21 (data checksum mismatch)");
  CHECK(records == 1);

  std::string bad_length = good;
  bad_length[0] ^= 0x40;  // length 69 instead of 5
  WriteFile(path, bad_length);
  s = Drain(path, Compression::kNone);
  CHECK(std::string(s.message()) == path + ": corrupted record at byte 0 (length checksum mismatch)");

  std::string bad_crc = good;
  bad_crc[20] ^= 0x80;  // the first record's data CRC itself
  WriteFile(path, bad_crc);
  s = Drain(path, Compression::kNone);
  CHECK(std::string(s.message()) == path + ": corrupted record at byte 0 (data checksum mismatch)");
}

TEST_CASE("an absurd length never allocates it", "[tfrecord]") {
  // A length of 2^62 with a valid length CRC must fail as a truncated record, both
  // uncompressed (size check) and compressed (incremental reads). The masked crc32c of
  // 00 00 00 00 00 00 00 40 is 0x00f0857f (independent Python one-off).
  TempDir dir;
  const std::string rec =
      std::string("\x00\x00\x00\x00\x00\x00\x00\x40", 8) + std::string("\x7f\x85\xf0\x00", 4) + "some data";
  const std::string path = dir.Join("huge");
  for (Compression c : {Compression::kNone, Compression::kGzip}) {
    INFO(CompressionName(c));
    auto out = OutputStream::Open(path, c);
    REQUIRE(out.ok());
    REQUIRE((*out)->Write(rec).ok());
    REQUIRE((*out)->Close().ok());
    absl::Status s = Drain(path, c);
    CHECK(std::string(s.message()) == path + ": truncated record at byte 0");
  }
}

TEST_CASE("a missing file is NotFound naming the path", "[tfrecord]") {
  auto r = TFRecordReader::Open("/nonexistent/dir/a.tfrecord", Compression::kNone);
  REQUIRE_FALSE(r.ok());
  CHECK(absl::IsNotFound(r.status()));
  CHECK(std::string(r.status().message()) == "cannot open /nonexistent/dir/a.tfrecord: No such file or directory");
}

TEST_CASE("corrupt gzip data names the file and byte", "[tfrecord]") {
  TempDir dir;
  const std::string path = dir.Join("bad.gz");
  WriteAll(path, Compression::kGzip, {"hello"});
  std::string bytes = ReadFile(path);
  bytes[2] = 0x07;  // compression method must be 8 (deflate)
  WriteFile(path, bytes);
  absl::Status s = Drain(path, Compression::kGzip);
  CHECK(absl::IsDataLoss(s));
  CHECK(std::string(s.message()).find(path + ": corrupt gzip data at byte ") == 0);
}
