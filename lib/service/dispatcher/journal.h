// The fault-tolerant dispatcher's journal: every state Update, appended and synced to a file in
// the work directory before the RPC that caused it is answered, and replayed on start.
//
// File format (all integers little-endian):
//   header   8 bytes "TFDJRNL1"
//   records  length (u32) | masked crc32c of length bytes + payload (u32) | payload (a serialized
//            Update, proto/journal.proto)
// A torn final record (the process died mid-write: too short, or its checksum fails and nothing
// follows it) is dropped with a warning and cut off; a bad record with more data after it is
// corruption: an error naming the file and the record's offset.
//
// JournalFile is the seam for the file writes: tests substitute one that tears writes or runs out
// of space. Not thread-safe; the dispatcher serializes use under its mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/journal.pb.h"

namespace tfdata::service {

inline constexpr char kJournalMagic[] = "TFDJRNL1";
inline constexpr size_t kJournalHeaderSize = 8;

class JournalFile {
 public:
  virtual ~JournalFile() = default;
  // Appends `bytes`; on an error part of them may have been written.
  virtual absl::Status Append(std::string_view bytes) = 0;
  // Makes what was appended durable (fdatasync).
  virtual absl::Status Sync() = 0;
  // Cuts the file to `size` bytes.
  virtual absl::Status Truncate(uint64_t size) = 0;
};

// Opens (creating it if needed) the file at `path` for appending; the file must already hold a
// valid prefix (ReadJournal) or be empty. Errors name the path.
absl::StatusOr<std::unique_ptr<JournalFile>> OpenJournalFile(const std::string& path);

class JournalWriter {
 public:
  // `size` is the file's current length (0 for a new file: the header is written first).
  JournalWriter(std::unique_ptr<JournalFile> file, uint64_t size, std::string path);
  // Appends one record and syncs. On an error the file is cut back to where it was, so a failed
  // write leaves no partial record behind, and the error names the file.
  absl::Status Append(const Update& update);
  // Writes and syncs the header of a new (empty) journal, so that an unwritable or full disk
  // shows at start rather than at the first change. A no-op for a journal with content.
  absl::Status Init();
  uint64_t size() const { return size_; }
  int64_t records_written() const { return records_; }

 private:
  std::unique_ptr<JournalFile> file_;
  uint64_t size_;
  const std::string path_;
  int64_t records_ = 0;
};

struct JournalContents {
  std::vector<Update> updates;
  uint64_t valid_bytes = 0;  // the header and the good records; a torn tail starts here
  std::string warning;       // set when a torn tail was dropped
};

// Reads the journal at `path` (a missing or empty file has no records). DataLoss for corruption
// before the last record, naming the path and offset.
absl::StatusOr<JournalContents> ReadJournal(const std::string& path);

// Replaces the journal at `path` with one holding `updates` (compaction): writes a temporary file
// next to it, syncs it, renames it over `path` and syncs the directory, so a crash leaves either
// the old journal or the new one. Returns the new file's size.
absl::StatusOr<uint64_t> RewriteJournal(const std::string& path, const std::vector<Update>& updates);

// The journal's bytes for `updates` (header included): for tests and tools.
std::string EncodeJournal(const std::vector<Update>& updates);

}  // namespace tfdata::service
