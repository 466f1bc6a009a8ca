// The reader's record of what it received of each split (exactly-once reads): ranges that merge,
// duplicates refused, ends recorded, receipts as the dispatcher gets them.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "lib/service/client/split_ledger.h"

using tfdata::service::SplitLedger;
using tfdata::service::SplitReceipt;

namespace {

std::string Ranges(const SplitReceipt& r) {
  std::string out;
  for (int i = 0; i < r.range_begins_size(); ++i) out += fmt::format("[{},{})", r.range_begins(i), r.range_ends(i));
  return out;
}

}  // namespace

TEST_CASE("split ledger: ranges merge in any arrival order, and a sequence number comes once", "[split_ledger]") {
  SplitLedger ledger;
  for (int64_t seq : {5, 0, 2, 1, 7, 6, 9}) CHECK(ledger.Receive(0, 3, seq));
  auto receipts = ledger.Receipts();
  REQUIRE(receipts.size() == 1);
  CHECK(Ranges(receipts[0]) == "[0,3)[5,8)[9,10)");
  CHECK_FALSE(receipts[0].has_count());
  for (int64_t seq : {0, 2, 5, 7, 9}) CHECK_FALSE(ledger.Receive(0, 3, seq));
  CHECK(ledger.duplicates_dropped() == 5);
  CHECK(ledger.Receive(0, 3, 8));  // joins [5,8) and [9,10)
  CHECK(ledger.Receive(0, 3, 4));  // joins [5,10) from below
  CHECK(ledger.Receive(0, 3, 3));  // closes the gap
  ledger.End(0, 3, 10);
  receipts = ledger.Receipts();
  REQUIRE(receipts.size() == 1);
  CHECK(Ranges(receipts[0]) == "[0,10)");
  CHECK(receipts[0].count() == 10);
}

TEST_CASE("split ledger: splits are kept apart by epoch and index, empty ones included, and forgotten",
          "[split_ledger]") {
  SplitLedger ledger;
  CHECK(ledger.Receive(0, 1, 0));
  CHECK(ledger.Receive(1, 1, 0));  // the same split of the next epoch is another split
  ledger.End(0, 2, 0);             // an empty split: only its end
  const auto receipts = ledger.Receipts();
  REQUIRE(receipts.size() == 3);
  CHECK(fmt::format("{}/{} {}", receipts[1].epoch(), receipts[1].split(), Ranges(receipts[1])) == "0/2 ");
  CHECK(receipts[1].count() == 0);
  CHECK(fmt::format("{}/{} {}", receipts[2].epoch(), receipts[2].split(), Ranges(receipts[2])) == "1/1 [0,1)");
  ledger.Forget(0, 1);
  ledger.Forget(0, 2);
  CHECK(ledger.splits() == 1);
  CHECK(ledger.duplicates_dropped() == 0);
}
