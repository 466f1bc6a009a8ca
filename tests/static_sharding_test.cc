// Static sharding (file, data, file_or_data, hint): the pipeline rewrite, and real clusters with
// a fixed worker list.
#include <map>

#include <catch2/catch.hpp>

#include "lib/io/tfrecord.h"
#include "lib/pipeline/sharding.h"
#include "tests/pipeline_util.h"
#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

namespace {

std::vector<std::string> WriteFiles(const TempDir& dir, int files, int records, std::map<std::string, int>* all) {
  std::vector<std::string> paths;
  for (int f = 0; f < files; ++f) {
    paths.push_back(dir.Join("shard-" + std::to_string(f)));
    auto w = TFRecordWriter::Open(paths.back(), Compression::kNone);
    REQUIRE(w.ok());
    for (int r = 0; r < records; ++r) {
      const std::string rec = std::to_string(f) + "/" + std::to_string(r);
      REQUIRE((*w)->Write(rec).ok());
      ++(*all)[rec];
    }
    REQUIRE((*w)->Close().ok());
  }
  return paths;
}

std::string FileList(const std::vector<std::string>& paths) {
  std::string list;
  for (const auto& p : paths) list += (list.empty() ? "'" : ", '") + p + "'";
  return "[" + list + "]";
}

bool EachOnce(const std::vector<Element>& elements, int64_t n) {
  auto c = Counts(Int64Scalars(elements));
  if (static_cast<int64_t>(c.size()) != n || static_cast<int64_t>(elements.size()) != n) return false;
  for (const auto& [v, k] : c) {
    if (k != 1) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("static sharding: the rewrite for each policy", "[sharding]") {
  auto files = ParsedPipeline("op { tfrecord { file: ['a', 'b', 'c', 'd', 'e'] } } op { take { count: 3 } }");
  auto w1 = ApplyStaticSharding(files, service::SHARD_FILE, 2, 1);
  REQUIRE(w1.ok());
  REQUIRE(w1->op(0).tfrecord().file_size() == 2);
  CHECK(w1->op(0).tfrecord().file(0) == "b");
  CHECK(w1->op(0).tfrecord().file(1) == "d");
  CHECK(w1->op(1).has_take());

  auto listed =
      ParsedPipeline("op { list_files { pattern: '/x/*' } } op { tfrecord {} } op { batch { batch_size: 2 } }");
  auto l = ApplyStaticSharding(listed, service::SHARD_FILE_OR_DATA, 3, 2);
  REQUIRE(l.ok());
  REQUIRE(l->op_size() == 4);
  CHECK(l->op(1).shard().num_shards() == 3);
  CHECK(l->op(1).shard().index() == 2);
  CHECK(l->op(2).has_tfrecord());

  auto range = ParsedPipeline("op { range { stop: 10 } } op { map { fn { arith { op: ADD value: 1 } } } }");
  auto d = ApplyStaticSharding(range, service::SHARD_FILE_OR_DATA, 4, 3);
  REQUIRE(d.ok());
  REQUIRE(d->op_size() == 3);
  CHECK(d->op(2).shard().num_shards() == 4);
  CHECK(d->op(2).shard().index() == 3);

  auto hinted = ParsedPipeline(
      "op { zip { input { op { range { stop: 10 } } op { shard { hint: true } } } input { op { range { stop: 10 } } } "
      "} }"
      " op { shard { num_shards: 7 index: 1 } }");
  auto h = ApplyStaticSharding(hinted, service::SHARD_HINT, 5, 4);
  REQUIRE(h.ok());
  CHECK(h->op(0).zip().input(0).op(1).shard().num_shards() == 5);
  CHECK(h->op(0).zip().input(0).op(1).shard().index() == 4);
  CHECK(h->op(1).shard().num_shards() == 7);  // not a hint: unchanged

  CHECK(absl::IsInvalidArgument(ApplyStaticSharding(range, service::SHARD_FILE, 2, 0).status()));
  CHECK(absl::IsInvalidArgument(ApplyStaticSharding(range, service::SHARD_DATA, 2, 2).status()));
}

TEST_CASE("static sharding: job-creation checks", "[sharding]") {
  auto err = [](const std::string& text, service::ProcessingMode mode, int n) {
    auto st = CheckStaticSharding(ParsedPipeline(text), mode, n, BuildOptions{});
    return st.ok() ? std::string("ok") : std::string(st.message());
  };
  CHECK(err("op { tfrecord { file: ['a', 'b'] } }", service::SHARD_FILE, 2) == "ok");
  CHECK_THAT(err("op { tfrecord { file: ['a', 'b'] } }", service::SHARD_FILE, 3),
             Catch::Contains("has 2 file(s) for 3 workers"));
  CHECK_THAT(err("op { range { stop: 5 } }", service::SHARD_FILE, 1), Catch::Contains("needs a file source"));
  CHECK(err("op { range { stop: 5 } }", service::SHARD_FILE_OR_DATA, 9) == "ok");
  CHECK_THAT(err("op { list_files { pattern: '/nonexistent/*' shuffle: true } }", service::SHARD_FILE, 1),
             Catch::Contains("without a seed"));
}

TEST_CASE("static sharding: data, file_or_data and hint on range give each element once over 3 workers",
          "[sharding][service][cluster]") {
  StaticCluster c(3);
  const std::string plain = c.cluster.Register("op { range { stop: 1000 } }");
  for (auto mode : {service::SHARD_DATA, service::SHARD_FILE_OR_DATA}) {
    INFO(service::ProcessingMode_Name(mode));
    auto got = c.Read(plain, mode);
    REQUIRE(got.ok());
    CHECK(EachOnce(*got, 1000));
  }
  const std::string hinted = c.cluster.Register("op { range { stop: 1000 } } op { shard { hint: true } }");
  auto got = c.Read(hinted, service::SHARD_HINT);
  REQUIRE(got.ok());
  CHECK(EachOnce(*got, 1000));
  // Without static sharding every worker produces everything.
  auto all = c.Read(plain, service::PARALLEL_EPOCHS);
  REQUIRE(all.ok());
  CHECK(all->size() == 3000);
}

TEST_CASE("static sharding: file and file_or_data on a file set give each record once",
          "[sharding][service][cluster]") {
  TempDir dir;
  std::map<std::string, int> expected;
  auto paths = WriteFiles(dir, 5, 20, &expected);
  StaticCluster c(3);
  for (const std::string& text : {"op { tfrecord { file: " + FileList(paths) + " } }",
                                  "op { list_files { pattern: '" + dir.Join("shard-*") + "' } } op { tfrecord {} }"}) {
    const std::string id = c.cluster.Register(text);
    for (auto mode : {service::SHARD_FILE, service::SHARD_FILE_OR_DATA, service::SHARD_DATA}) {
      INFO(text << " " << service::ProcessingMode_Name(mode));
      auto got = c.Read(id, mode);
      REQUIRE(got.ok());
      std::map<std::string, int> records;
      for (const auto& e : *got) ++records[e[0].strings()[0]];
      CHECK(records == expected);
    }
  }
}

TEST_CASE("static sharding: too few files, no worker list, and an unknown worker are clear errors",
          "[sharding][service][cluster]") {
  TempDir dir;
  std::map<std::string, int> expected;
  auto paths = WriteFiles(dir, 2, 3, &expected);
  {
    StaticCluster c(3);
    const std::string id = c.cluster.Register("op { tfrecord { file: " + FileList(paths) + " } }");
    auto got = c.Read(id, service::SHARD_FILE);
    REQUIRE_FALSE(got.ok());
    CHECK_THAT(std::string(got.status().message()), Catch::Contains("has 2 file(s) for 3 workers"));

    // A worker not on the list is refused: the dispatcher does not register it, the worker hears why.
    auto& stranger = c.cluster.StartUnlistedWorker();
    auto st = stranger.worker()->Heartbeat();
    CHECK(absl::IsFailedPrecondition(st));
    CHECK_THAT(std::string(st.message()), Catch::Contains("is not in the dispatcher's fixed worker list"));
    CHECK(c.cluster.dispatcher().NumWorkers() == 3);
  }
  TestCluster open(1);
  const std::string id = open.Register("op { range { stop: 10 } }");
  service::ReaderOptions o;
  o.dataset_id = id;
  o.mode = service::SHARD_DATA;
  auto reader = open.NewReader(o);
  REQUIRE_FALSE(reader.ok());
  CHECK(absl::IsFailedPrecondition(reader.status()));
  CHECK_THAT(std::string(reader.status().message()),
             Catch::Contains("needs a dispatcher started with --worker-addresses"));
}
