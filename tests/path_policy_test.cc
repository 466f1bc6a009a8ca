// --allowed-path: pipelines open only files under the allowed directories, checked after symlinks
// and ".." are resolved; the rest is PERMISSION_DENIED naming the path.
#include <unistd.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "absl/status/status.h"
#include "lib/io/path_policy.h"
#include "lib/io/tfrecord.h"
#include "lib/pipeline/builder.h"
#include "lib/pipeline/loader.h"
#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

namespace {

void WriteRecords(const std::string& path, int n) {
  auto w = TFRecordWriter::Open(path, Compression::kNone);
  REQUIRE(w.ok());
  for (int i = 0; i < n; ++i) REQUIRE((*w)->Write("r" + std::to_string(i)).ok());
  REQUIRE((*w)->Close().ok());
}

absl::StatusOr<std::vector<Element>> RunAllowed(const std::string& text, const std::string& dir) {
  auto loaded = ParsePipelineText(text, "test.pbtxt");
  if (!loaded.ok()) return loaded.status();
  auto policy = PathPolicy::Create({dir}, "--allowed-path");
  if (!policy.ok()) return policy.status();
  BuildOptions options;
  options.paths = std::make_shared<const PathPolicy>(*policy);
  auto ds = BuildDataset(loaded->pipeline, options, loaded->source());
  if (!ds.ok()) return ds.status();
  return Collect(**ds);
}

}  // namespace

TEST_CASE("path policy: inside is allowed, outside by symlink or by .. is not", "[paths]") {
  TempDir dir;
  std::filesystem::create_directory(dir.Join("data"));
  WriteFile(dir.Join("data/a.txt"), "x\n");
  WriteFile(dir.Join("secret.txt"), "s\n");
  REQUIRE(symlink(dir.Join("secret.txt").c_str(), dir.Join("data/link.txt").c_str()) == 0);
  auto p = PathPolicy::Create({dir.Join("data")}, "--allowed-path");
  REQUIRE(p.ok());
  CHECK(p->restricts());
  CHECK(p->Check(dir.Join("data/a.txt")).ok());
  CHECK(p->Check(dir.Join("data/new-cache-file")).ok());  // not there yet: its directory decides
  const absl::Status link = p->Check(dir.Join("data/link.txt"));
  CHECK(absl::IsPermissionDenied(link));
  CHECK_THAT(std::string(link.message()), Catch::Contains("(" + dir.Join("secret.txt") +
                                                          ") is outside the allowed "
                                                          "paths (--allowed-path " +
                                                          dir.Join("data") + ")"));
  CHECK(absl::IsPermissionDenied(p->Check(dir.Join("data/../secret.txt"))));
  CHECK(absl::IsPermissionDenied(p->Check(dir.Join("data-other/x"))));  // a prefix is not a parent
  CHECK(absl::IsPermissionDenied(p->Check("/etc/shadow")));
  CHECK(PathPolicy().Check("/etc/shadow").ok());  // no policy: anything
  CHECK(absl::IsInvalidArgument(PathPolicy::Create({dir.Join("missing")}, "--allowed-path").status()));
}

TEST_CASE("path policy: list_files, tfrecord, text_line, cache and vocab files are checked", "[paths]") {
  TempDir dir;
  std::filesystem::create_directory(dir.Join("data"));
  WriteRecords(dir.Join("data/a.tfrecord"), 3);
  const std::string data = dir.Join("data");
  auto ok = RunAllowed("op { list_files { pattern: \"" + data + "/*.tfrecord\" } } op { tfrecord {} }", data);
  REQUIRE(ok.ok());
  CHECK(ok->size() == 3);

  auto etc = RunAllowed("op { list_files { pattern: \"/etc/*\" } }", data);
  REQUIRE(absl::IsPermissionDenied(etc.status()));
  CHECK_THAT(std::string(etc.status().message()), Catch::Contains("op 0 (list_files): a file it matched, /etc/"));
  auto shadow = RunAllowed("op { tfrecord { file: \"/etc/shadow\" } }", data);
  REQUIRE(absl::IsPermissionDenied(shadow.status()));
  CHECK_THAT(
      std::string(shadow.status().message()),
      Catch::Contains("op 0 (tfrecord): /etc/shadow is outside the allowed paths (--allowed-path " + data + ")"));
  // A file name from an upstream element is checked when it is opened.
  auto upstream = RunAllowed(
      "op { from_tensor_slices { tensor { dtype: STRING string_values: [\"/etc/passwd\"] } } } op { text_line {} }",
      data);
  REQUIRE(absl::IsPermissionDenied(upstream.status()));
  CHECK_THAT(std::string(upstream.status().message()), Catch::Contains("text_line: /etc/passwd is outside"));
  auto cache = RunAllowed("op { range { stop: 3 } } op { cache { filename: \"" + dir.Join("c") + "\" } }", data);
  CHECK(absl::IsPermissionDenied(cache.status()));
  auto vocab = RunAllowed(
      "op { from_tensor_slices { tensor { dtype: STRING string_values: [\"a\"] } } } "
      "op { map { fn { tokenize { vocab_file: \"/etc/passwd\" } } } }",
      data);
  CHECK(absl::IsPermissionDenied(vocab.status()));
}

TEST_CASE("path policy: a worker with --allowed-path refuses /etc/shadow and reads its data", "[paths][cluster]") {
  TempDir dir;
  std::filesystem::create_directory(dir.Join("data"));
  WriteRecords(dir.Join("data/a.tfrecord"), 5);
  auto policy = PathPolicy::Create({dir.Join("data")}, "--allowed-path");
  REQUIRE(policy.ok());
  auto paths = std::make_shared<const PathPolicy>(*policy);
  service::DispatcherConfig config = TestCluster::FastConfig();
  config.build_options.paths = paths;
  TestCluster cluster(0, config);
  service::WorkerConfig worker;
  worker.build_options.paths = paths;
  cluster.set_worker_config(worker);
  cluster.AddWorker();

  auto shadow = cluster.NewReader(cluster.Register("op { tfrecord { file: \"/etc/shadow\" } }"));
  REQUIRE(shadow.ok());
  Element e;
  auto more = (*shadow)->Next(&e);
  REQUIRE(!more.ok());
  CHECK(absl::IsPermissionDenied(more.status()));
  CHECK_THAT(std::string(more.status().message()), Catch::Contains("/etc/shadow is outside the allowed paths"));

  auto good = cluster.NewReader(cluster.Register("op { tfrecord { file: \"" + dir.Join("data/a.tfrecord") + "\" } }"));
  REQUIRE(good.ok());
  CHECK(ReadAll(**good).size() == 5);

  // distributed_epoch: the dispatcher lists the files, and refuses to list /etc.
  service::ReaderOptions options;
  options.dataset_id = cluster.Register("op { list_files { pattern: \"/etc/*\" } }");
  options.mode = service::DISTRIBUTED_EPOCH;
  auto listed = cluster.NewReader(options);
  REQUIRE(!listed.ok());
  CHECK_THAT(std::string(listed.status().message()), Catch::Contains("is outside the allowed paths"));
}

TEST_CASE("path policy: tfdata worker and dispatcher refuse an --allowed-path that does not exist", "[paths][cli]") {
  TempDir dir;
  auto worker = RunTfdata({"worker", "--dispatcher", "127.0.0.1:1", "--allowed-path", dir.Join("missing")});
  CHECK(worker.exit_code == 2);
  CHECK_THAT(worker.err, Catch::Contains("--allowed-path " + dir.Join("missing") + ": no such directory"));
  auto dispatcher = RunTfdata({"dispatcher", "--port", "0", "--allowed-path", dir.Join("missing")});
  CHECK(dispatcher.exit_code == 2);
  CHECK_THAT(dispatcher.err, Catch::Contains("no such directory"));
}
