#include "lib/service/dispatcher/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/io/crc32c.h"

namespace tfdata::service {
namespace {

// Larger records are corrupt lengths, not updates (a pipeline is a few KiB).
constexpr uint32_t kMaxRecord = 256u << 20;

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

std::string EncodeRecord(const Update& update) {
  const std::string payload = update.SerializeAsString();
  std::string out;
  PutU32(&out, static_cast<uint32_t>(payload.size()));
  const uint32_t crc = Crc32cExtend(Crc32c(std::string_view(out.data(), 4)), payload.data(), payload.size());
  PutU32(&out, MaskCrc(crc));
  out += payload;
  return out;
}

absl::Status Errno(const std::string& what, const std::string& path) {
  const int e = errno;
  const std::string msg = fmt::format("dispatcher journal {}: {}: {}", path, what, std::strerror(e));
  return e == ENOSPC || e == EDQUOT ? absl::ResourceExhaustedError(msg) : absl::UnavailableError(msg);
}

class PosixJournalFile final : public JournalFile {
 public:
  PosixJournalFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixJournalFile() override { close(fd_); }

  absl::Status Append(std::string_view bytes) override {
    while (!bytes.empty()) {
      const ssize_t n = write(fd_, bytes.data(), bytes.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("write failed", path_);
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }
  absl::Status Sync() override {
    if (fdatasync(fd_) != 0) return Errno("sync failed", path_);
    return absl::OkStatus();
  }
  absl::Status Truncate(uint64_t size) override {
    if (ftruncate(fd_, static_cast<off_t>(size)) != 0) return Errno("truncate failed", path_);
    return absl::OkStatus();
  }

 private:
  const int fd_;
  const std::string path_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<JournalFile>> OpenJournalFile(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot open for writing", path);
  return std::make_unique<PosixJournalFile>(fd, path);
}

JournalWriter::JournalWriter(std::unique_ptr<JournalFile> file, uint64_t size, std::string path)
    : file_(std::move(file)), size_(size), path_(std::move(path)) {}

absl::Status JournalWriter::Init() {
  if (size_ != 0) return absl::OkStatus();
  absl::Status st = file_->Append(std::string_view(kJournalMagic, kJournalHeaderSize));
  if (st.ok()) st = file_->Sync();
  if (!st.ok()) {
    (void)file_->Truncate(0);
    return st;
  }
  size_ = kJournalHeaderSize;
  return absl::OkStatus();
}

absl::Status JournalWriter::Append(const Update& update) {
  std::string bytes;
  if (size_ == 0) bytes.assign(kJournalMagic, kJournalHeaderSize);
  bytes += EncodeRecord(update);
  absl::Status st = file_->Append(bytes);
  if (st.ok()) st = file_->Sync();
  if (!st.ok()) {
    // Leave no partial record: the next append must follow the last good one.
    if (auto cut = file_->Truncate(size_); !cut.ok()) {
      return absl::Status(st.code(), fmt::format("{}; and cutting the partial record failed too: {}",
                                                 std::string(st.message()), std::string(cut.message())));
    }
    return st;
  }
  size_ += bytes.size();
  ++records_;
  return absl::OkStatus();
}

absl::StatusOr<JournalContents> ReadJournal(const std::string& path) {
  JournalContents out;
  std::ifstream in(path, std::ios::binary);
  if (!in) return out;  // no journal yet
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  if (data.empty()) return out;
  if (data.size() < kJournalHeaderSize) {
    out.warning = fmt::format("{}: a torn header ({} bytes) was dropped", path, data.size());
    return out;
  }
  if (data.compare(0, kJournalHeaderSize, kJournalMagic, kJournalHeaderSize) != 0) {
    return absl::DataLossError(fmt::format("{}: not a tfdata journal (bad header at offset 0)", path));
  }
  size_t pos = kJournalHeaderSize;
  out.valid_bytes = pos;
  while (pos < data.size()) {
    const size_t remaining = data.size() - pos;
    auto torn = [&](const std::string& why) {
      out.warning =
          fmt::format("{}: the last record (offset {}, {} bytes) is torn ({}); dropped it", path, pos, remaining, why);
      return out;
    };
    if (remaining < 8) return torn("shorter than a record header");
    const uint32_t len = GetU32(data.data() + pos);
    const uint32_t crc = UnmaskCrc(GetU32(data.data() + pos + 4));
    if (len > kMaxRecord) {
      return absl::DataLossError(
          fmt::format("{}: corrupt record at offset {}: length {} is impossible", path, pos, len));
    }
    if (len > remaining - 8) return torn("shorter than its length");
    const uint32_t actual = Crc32cExtend(Crc32c(std::string_view(data.data() + pos, 4)), data.data() + pos + 8, len);
    const bool last = pos + 8 + len == data.size();
    if (actual != crc) {
      if (last) return torn("checksum mismatch");
      return absl::DataLossError(fmt::format("{}: corrupt record at offset {}: checksum mismatch", path, pos));
    }
    Update u;
    if (!u.ParseFromArray(data.data() + pos + 8, static_cast<int>(len))) {
      return absl::DataLossError(fmt::format("{}: corrupt record at offset {}: not an update", path, pos));
    }
    out.updates.push_back(std::move(u));
    pos += 8 + len;
    out.valid_bytes = pos;
  }
  return out;
}

absl::StatusOr<uint64_t> RewriteJournal(const std::string& path, const std::vector<Update>& updates) {
  const std::string tmp = path + ".compacting";
  const std::string bytes = EncodeJournal(updates);
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create the compacted journal", tmp);
  PosixJournalFile file(fd, tmp);
  TFD_RETURN_IF_ERROR(file.Append(bytes));
  TFD_RETURN_IF_ERROR(file.Sync());
  if (rename(tmp.c_str(), path.c_str()) != 0) return Errno("cannot replace the journal", path);
  const std::string dir = path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/'));
  const int dfd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return bytes.size();
}

std::string EncodeJournal(const std::vector<Update>& updates) {
  std::string out(kJournalMagic, kJournalHeaderSize);
  for (const Update& u : updates) out += EncodeRecord(u);
  return out;
}

}  // namespace tfdata::service
