#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "lib/io/file_stream.h"
#include "lib/io/text_line.h"
#include "tests/test_util.h"

using namespace tfdata;
using tfdata::testing::TempDir;
using tfdata::testing::WriteFile;

namespace {

std::vector<std::string> Lines(const std::string& data, Compression c = Compression::kNone) {
  auto reader = TextLineReader::FromString("mem", data, c);
  REQUIRE(reader.ok());
  std::vector<std::string> out;
  std::string line;
  for (;;) {
    auto more = (*reader)->Next(&line);
    REQUIRE(more.ok());
    if (!*more) break;
    out.push_back(line);
  }
  return out;
}

using V = std::vector<std::string>;

}  // namespace

TEST_CASE("text lines split on newline and drop a trailing carriage return", "[text_line]") {
  CHECK(Lines("").empty());
  CHECK(Lines("a\nb\n") == V{"a", "b"});
  CHECK(Lines("a\nb") == V{"a", "b"});
  CHECK(Lines("a\r\nb\r\n") == V{"a", "b"});
  CHECK(Lines("\n\n") == V{"", ""});
  CHECK(Lines("a\rb\n") == V{"a\rb"});  // only a \r right before the \n is a line ending
  CHECK(Lines("x\r") == V{"x"});
  CHECK(Lines(std::string("n\0ul\n", 5)) == V{std::string("n\0ul", 4)});
}

TEST_CASE("long lines spanning read chunks come back whole", "[text_line]") {
  std::string data;
  V expected;
  for (int i = 0; i < 50; ++i) {
    expected.push_back(std::string(static_cast<size_t>(i * 7919 % 200000), static_cast<char>('a' + i % 26)));
    data += expected.back() + (i % 2 ? "\r\n" : "\n");
  }
  CHECK(Lines(data) == expected);
}

TEST_CASE("compressed text files read line by line from disk", "[text_line]") {
  TempDir dir;
  for (Compression c : {Compression::kNone, Compression::kGzip, Compression::kZlib}) {
    INFO(CompressionName(c));
    const std::string path = dir.Join(std::string("t.") + CompressionName(c));
    auto out = OutputStream::Open(path, c);
    REQUIRE(out.ok());
    REQUIRE((*out)->Write("first\nsecond\r\n").ok());
    REQUIRE((*out)->Flush().ok());
    REQUIRE((*out)->Write("last").ok());
    REQUIRE((*out)->Close().ok());
    auto reader = TextLineReader::Open(path, c);
    REQUIRE(reader.ok());
    V got;
    std::string line;
    while (true) {
      auto more = (*reader)->Next(&line);
      REQUIRE(more.ok());
      if (!*more) break;
      got.push_back(line);
    }
    CHECK(got == V{"first", "second", "last"});
    CHECK((*reader)->line_number() == 3);
  }
}

TEST_CASE("text line errors name the file", "[text_line]") {
  auto missing = TextLineReader::Open("/nonexistent/x.txt", Compression::kNone);
  REQUIRE_FALSE(missing.ok());
  CHECK(std::string(missing.status().message()) == "cannot open /nonexistent/x.txt: No such file or directory");

  auto bad = TextLineReader::FromString("junk.gz", "this is not gzip\n", Compression::kGzip);
  REQUIRE(bad.ok());
  std::string line;
  auto r = (*bad)->Next(&line);
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()).find("junk.gz: corrupt gzip data at byte ") == 0);
}
