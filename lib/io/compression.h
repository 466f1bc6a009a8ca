// File compression kinds shared by the record and text readers/writers.
#pragma once

namespace tfdata {

enum class Compression { kNone, kGzip, kZlib };

}  // namespace tfdata
