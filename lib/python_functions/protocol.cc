#include "lib/python_functions/protocol.h"

#include <cstring>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/element_codec.h"
#include "lib/core/status_macros.h"

namespace tfdata::python_functions {
namespace {

size_t Padded(size_t n) { return (n + 7) & ~size_t{7}; }

absl::Status Corrupt(const std::string& what) {
  return absl::DataLossError(fmt::format("python helper message: {}", what));
}

// Reads a u64 at `*offset` of `region`'s first `limit` bytes.
absl::StatusOr<uint64_t> ReadU64(const SharedRegion& region, size_t limit, size_t* offset) {
  if (*offset > limit || limit - *offset < 8) return Corrupt(fmt::format("truncated at byte {}", *offset));
  uint64_t v;
  std::memcpy(&v, region.data() + *offset, 8);
  *offset += 8;
  return v;
}

// Writes one element's entry (size, frame, padding) at `*offset`, growing the region.
absl::Status WriteFrame(const Element& element, SharedRegion* region, size_t* offset) {
  FrameWriter w;
  TFD_RETURN_IF_ERROR(w.AppendElement(element));
  const uint64_t size = w.size();
  TFD_RETURN_IF_ERROR(region->Map(*offset + 8 + Padded(size), /*grow=*/true));
  std::memcpy(region->data() + *offset, &size, 8);
  uint8_t* p = region->data() + *offset + 8;
  for (const auto& [data, n] : w.Ranges()) {
    std::memcpy(p, data, n);
    p += n;
  }
  std::memset(p, 0, Padded(size) - size);
  *offset += 8 + Padded(size);
  return absl::OkStatus();
}

}  // namespace

namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string joined;
  for (const std::string& n : names) {
    joined += n;
    joined += '\0';
  }
  return joined;
}

absl::StatusOr<std::vector<std::string>> SplitNames(std::string_view rest) {
  std::vector<std::string> out;
  if (rest.empty()) return out;
  if (rest.back() != '\0') return Corrupt("component names not ended");
  while (!rest.empty()) {
    const size_t end = rest.find('\0');
    out.emplace_back(rest.substr(0, end));
    rest.remove_prefix(end + 1);
  }
  return out;
}

}  // namespace

std::string EncodeCall(PythonCallKind kind, const std::string& name, const PythonCallNames& names, uint32_t count,
                       uint64_t request_bytes, int response) {
  const std::string inputs = names.inputs ? JoinNames(*names.inputs) : "";
  const std::string outputs = JoinNames(names.outputs);
  CallHeader h;
  h.kind = static_cast<uint8_t>(kind);
  h.response = static_cast<uint8_t>(response);
  h.count = count;
  h.name_bytes = static_cast<uint32_t>(name.size());
  h.names_bytes = static_cast<uint32_t>(inputs.size());
  h.output_names_bytes = static_cast<uint32_t>(outputs.size());
  h.request_bytes = request_bytes;
  std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
  out += name;
  out += inputs;
  out += outputs;
  return out;
}

absl::StatusOr<Call> DecodeCall(const std::string& message) {
  CallHeader h;
  if (message.size() < sizeof(h)) return Corrupt("a call shorter than its header");
  std::memcpy(&h, message.data(), sizeof(h));
  if (h.magic != kCallMagic) return Corrupt("a call with the wrong magic");
  if (h.kind > static_cast<uint8_t>(PythonCallKind::kFlatMap)) return Corrupt(fmt::format("call kind {}", h.kind));
  if (h.response >= kResponseRegions) return Corrupt(fmt::format("response region {}", h.response));
  if (message.size() !=
      sizeof(h) + static_cast<size_t>(h.name_bytes) + static_cast<size_t>(h.names_bytes) + h.output_names_bytes) {
    return Corrupt("a call whose names do not fill it");
  }
  Call c;
  c.kind = static_cast<PythonCallKind>(h.kind);
  c.response = h.response;
  c.count = h.count;
  c.request_bytes = h.request_bytes;
  c.name = message.substr(sizeof(h), h.name_bytes);
  const std::string_view rest(message.data() + sizeof(h) + h.name_bytes, h.names_bytes + size_t{h.output_names_bytes});
  if (h.names_bytes > 0) {
    TFD_ASSIGN_OR_RETURN(c.names.inputs, SplitNames(rest.substr(0, h.names_bytes)));
  }
  TFD_ASSIGN_OR_RETURN(c.names.outputs, SplitNames(rest.substr(h.names_bytes)));
  return c;
}

absl::StatusOr<size_t> WriteRequest(const std::vector<Element>& inputs, SharedRegion* region) {
  size_t offset = 0;
  for (const Element& e : inputs) TFD_RETURN_IF_ERROR(WriteFrame(e, region, &offset));
  return offset;
}

absl::StatusOr<std::vector<Element>> ReadRequest(SharedRegion* region, const Call& call) {
  TFD_RETURN_IF_ERROR(region->Map(call.request_bytes, /*grow=*/false));
  const size_t limit = call.request_bytes;
  // The arrays handed to Python keep this mapping alive; its bytes are rewritten by the next call.
  auto buffer = Buffer::Wrap(region->data(), limit, region->mapping());
  std::vector<Element> out;
  size_t offset = 0;
  for (uint32_t i = 0; i < call.count; ++i) {
    TFD_ASSIGN_OR_RETURN(uint64_t size, ReadU64(*region, limit, &offset));
    if (size > limit - offset) return Corrupt(fmt::format("input {} overruns the request", i));
    TFD_ASSIGN_OR_RETURN(Element e, DecodeElement(buffer, offset, size));
    out.push_back(std::move(e));
    offset += Padded(size);
  }
  return out;
}

absl::Status ResponseWriter::Append(const void* data, size_t size) {
  TFD_RETURN_IF_ERROR(region_->Map(offset_ + size, /*grow=*/true));
  std::memcpy(region_->data() + offset_, data, size);
  offset_ += size;
  return absl::OkStatus();
}

absl::Status ResponseWriter::Pad() {
  static constexpr char kZeros[8] = {};
  return Append(kZeros, Padded(offset_) - offset_);
}

absl::Status ResponseWriter::AddElements(const std::vector<Element>& elements) {
  const uint32_t head[2] = {0, 0};
  const uint64_t n = elements.size();
  TFD_RETURN_IF_ERROR(Append(head, sizeof(head)));
  TFD_RETURN_IF_ERROR(Append(&n, 8));
  for (const Element& e : elements) TFD_RETURN_IF_ERROR(WriteFrame(e, region_, &offset_));
  return absl::OkStatus();
}

absl::Status ResponseWriter::AddError(const absl::Status& error) {
  const uint32_t head[2] = {static_cast<uint32_t>(error.code()), 0};
  const uint64_t n = error.message().size();
  TFD_RETURN_IF_ERROR(Append(head, sizeof(head)));
  TFD_RETURN_IF_ERROR(Append(&n, 8));
  TFD_RETURN_IF_ERROR(Append(error.message().data(), n));
  return Pad();
}

absl::StatusOr<std::vector<PythonCallResult>> ReadResponse(SharedRegion* region, const ReplyHeader& reply,
                                                           uint32_t count, std::shared_ptr<const void> owner) {
  if (reply.magic != kReplyMagic) return Corrupt("a reply with the wrong magic");
  if (reply.count != count) return Corrupt(fmt::format("{} results for {} inputs", reply.count, count));
  TFD_RETURN_IF_ERROR(region->Map(reply.response_bytes, /*grow=*/false));
  const size_t limit = reply.response_bytes;
  std::shared_ptr<Buffer> aliased;
  if (owner != nullptr) aliased = Buffer::Wrap(region->data(), limit, std::move(owner));
  std::vector<PythonCallResult> out;
  size_t offset = kResultsOffset;
  for (uint32_t i = 0; i < count; ++i) {
    TFD_ASSIGN_OR_RETURN(uint64_t head, ReadU64(*region, limit, &offset));
    TFD_ASSIGN_OR_RETURN(uint64_t n, ReadU64(*region, limit, &offset));
    const auto code = static_cast<uint32_t>(head & 0xffffffffu);
    if (code != 0) {
      if (code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated) || n > limit - offset) {
        return Corrupt(fmt::format("result {}: a bad error entry", i));
      }
      out.push_back(absl::Status(static_cast<absl::StatusCode>(code),
                                 std::string(reinterpret_cast<const char*>(region->data() + offset), n)));
      offset += Padded(n);
      continue;
    }
    std::vector<Element> elements;
    for (uint64_t j = 0; j < n; ++j) {
      TFD_ASSIGN_OR_RETURN(uint64_t size, ReadU64(*region, limit, &offset));
      if (size > limit - offset) return Corrupt(fmt::format("result {} overruns the response", i));
      if (aliased != nullptr) {
        TFD_ASSIGN_OR_RETURN(Element e, DecodeElement(aliased, offset, size));
        elements.push_back(std::move(e));
      } else {
        TFD_ASSIGN_OR_RETURN(
            Element e, DecodeElement(std::string_view(reinterpret_cast<const char*>(region->data() + offset), size)));
        elements.push_back(std::move(e));
      }
      offset += Padded(size);
    }
    out.push_back(std::move(elements));
  }
  return out;
}

}  // namespace tfdata::python_functions
