// Resumable reads (issue 22) through real in-process clusters: a reader resumed from a read state
// delivers exactly what had not been handed out, though the first read went on, the workers
// changed, or the job was shared; states that do not fit are refused.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "lib/service/client/read_state.h"
#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

namespace {

// The next `n` elements (fewer at the end).
std::vector<Element> Take(service::Reader& reader, int64_t n) {
  std::vector<Element> out;
  Element e;
  while (static_cast<int64_t>(out.size()) < n) {
    auto more = reader.Next(&e);
    REQUIRE(more.ok());
    if (!*more) break;
    out.push_back(e);
  }
  return out;
}

// Every int64 value of the elements, sorted (a batch gives all of its values).
std::vector<int64_t> Values(const std::vector<Element>& elements) {
  std::vector<int64_t> out;
  for (const Element& e : elements) {
    REQUIRE(e.size() == 1);
    out.insert(out.end(), e[0].data<int64_t>(), e[0].data<int64_t>() + e[0].num_elements());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// range(n) `epochs` times, sorted.
std::vector<int64_t> Expected(int64_t n, int epochs = 1) {
  std::vector<int64_t> v;
  for (int e = 0; e < epochs; ++e) {
    for (int64_t i = 0; i < n; ++i) v.push_back(i);
  }
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<Element> Concat(std::vector<Element> a, const std::vector<Element>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("resume: the rest of the read exactly, though the first read went on and the workers changed",
          "[resume][cluster]") {
  struct Case {
    std::string pipeline;
    int epochs;
    int64_t take;  // elements handed out before the state
  };
  const std::vector<Case> cases = {
      // batch and a seeded shuffle after the source: a split's output depends on the split alone.
      {"op { range { stop: 3000 } } op { shuffle { buffer_size: 64 seed: 7 } } op { batch { batch_size: 10 } }", 1,
       137},
      // Three epochs; the state is taken in the second.
      {"op { range { stop: 500 } } op { repeat { count: 3 } }", 3, 777},
  };
  for (const Case& c : cases) {
    for (const auto& [before, after] : std::vector<std::pair<int, int>>{{1, 1}, {2, 3}}) {
      INFO(c.pipeline << ": " << before << " worker(s), then " << after);
      TestCluster cluster(before);
      const std::string id = cluster.Register(c.pipeline);
      auto first = cluster.NewReader(ExactlyOnceOptions(id));
      REQUIRE(first.ok());
      const std::vector<Element> handed = Take(**first, c.take);
      REQUIRE(static_cast<int64_t>(handed.size()) == c.take);
      auto state = (*first)->SaveState();
      REQUIRE(state.ok());
      CHECK(state->elements() == c.take);
      // The trainer reads on past its checkpoint before it dies (tensorflow#63079): the job moves
      // on, the state does not.
      CHECK(Take(**first, 50).size() == 50);
      first->reset();
      while (static_cast<int>(cluster.num_workers()) < after) cluster.AddWorker();
      service::ReaderOptions o = ExactlyOnceOptions(id);
      o.resume = {*state};
      auto resumed = cluster.NewReader(o);
      REQUIRE(resumed.ok());
      const std::vector<Element> rest = ReadAll(**resumed);
      CHECK(Values(Concat(handed, rest)) ==
            Expected(c.pipeline.find("3000") != std::string::npos ? 3000 : 500, c.epochs));
      CHECK((*resumed)->duplicates_dropped() == 0);
      // Its own state at the end says everything was handed out: a resume from it reads nothing.
      auto end_state = (*resumed)->SaveState();
      REQUIRE(end_state.ok());
      CHECK(end_state->elements() == static_cast<int64_t>(handed.size() + rest.size()));
      CHECK(end_state->handed().epochs_size() == 0);
      CHECK(end_state->handed().first_epoch() == c.epochs);
      o.resume = {*end_state};
      auto again = cluster.NewReader(o);
      REQUIRE(again.ok());
      CHECK(ReadAll(**again).empty());
    }
  }
}

TEST_CASE("resume: a state is small, and it stays small as the read goes on", "[resume][cluster]") {
  TestCluster cluster(2);
  const std::string id = cluster.Register("op { range { stop: 200000 } } op { batch { batch_size: 4 } }");
  auto reader = cluster.NewReader(ExactlyOnceOptions(id));
  REQUIRE(reader.ok());
  size_t largest = 0;
  for (int round = 0; round < 20; ++round) {
    Take(**reader, 1000);
    auto state = (*reader)->SaveState();
    REQUIRE(state.ok());
    largest = std::max(largest, service::EncodeReadState(*state).size());
  }
  // Fingerprints, one range of splits done, and the few splits in progress.
  CHECK(largest < 400);
}

TEST_CASE("resume: the readers of a shared job resume together from their merged states", "[resume][cluster]") {
  TestCluster cluster(2);
  const std::string id = cluster.Register(
      "op { range { stop: 4000 } } op { shuffle { buffer_size: 32 seed: 5 } } op { batch { batch_size: 8 } }");
  // Small buffers, so that neither reader fetches the whole job before the other starts.
  service::ReaderOptions small = ExactlyOnceOptions(id, "train");
  small.buffer_elements = 4;
  small.max_elements_per_request = 2;
  auto a = cluster.NewReader(small);
  auto b = cluster.NewReader(small);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  std::vector<Element> handed = Take(**a, 40);
  handed = Concat(handed, Take(**b, 70));
  auto state_a = (*a)->SaveState();
  auto state_b = (*b)->SaveState();
  REQUIRE(state_a.ok());
  REQUIRE(state_b.ok());
  CHECK(state_a->elements() == 40);
  CHECK(state_b->elements() == 70);
  Take(**a, 30);  // past the checkpoint
  a->reset();
  b->reset();
  // The same name again is refused: that job has moved on.
  service::ReaderOptions o = ExactlyOnceOptions(id, "train");
  o.resume = {*state_a, *state_b};
  auto same_name = cluster.NewReader(o);
  REQUIRE_FALSE(same_name.ok());
  CHECK_THAT(std::string(same_name.status().message()),
             Catch::Contains("exists and was not resumed from a read state") && Catch::Contains("a name of its own"));
  o.job_name = "train-restart-1";
  std::vector<std::unique_ptr<service::Reader>> rs;
  const std::vector<Element> rest = ReadShared(cluster, o, 2, &rs);
  CHECK(Values(Concat(handed, rest)) == Expected(4000));
  // A reader that passes another state under that name is refused.
  service::ReaderOptions other = o;
  other.resume = {*state_a};
  auto mismatch = cluster.NewReader(other);
  REQUIRE_FALSE(mismatch.ok());
  CHECK_THAT(std::string(mismatch.status().message()), Catch::Contains("resumed from another read state"));
}

TEST_CASE("resume: a state of another pipeline, of a changed file list, or of a plain read is refused",
          "[resume][cluster]") {
  TempDir dir;
  const std::string data = dir.Join("data");
  std::filesystem::create_directories(data);
  for (const char* f : {"a.txt", "b.txt"}) std::ofstream(data + "/" + f) << "x\ny\n";
  TestCluster cluster(1);
  const std::string files =
      cluster.Register("op { list_files { pattern: \"" + data + "/*.txt\" shuffle: false } } op { text_line {} }");
  auto reader = cluster.NewReader(ExactlyOnceOptions(files));
  REQUIRE(reader.ok());
  Take(**reader, 1);
  auto state = (*reader)->SaveState();
  REQUIRE(state.ok());
  reader->reset();
  service::ReaderOptions o = ExactlyOnceOptions(files);
  o.resume = {*state};
  // Another pipeline.
  o.dataset_id = cluster.Register("op { range { stop: 10 } }");
  auto other = cluster.NewReader(o);
  REQUIRE_FALSE(other.ok());
  CHECK(absl::IsFailedPrecondition(other.status()));
  CHECK_THAT(std::string(other.status().message()), Catch::Contains("the read state is of another pipeline"));
  // The same pipeline, but its files changed.
  std::ofstream(data + "/c.txt") << "z\n";
  o.dataset_id = files;
  auto changed = cluster.NewReader(o);
  REQUIRE_FALSE(changed.ok());
  CHECK_THAT(std::string(changed.status().message()),
             Catch::Contains("its source changed") && Catch::Contains("3 splits now"));
  // Not exactly once: no state to take, none to resume from.
  service::ReaderOptions plain = ExactlyOnceOptions(files);
  plain.exactly_once = false;
  auto p = cluster.NewReader(plain);
  REQUIRE(p.ok());
  CHECK(absl::IsFailedPrecondition((*p)->SaveState().status()));
  plain.resume = {*state};
  auto refused = cluster.NewReader(plain);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("needs exactly-once reads"));
}

namespace {

service::ReaderOptions Deterministic(const std::string& id) {
  service::ReaderOptions o = ExactlyOnceOptions(id);
  o.deterministic = true;
  return o;
}

// Each element's values, in the order they came.
std::vector<std::vector<int64_t>> Sequence(const std::vector<Element>& elements) {
  std::vector<std::vector<int64_t>> out;
  for (const Element& e : elements) out.emplace_back(e[0].data<int64_t>(), e[0].data<int64_t>() + e[0].num_elements());
  return out;
}

// Slow enough per element that workers race and one can die mid-split; seeded shuffle, batches,
// two epochs.
constexpr const char* kOrdered =
    "op { range { stop: 2400 } } op { map { fn { sleep { micros: 40 } } } } "
    "op { shuffle { buffer_size: 16 seed: 11 } } op { batch { batch_size: 4 } } op { repeat { count: 2 } }";

}  // namespace

TEST_CASE("deterministic order: the same sequence with 1, 2 or 4 workers, and with a worker killed mid-read",
          "[resume][deterministic][cluster]") {
  std::vector<std::vector<int64_t>> first;
  for (int workers : {1, 2, 4, -3}) {  // -3: three workers, one of them stopped mid-read
    INFO(workers << " workers");
    TestCluster cluster(std::abs(workers));
    const std::string id = cluster.Register(kOrdered);
    // A small buffer (16 batches of 4 int64), so that splits that come early fill it.
    service::ReaderOptions o = Deterministic(id);
    o.buffer_elements = 16;
    o.max_elements_per_request = 4;
    auto reader = cluster.NewReader(o);
    REQUIRE(reader.ok());
    std::vector<Element> got = Take(**reader, 200);
    if (workers < 0) cluster.StopWorker(1);
    got = Concat(got, ReadAll(**reader));
    const auto sequence = Sequence(got);
    CHECK(Values(got) == Expected(2400, 2));
    if (first.empty()) {
      first = sequence;
    } else {
      CHECK(sequence == first);
    }
    // What waits its turn stays within the bound ReaderOptions::deterministic states: twice the
    // buffer (what is in order may fill it once more), the responses in flight, and up to
    // max_requests_per_task responses per task fetched to find the next split (32-byte batches).
    // Not with a worker stopped mid-read: every task may overfill until its splits come again.
    if (workers > 0) {
      CHECK((*reader)->max_reorder_bytes() <=
            (2 * o.buffer_elements + o.max_outstanding_requests * o.max_elements_per_request +
             workers * o.max_requests_per_task * o.max_elements_per_request) *
                32);
    }
  }
}

TEST_CASE("deterministic order and resume: a restarted run sees the sequence an uninterrupted run sees",
          "[resume][deterministic][cluster]") {
  TestCluster cluster(3);
  const std::string id = cluster.Register(kOrdered);
  auto whole = cluster.NewReader(Deterministic(id));
  REQUIRE(whole.ok());
  const auto uninterrupted = Sequence(ReadAll(**whole));
  auto first = cluster.NewReader(Deterministic(id));
  REQUIRE(first.ok());
  const std::vector<Element> handed = Take(**first, 777);  // into the second epoch
  auto state = (*first)->SaveState();
  REQUIRE(state.ok());
  Take(**first, 100);
  first->reset();
  // In order, what was handed out is a prefix: the state is a few ranges.
  CHECK(service::EncodeReadState(*state).size() < 200);
  service::ReaderOptions o = Deterministic(id);
  o.resume = {*state};
  auto resumed = cluster.NewReader(o);
  REQUIRE(resumed.ok());
  CHECK(Sequence(Concat(handed, ReadAll(**resumed))) == uninterrupted);
  service::ReaderOptions shared = Deterministic(id);
  shared.job_name = "shared";
  auto refused = cluster.NewReader(shared);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("a reader alone in its job"));
}

TEST_CASE("resume: static sharding resumes each shard where it stood, over the same worker list",
          "[resume][sharding][cluster]") {
  StaticCluster sc(3);
  TestCluster& cluster = sc.cluster;
  const std::string id = cluster.Register("op { range { stop: 3000 } } op { batch { batch_size: 4 } }");
  service::ReaderOptions o;
  o.dataset_id = id;
  o.mode = service::SHARD_DATA;
  auto first = cluster.NewReader(o);
  REQUIRE(first.ok());
  const std::vector<Element> handed = Take(**first, 100);
  auto state = (*first)->SaveState();
  REQUIRE(state.ok());
  CHECK(state->handed().num_shards() == 3);
  CHECK(state->elements() == 100);
  Take(**first, 50);  // past the state
  first->reset();
  o.resume = {*state};
  auto resumed = cluster.NewReader(o);
  REQUIRE(resumed.ok());
  const std::vector<Element> rest = ReadAll(**resumed);
  CHECK(Values(Concat(handed, rest)) == Expected(3000));
  // Resumed again from its own state at the end: nothing left.
  auto end_state = (*resumed)->SaveState();
  REQUIRE(end_state.ok());
  o.resume = {*end_state};
  auto again = cluster.NewReader(o);
  REQUIRE(again.ok());
  CHECK(ReadAll(**again).empty());
  // Another worker list, a pipeline whose shards could differ between runs: refused.
  service::ReadState other = *state;
  other.mutable_handed()->set_num_shards(4);
  o.resume = {other};
  auto wrong_list = cluster.NewReader(o);
  REQUIRE_FALSE(wrong_list.ok());
  CHECK_THAT(std::string(wrong_list.status().message()), Catch::Contains("taken with 4 shards"));
  const std::string unseeded =
      cluster.Register("op { range { stop: 3000 } } op { shuffle { buffer_size: 10 } } op { batch { batch_size: 4 } }");
  service::ReaderOptions u = o;
  u.dataset_id = unseeded;
  u.resume.clear();
  auto r = cluster.NewReader(u);
  REQUIRE(r.ok());
  Take(**r, 3);
  auto unseeded_state = (*r)->SaveState();
  REQUIRE(unseeded_state.ok());
  r->reset();
  u.resume = {*unseeded_state};
  auto refused = cluster.NewReader(u);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("resuming a static-sharding read") && Catch::Contains("seed"));
  // parallel_epochs has no position to resume from.
  service::ReaderOptions parallel;
  parallel.dataset_id = id;
  auto p = cluster.NewReader(parallel);
  REQUIRE(p.ok());
  CHECK_THAT(std::string((*p)->SaveState().status().message()),
             Catch::Contains("parallel_epochs read has no position"));
}
