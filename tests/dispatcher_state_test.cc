// DispatcherState: the only mutator is Apply, which rejects inconsistent records unchanged.
#include <catch2/catch.hpp>

#include "google/protobuf/text_format.h"
#include "lib/service/dispatcher/dispatcher_state.h"

using namespace tfdata::service;

namespace {

Update U(const std::string& text) {
  Update u;
  REQUIRE(google::protobuf::TextFormat::ParseFromString(text, &u));
  return u;
}

const char* kRecords[] = {
    R"(register_dataset { dataset_id: "1" fingerprint: "f1" pipeline { op { range { stop: 3 } } } })",
    R"(register_worker { worker_address: "w1:1" })",
    R"(create_job { job_id: 1 dataset_id: "1" mode: PARALLEL_EPOCHS job_name: "j" })",
    R"(create_iteration { iteration_id: 1 job_id: 1 repetition: 0 })",
    R"(create_task { task_id: 1 iteration_id: 1 worker_address: "w1:1" })",
    R"(acquire_client { client_id: 1 iteration_id: 1 })",
    R"(register_worker { worker_address: "w2:1" })",
    R"(create_task { task_id: 2 iteration_id: 1 worker_address: "w2:1" })",
    R"(finish_task { task_id: 1 })",
};

}  // namespace

TEST_CASE("dispatcher state: records build jobs, tasks and clients", "[dispatcher_state]") {
  DispatcherState s;
  for (const char* r : kRecords) REQUIRE(s.Apply(U(r)).ok());
  CHECK(s.FindJobByName("j")->id == 1);
  CHECK(s.FindIteration(1)->tasks.size() == 2);
  CHECK(*s.ClientIteration(1) == 1);
  CHECK_FALSE(s.IterationFinished(1));
  CHECK(s.ActiveIterations() == std::vector<int64_t>{1});
  CHECK(s.NextTaskId() == 3);
  CHECK(s.NextDatasetId() == "2");
  // Losing worker 2 removes its task: the remaining (finished) task finishes the iteration.
  REQUIRE(s.Apply(U(R"(remove_worker { worker_address: "w2:1" })")).ok());
  CHECK(s.FindTask(2) == nullptr);
  CHECK(s.IterationFinished(1));
  CHECK(s.ActiveIterations().empty());
  REQUIRE(s.Apply(U("release_client { client_id: 1 }")).ok());
  REQUIRE(s.Apply(U("garbage_collect_iteration { iteration_id: 1 }")).ok());
  CHECK(s.FindTask(1) == nullptr);
  CHECK(s.FindIteration(1)->garbage_collected);
  CHECK(s.FindJobByName("j") != nullptr);  // kept, so reusing the name can warn
}

TEST_CASE("dispatcher state: inconsistent records are rejected", "[dispatcher_state]") {
  DispatcherState s;
  for (const char* r : kRecords) REQUIRE(s.Apply(U(r)).ok());
  for (const char* bad : {
           R"(register_dataset { dataset_id: "1" fingerprint: "x" })",              // id taken
           R"(register_worker { worker_address: "w1:1" })",                         // twice
           R"(create_job { job_id: 5 dataset_id: "1" })",                           // id out of order
           R"(create_job { job_id: 2 dataset_id: "nope" })",                        // unknown dataset
           R"(create_job { job_id: 2 dataset_id: "1" job_name: "j" })",             // name taken
           R"(create_task { task_id: 3 iteration_id: 1 worker_address: "w1:1" })",  // second task on w1
           R"(create_task { task_id: 3 iteration_id: 9 worker_address: "w1:1" })",  // unknown iteration
           R"(finish_task { task_id: 42 })",
           R"(release_client { client_id: 7 })",
           R"(remove_worker { worker_address: "zz:1" })",
           "",
       }) {
    INFO(bad);
    CHECK(absl::IsFailedPrecondition(s.Apply(U(bad))));
  }
  CHECK(s.NextJobId() == 2);
  CHECK(s.FindIteration(1)->tasks.size() == 2);
}

TEST_CASE("dispatcher state: assigned dataset ids skip ids users chose", "[dispatcher_state]") {
  DispatcherState s;
  REQUIRE(s.Apply(U(R"(register_dataset { dataset_id: "1" fingerprint: "a" })")).ok());
  REQUIRE(s.Apply(U(R"(register_dataset { dataset_id: "2" fingerprint: "b" })")).ok());
  REQUIRE(s.Apply(U(R"(register_dataset { dataset_id: "mine" fingerprint: "c" })")).ok());
  CHECK(s.NextDatasetId() == "3");
  CHECK(s.FindDatasetByFingerprint("c")->id == "mine");
}

TEST_CASE("dispatcher state: active iterations are the live ones, also after a snapshot restore",
          "[dispatcher_state]") {
  DispatcherState s;
  REQUIRE(s.Apply(U(kRecords[0])).ok());
  REQUIRE(s.Apply(U(kRecords[1])).ok());
  // Three jobs of one iteration each (one task on w1:1); the first is collected.
  for (int j = 1; j <= 3; ++j) {
    REQUIRE(
        s.Apply(U("create_job { job_id: " + std::to_string(j) + " dataset_id: \"1\" mode: PARALLEL_EPOCHS }")).ok());
    REQUIRE(s.Apply(U("create_iteration { iteration_id: " + std::to_string(j) + " job_id: " + std::to_string(j) +
                      " repetition: 0 }"))
                .ok());
    REQUIRE(s.Apply(U("create_task { task_id: " + std::to_string(j) + " iteration_id: " + std::to_string(j) +
                      " worker_address: \"w1:1\" }"))
                .ok());
  }
  REQUIRE(s.Apply(U("garbage_collect_iteration { iteration_id: 1 }")).ok());
  CHECK(s.ActiveIterations() == std::vector<int64_t>{2, 3});
  DispatcherState copy;
  Update snap;
  *snap.mutable_snapshot() = s.Snapshot();
  REQUIRE(copy.Apply(snap).ok());
  CHECK(copy.ActiveIterations() == std::vector<int64_t>{2, 3});
  REQUIRE(copy.Apply(U("garbage_collect_iteration { iteration_id: 3 }")).ok());
  CHECK(copy.ActiveIterations() == std::vector<int64_t>{2});
}

TEST_CASE("dispatcher state: a collected unnamed job is erased, a named one stays to warn", "[dispatcher_state]") {
  DispatcherState s;
  REQUIRE(s.Apply(U(kRecords[0])).ok());
  REQUIRE(s.Apply(U(kRecords[1])).ok());
  REQUIRE(s.Apply(U(R"(create_job { job_id: 1 dataset_id: "1" mode: DISTRIBUTED_EPOCH })")).ok());
  REQUIRE(s.Apply(U("create_iteration { iteration_id: 1 job_id: 1 repetition: 0 }")).ok());
  REQUIRE(s.Apply(U(R"(create_task { task_id: 1 iteration_id: 1 worker_address: "w1:1" })")).ok());
  REQUIRE(s.Apply(U("assign_splits { task_id: 1 epoch: 0 first: 0 count: 2 }")).ok());
  REQUIRE(s.Apply(U(R"(create_job { job_id: 2 dataset_id: "1" mode: PARALLEL_EPOCHS job_name: "named" })")).ok());
  REQUIRE(s.Apply(U("create_iteration { iteration_id: 2 job_id: 2 repetition: 0 }")).ok());
  const size_t before = s.Snapshot().ByteSizeLong();

  REQUIRE(s.Apply(U("garbage_collect_iteration { iteration_id: 1 }")).ok());
  CHECK(s.FindIteration(1) == nullptr);
  CHECK(s.FindJob(1) == nullptr);
  CHECK(s.FindTask(1) == nullptr);
  REQUIRE(s.Apply(U("garbage_collect_iteration { iteration_id: 2 }")).ok());
  REQUIRE(s.FindIteration(2) != nullptr);
  CHECK(s.FindIteration(2)->garbage_collected);
  CHECK(s.FindJobByName("named")->id == 2);
  CHECK(s.Snapshot().ByteSizeLong() < before);
  // Ids are never reused, and a record naming the erased job or iteration is rejected.
  CHECK(s.NextJobId() == 3);
  CHECK(s.NextIterationId() == 3);
  CHECK(absl::IsFailedPrecondition(s.Apply(U("garbage_collect_iteration { iteration_id: 1 }"))));
  CHECK(absl::IsFailedPrecondition(s.Apply(U("create_iteration { iteration_id: 3 job_id: 1 repetition: 1 }"))));
  // A snapshot of the state restores the same state.
  DispatcherState copy;
  Update snap;
  *snap.mutable_snapshot() = s.Snapshot();
  REQUIRE(copy.Apply(snap).ok());
  CHECK(copy.Snapshot().SerializeAsString() == s.Snapshot().SerializeAsString());
}

TEST_CASE("dispatcher state: an exactly-once job's lost worker gives its undelivered splits back to the pool",
          "[dispatcher_state]") {
  for (const bool exactly_once : {true, false}) {
    INFO("exactly_once " << exactly_once);
    DispatcherState s;
    REQUIRE(s.Apply(U(kRecords[0])).ok());
    REQUIRE(s.Apply(U(R"(register_worker { worker_address: "a:1" })")).ok());
    REQUIRE(s.Apply(U(R"(register_worker { worker_address: "b:1" })")).ok());
    REQUIRE(s.Apply(U(std::string(R"(create_job { job_id: 1 dataset_id: "1" mode: DISTRIBUTED_EPOCH exactly_once: )") +
                      (exactly_once ? "true" : "false") + " }"))
                .ok());
    REQUIRE(s.Apply(U("create_iteration { iteration_id: 1 job_id: 1 repetition: 0 }")).ok());
    REQUIRE(s.Apply(U(R"(create_task { task_id: 1 iteration_id: 1 worker_address: "a:1" })")).ok());
    REQUIRE(s.Apply(U(R"(create_task { task_id: 2 iteration_id: 1 worker_address: "b:1" })")).ok());
    // Task 1: splits 0-3 of epoch 0, then 0-1 of epoch 1; it delivers 2 and gives back split 1 of epoch 1.
    REQUIRE(s.Apply(U("assign_splits { task_id: 1 epoch: 0 first: 0 count: 4 }")).ok());
    REQUIRE(s.Apply(U("assign_splits { task_id: 1 epoch: 1 first: 0 count: 2 }")).ok());
    REQUIRE(s.Apply(U("deliver_splits { task_id: 1 splits_delivered: 2 }")).ok());
    REQUIRE(s.Apply(U("return_splits { task_id: 1 epoch: 1 indices: [1] }")).ok());
    CHECK(s.FindTask(1)->outstanding_epochs == std::vector<int64_t>{0, 0, 1});
    CHECK(s.FindTask(1)->outstanding_indices == std::vector<int64_t>{2, 3, 0});
    // Task 2 takes split 1 of epoch 1 from the pool.
    REQUIRE(s.Apply(U("assign_splits { task_id: 2 epoch: 1 indices: [1] }")).ok());
    CHECK(s.FindTask(2)->outstanding_indices == std::vector<int64_t>{1});
    // A snapshot keeps them.
    DispatcherState copy;
    Update snap;
    *snap.mutable_snapshot() = s.Snapshot();
    REQUIRE(copy.Apply(snap).ok());
    CHECK(copy.FindTask(1)->outstanding_indices == std::vector<int64_t>{2, 3, 0});
    CHECK(copy.FindJob(1)->exactly_once == exactly_once);

    REQUIRE(s.Apply(U(R"(remove_worker { worker_address: "a:1" })")).ok());
    const auto* it = s.FindIteration(1);
    if (exactly_once) {
      CHECK(it->splits_lost == 0);
      CHECK(it->returned_splits.at(0) == std::vector<int64_t>{2, 3});
      CHECK(it->returned_splits.at(1) == std::vector<int64_t>{0});
    } else {
      CHECK(it->splits_lost == 3);
      CHECK(it->returned_splits.empty());
    }
  }
  // Only distributed_epoch jobs can be exactly-once.
  DispatcherState s;
  REQUIRE(s.Apply(U(kRecords[0])).ok());
  CHECK(absl::IsFailedPrecondition(
      s.Apply(U(R"(create_job { job_id: 1 dataset_id: "1" mode: PARALLEL_EPOCHS exactly_once: true })"))));
}

TEST_CASE("dispatcher state: exactly-once splits are delivered by index, and re-assigned with their skips",
          "[dispatcher_state]") {
  DispatcherState s;
  REQUIRE(s.Apply(U(kRecords[0])).ok());
  REQUIRE(s.Apply(U(R"(register_worker { worker_address: "a:1" })")).ok());
  REQUIRE(s.Apply(U(R"(register_worker { worker_address: "b:1" })")).ok());
  REQUIRE(s.Apply(U(R"(create_job { job_id: 1 dataset_id: "1" mode: DISTRIBUTED_EPOCH exactly_once: true })")).ok());
  REQUIRE(s.Apply(U("create_iteration { iteration_id: 1 job_id: 1 repetition: 0 }")).ok());
  REQUIRE(s.Apply(U(R"(create_task { task_id: 1 iteration_id: 1 worker_address: "a:1" })")).ok());
  REQUIRE(s.Apply(U(R"(create_task { task_id: 2 iteration_id: 1 worker_address: "b:1" })")).ok());
  REQUIRE(s.Apply(U("assign_splits { task_id: 1 epoch: 0 first: 0 count: 4 }")).ok());
  // Readers confirm splits 2 and 0, out of hand-out order.
  REQUIRE(s.Apply(U("deliver_splits { task_id: 1 epoch: 0 indices: [2, 0] }")).ok());
  CHECK(s.FindTask(1)->outstanding_indices == std::vector<int64_t>{1, 3});
  CHECK(s.FindTask(1)->splits_delivered == 2);
  // A split the task does not hold cannot be delivered.
  CHECK(absl::IsFailedPrecondition(s.Apply(U("deliver_splits { task_id: 1 epoch: 0 indices: [2] }"))));
  CHECK(absl::IsFailedPrecondition(s.Apply(U("deliver_splits { task_id: 1 epoch: 1 indices: [1] }"))));
  // The worker is lost: 1 and 3 go to the pool; task 2 takes them with what readers already had.
  REQUIRE(s.Apply(U(R"(remove_worker { worker_address: "a:1" })")).ok());
  CHECK(s.FindIteration(1)->returned_splits.at(0) == std::vector<int64_t>{1, 3});
  CHECK(absl::IsFailedPrecondition(
      s.Apply(U("assign_splits { task_id: 2 epoch: 0 indices: [1, 3] skips { begins: [0] ends: [5] } }"))));
  CHECK(absl::IsFailedPrecondition(
      s.Apply(U("assign_splits { task_id: 2 epoch: 0 indices: [1] skips { begins: [0, 9] ends: [5] } }"))));
  REQUIRE(s.Apply(U("assign_splits { task_id: 2 epoch: 0 indices: [1, 3] skips { begins: [0, 7] ends: [5, 9] } "
                    "skips { } }"))
              .ok());
  REQUIRE(s.FindTask(2)->last_skips.size() == 2);
  CHECK(s.FindTask(2)->last_skips[0].ends(1) == 9);
  // The skips survive a snapshot (a lost answer is repeated with them after a restart).
  DispatcherState copy;
  Update snap;
  *snap.mutable_snapshot() = s.Snapshot();
  REQUIRE(copy.Apply(snap).ok());
  CHECK(copy.Snapshot().SerializeAsString() == s.Snapshot().SerializeAsString());
  CHECK(copy.FindTask(2)->last_skips[0].begins(1) == 7);
  // A plain assignment clears them.
  REQUIRE(s.Apply(U("assign_splits { task_id: 2 epoch: 1 first: 0 count: 1 }")).ok());
  CHECK(s.FindTask(2)->last_skips.empty());
}

TEST_CASE("dispatcher state: a resumed job hands out only what was not handed out before, also after a snapshot",
          "[dispatcher_state][resume]") {
  DispatcherState s;
  REQUIRE(s.Apply(U(kRecords[0])).ok());
  REQUIRE(s.Apply(U(R"(register_worker { worker_address: "a:1" })")).ok());
  // 10 splits per epoch. Epoch 0 was read in full; of epoch 1, splits 0, 1 and 5 in full, 4
  // elements of split 3.
  const std::string plan = R"(split_plan { kind: ELEMENTS elements: 100 split_size: 10 }
      resume { first_epoch: 1 epochs { epoch: 1 done_begins: [0, 5] done_ends: [2, 6]
                                       partial { split: 3 begins: [0] ends: [4] } } })";
  // Refused: not exactly once; a split outside the plan.
  CHECK(absl::IsFailedPrecondition(
      s.Apply(U(R"(create_job { job_id: 1 dataset_id: "1" mode: DISTRIBUTED_EPOCH )" + plan + "}"))));
  CHECK(absl::IsFailedPrecondition(s.Apply(U(R"(create_job { job_id: 1 dataset_id: "1" mode: DISTRIBUTED_EPOCH
      exactly_once: true split_plan { kind: ELEMENTS elements: 100 split_size: 10 }
      resume { epochs { epoch: 0 partial { split: 10 } } } })"))));
  CHECK(s.FindJob(1) == nullptr);
  REQUIRE(
      s.Apply(U(R"(create_job { job_id: 1 dataset_id: "1" mode: DISTRIBUTED_EPOCH exactly_once: true )" + plan + "}"))
          .ok());
  REQUIRE(s.Apply(U("create_iteration { iteration_id: 1 job_id: 1 repetition: 0 }")).ok());
  REQUIRE(s.Apply(U(R"(create_task { task_id: 1 iteration_id: 1 worker_address: "a:1" })")).ok());
  const auto* it = s.FindIteration(1);
  CHECK(it->returned_splits.at(1) == std::vector<int64_t>{3});  // the part-read split goes first
  CHECK(s.NextSplitRun(*it, 0).first == 10);                    // epoch 0: nothing left
  CHECK(s.NextSplitRun(*it, 1) == std::pair<int64_t, int64_t>{2, 3});
  CHECK(s.NextSplitRun(*it, 2).first == 0);  // later epochs: all of it
  REQUIRE(s.Apply(U("assign_splits { task_id: 1 epoch: 1 first: 2 count: 1 }")).ok());
  CHECK(s.NextSplitRun(*s.FindIteration(1), 1) == std::pair<int64_t, int64_t>{4, 5});
  CHECK(absl::IsFailedPrecondition(s.Apply(U("assign_splits { task_id: 1 epoch: 1 first: 4 count: 2 }"))));
  REQUIRE(s.Apply(U("assign_splits { task_id: 1 epoch: 1 first: 4 count: 1 }")).ok());
  CHECK(s.NextSplitRun(*s.FindIteration(1), 1).first == 6);
  DispatcherState copy;
  Update snap;
  *snap.mutable_snapshot() = s.Snapshot();
  REQUIRE(copy.Apply(snap).ok());
  CHECK(copy.Snapshot().SerializeAsString() == s.Snapshot().SerializeAsString());
  CHECK(copy.FindJob(1)->resume->epochs(0).partial(0).ends(0) == 4);
  CHECK(copy.NextSplitRun(*copy.FindIteration(1), 1).first == 6);
  REQUIRE(copy.ResumeOf(*copy.FindIteration(1)) != nullptr);
  CHECK(copy.ResumeOf(*copy.FindIteration(1))->first_epoch() == 1);
}
