#include "lib/service/client/read_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "lib/pipeline/sharding.h"
#include "lib/service/common/read_progress.h"
#include "xxhash.h"

namespace tfdata::service {
namespace {

constexpr char kKind[] = "tfdata.ReadState";

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

std::string EncodeReadState(const ReadState& state) {
  ReadStateFile file;
  file.set_kind(kKind);
  file.set_state(state.SerializeAsString());
  file.set_xxhash64(XXH64(file.state().data(), file.state().size(), 0));
  return file.SerializeAsString();
}

absl::StatusOr<ReadState> DecodeReadState(std::string_view bytes, const std::string& where) {
  ReadStateFile file;
  if (bytes.empty()) return absl::DataLossError(absl::StrCat(where, ": empty, not a read state"));
  if (!file.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) || file.kind() != kKind) {
    return absl::DataLossError(absl::StrCat(where, ": not a tfdata read state (truncated, or another file)"));
  }
  if (XXH64(file.state().data(), file.state().size(), 0) != file.xxhash64()) {
    return absl::DataLossError(absl::StrCat(where, ": corrupted read state (checksum mismatch)"));
  }
  ReadState state;
  if (!state.ParseFromString(file.state())) {
    return absl::DataLossError(absl::StrCat(where, ": corrupted read state (does not parse)"));
  }
  if (state.version() == 0 || state.version() > kReadStateVersion) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": read state version ", state.version(),
                                                   "; this tfdata reads versions 1 to ", kReadStateVersion));
  }
  if (state.mode() != DISTRIBUTED_EPOCH) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": a read state of mode ", ProcessingMode_Name(state.mode()),
                                                   "; only distributed_epoch reads resume"));
  }
  if (auto p = ReadProgress::FromPlan(state.handed(), state.num_splits(), where); !p.ok()) return p.status();
  return state;
}

absl::StatusOr<ResumePlan> MergeReadStates(const std::vector<ReadState>& states, int64_t* elements) {
  if (states.empty()) return absl::InvalidArgumentError("no read state to resume from");
  const ReadState& first = states.front();
  ReadProgress merged(first.num_splits());
  ShardReadProgress merged_shards(first.handed().num_shards());
  int64_t total = 0;
  for (size_t i = 0; i < states.size(); ++i) {
    const ReadState& s = states[i];
    const std::string where = absl::StrCat("read state ", i);
    if (s.handed().dataset_fingerprint() != first.handed().dataset_fingerprint() ||
        s.handed().plan_fingerprint() != first.handed().plan_fingerprint() || s.num_splits() != first.num_splits() ||
        s.mode() != first.mode() || s.handed().num_shards() != first.handed().num_shards()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " is of another dataset or split plan than read state 0 (fingerprints ",
                       s.handed().dataset_fingerprint(), "/", s.handed().plan_fingerprint(), " against ",
                       first.handed().dataset_fingerprint(), "/", first.handed().plan_fingerprint(),
                       "): only the states of the readers of one job merge"));
    }
    total += s.elements();
    if (IsStaticSharding(s.mode())) {
      auto p = ShardReadProgress::FromPlan(s.handed(), where);
      if (!p.ok()) return p.status();
      merged_shards.Merge(*p);
      continue;
    }
    auto p = ReadProgress::FromPlan(s.handed(), s.num_splits(), where);
    if (!p.ok()) return p.status();
    merged.Merge(*p);
  }
  ResumePlan plan;
  if (IsStaticSharding(first.mode())) {
    merged_shards.ToPlan(&plan);
  } else {
    plan = merged.ToPlan();
  }
  plan.set_dataset_fingerprint(first.handed().dataset_fingerprint());
  plan.set_plan_fingerprint(first.handed().plan_fingerprint());
  if (elements != nullptr) *elements = total;
  return plan;
}

absl::Status WriteReadStateFile(const std::string& path, const ReadState& state) {
  const std::string bytes = EncodeReadState(state);
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create the read state file", tmp);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const absl::Status st = Errno("cannot write the read state file", tmp);
      close(fd);
      return st;
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    const absl::Status st = Errno("cannot sync the read state file", tmp);
    close(fd);
    return st;
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) return Errno("cannot replace the read state file", path);
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return absl::OkStatus();
}

absl::StatusOr<ReadState> ReadReadStateFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot open the read state file ", path, ": ", std::strerror(errno)));
  std::ostringstream buf;
  buf << in.rdbuf();
  return DecodeReadState(buf.str(), absl::StrCat("read state file ", path));
}

}  // namespace tfdata::service
