// The tfdata binary: run and bench, output formats, errors and exit codes.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "lib/io/tfrecord.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

TEST_CASE("tfdata run prints the seed example 0..9", "[cli]") {
  auto r = RunTfdata({"run", SourcePath("examples/range.pbtxt")});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
  CHECK_THAT(r.err, Catch::Contains("10 elements"));
}

TEST_CASE("tfdata run --take, --format and --output", "[cli]") {
  TempDir dir;
  WriteFile(dir.Join("p.pbtxt"), "op { range { stop: 6 } } op { batch { batch_size: 2 } }");
  auto text = RunTfdata({"run", dir.Join("p.pbtxt"), "--take", "2", "-q"});
  CHECK(text.exit_code == 0);
  CHECK(text.out == "[0 1]\n[2 3]\n");
  CHECK(text.err.empty());
  auto json = RunTfdata({"run", dir.Join("p.pbtxt"), "--format", "jsonl", "-q"});
  CHECK(json.out == "[0, 1]\n[2, 3]\n[4, 5]\n");
  auto null = RunTfdata({"run", dir.Join("p.pbtxt"), "--format", "null"});
  CHECK(null.out.empty());
  CHECK_THAT(null.err, Catch::Contains("3 elements"));
  WriteFile(dir.Join("s.pbtxt"),
            R"(op { from_tensor_slices { tensor { dtype: STRING string_values: ["ab", "c"] } } })");
  auto rec = RunTfdata({"run", dir.Join("s.pbtxt"), "--format", "tfrecord", "--output", dir.Join("out.tfrecord")});
  CHECK(rec.exit_code == 0);
  auto reader = TFRecordReader::Open(dir.Join("out.tfrecord"), Compression::kNone);
  REQUIRE(reader.ok());
  std::string record;
  REQUIRE(*(*reader)->Next(&record));
  CHECK(record == "ab");
  auto strings = RunTfdata({"run", dir.Join("s.pbtxt"), "--format", "jsonl", "-q"});
  CHECK(strings.out == "\"ab\"\n\"c\"\n");
}

TEST_CASE("tfdata run: bad input exits non-zero with a clear message", "[cli]") {
  TempDir dir;
  auto missing = RunTfdata({"run", dir.Join("none.pbtxt")});
  CHECK(missing.exit_code == 3);
  CHECK_THAT(missing.err, Catch::Contains("none.pbtxt"));
  WriteFile(dir.Join("bad.pbtxt"), "op { range { stop: 3 } }\nop { shuffle { buffer_size: -4 } }\n");
  auto invalid = RunTfdata({"run", dir.Join("bad.pbtxt")});
  CHECK(invalid.exit_code == 3);
  CHECK_THAT(invalid.err, Catch::Contains("bad.pbtxt:2:1: op 1 (shuffle): buffer_size must be positive"));
  WriteFile(dir.Join("garbage.tfrecord"), "this is not a tfrecord file at all");
  WriteFile(dir.Join("corrupt.pbtxt"), "op { tfrecord { file: \"" + dir.Join("garbage.tfrecord") + "\" } }");
  auto corrupt = RunTfdata({"run", dir.Join("corrupt.pbtxt")});
  CHECK(corrupt.exit_code == 1);
  CHECK_THAT(corrupt.err, Catch::Contains("garbage.tfrecord"));
  auto usage = RunTfdata({"run", SourcePath("examples/range.pbtxt"), "--format", "xml"});
  CHECK(usage.exit_code == 2);
  CHECK_THAT(usage.err, Catch::Contains("unknown format"));
  auto no_cmd = RunTfdata({});
  CHECK(no_cmd.exit_code == 2);
  auto tfrecord_stdout = RunTfdata({"run", SourcePath("examples/range.pbtxt"), "--format", "tfrecord"});
  CHECK(tfrecord_stdout.exit_code == 2);
}

TEST_CASE("tfdata bench reports both rates and the impact estimate", "[cli]") {
  TempDir dir;
  WriteFile(dir.Join("slow.pbtxt"), "op { range { stop: 1000000 } } op { map { fn { sleep { micros: 1000 } } } }");
  auto r = RunTfdata(
      {"bench", dir.Join("slow.pbtxt"), "--duration", "0.3", "--warmup", "0", "--model-rate", "5000", "--json"});
  REQUIRE(r.exit_code == 0);
  // A pipeline limited to ~1000 elements/s feeding a model that wants 5000/s is input-bound and
  // needs several workers; the replayed first element is far faster than the pipeline.
  CHECK_THAT(r.out, Catch::Contains("\"input_bound\": true"));
  CHECK_THAT(r.out, Catch::Contains("\"workers_needed\": "));
  auto table = RunTfdata({"bench", dir.Join("slow.pbtxt"), "--duration", "0.2", "--warmup", "0", "--step-time", "0.2"});
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.out, Catch::Contains("input-bound:              yes"));
  CHECK_THAT(table.out, Catch::Contains("take(1).cache().repeat()"));
  auto bad = RunTfdata({"bench", dir.Join("slow.pbtxt"), "--duration", "0"});
  CHECK(bad.exit_code == 2);
  WriteFile(dir.Join("empty.pbtxt"), "op { range { stop: 0 } }");
  auto empty = RunTfdata({"bench", dir.Join("empty.pbtxt"), "--duration", "0.1", "--warmup", "0"});
  CHECK(empty.exit_code == 1);
  CHECK_THAT(empty.err, Catch::Contains("no elements"));
}

TEST_CASE("tfdata run: a pipeline with a user plugin, and a missing plugin", "[cli]") {
  TempDir dir;
  WriteFile(dir.Join("p.pbtxt"), std::string("op { range { stop: 3 } } op { map { fn { plugin { library: \"") +
                                     TFDATA_EXAMPLE_PLUGIN + "\" function: \"scale\" config: \"10\" } } } }");
  auto ok = RunTfdata({"run", dir.Join("p.pbtxt"), "-q"});
  CHECK(ok.exit_code == 0);
  CHECK(ok.out == "0\n10\n20\n");
  WriteFile(dir.Join("missing.pbtxt"), "op { range { stop: 3 } } op { map { fn { plugin { library: \"" +
                                           dir.Join("nope.so") + "\" function: \"scale\" } } } }");
  auto missing = RunTfdata({"run", dir.Join("missing.pbtxt")});
  CHECK(missing.exit_code == 3);
  CHECK_THAT(missing.err, Catch::Contains("nope.so"));
}

TEST_CASE("tfdata run stops on SIGINT with exit code 130 and its summary", "[cli]") {
  TempDir dir;
  WriteFile(dir.Join("forever.pbtxt"), "op { range { stop: 1 } } op { repeat { } }");
  const std::string err_path = dir.Join("stderr");
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(devnull, 1);
    dup2(err, 2);
    execl(TFDATA_BINARY, TFDATA_BINARY, "run", dir.Join("forever.pbtxt").c_str(), "--format", "null", nullptr);
    _exit(127);
  }
  // Let it start producing, then interrupt. (The handler is installed first thing in main, so an
  // early signal would still give a clean stop.)
  usleep(300 * 1000);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK_THAT(ReadFile(err_path), Catch::Contains("(interrupted)"));
}
