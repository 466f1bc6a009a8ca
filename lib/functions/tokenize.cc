// tokenize: splits a string scalar into tokens, optionally mapped to vocabulary ids.
//
// The vocabulary is read once when the function is created and is immutable afterwards, so
// Apply only reads shared state and is thread-safe.
#include <array>
#include <fstream>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/functions/function.h"

namespace tfdata {
namespace {

constexpr std::string_view kName = "tokenize";
// Every element gets a [max_length] tensor, so an absurd value would allocate per element.
constexpr int64_t kMaxLength = int64_t{1} << 26;

// Reads `path` (one token per line, id = line number). The first occurrence of a duplicate
// token wins so that ids stay stable when a vocabulary is appended to.
absl::StatusOr<absl::flat_hash_map<std::string, int64_t>> LoadVocab(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open vocab_file '{}'", kName, path));
  absl::flat_hash_map<std::string, int64_t> vocab;
  std::string line;
  int64_t id = 0;
  while (std::getline(in, line)) {
    // Files written on Windows end lines with "\r\n"; the '\r' is not part of the token.
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) vocab.try_emplace(line, id);
    ++id;
  }
  if (in.bad()) return absl::DataLossError(fmt::format("{}: error reading vocab_file '{}'", kName, path));
  if (vocab.empty()) {
    return absl::InvalidArgumentError(fmt::format("{}: vocab_file '{}' has no tokens", kName, path));
  }
  return vocab;
}

class Tokenize final : public Function {
 public:
  Tokenize(const pipeline::Tokenize& spec, absl::flat_hash_map<std::string, int64_t> vocab)
      : spec_(spec), vocab_(std::move(vocab)), has_vocab_(!spec.vocab_file().empty()) {
    const std::string_view delims =
        spec.delimiters().empty() ? std::string_view(" \t\n\v\f\r") : std::string_view(spec.delimiters());
    for (char c : delims) is_delim_[static_cast<unsigned char>(c)] = true;
  }

  std::string_view name() const override { return kName; }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    TFD_RETURN_IF_ERROR(CheckComponent(kName, spec_.component(), input));
    if (input.unknown) return input;
    ElementSpec out = input;
    TensorSpec& c = out.components[static_cast<size_t>(spec_.component())];
    // An unknown rank cannot be checked here; Apply checks the actual tensor.
    if (c.dtype != DType::kString || (!c.unknown_rank && !c.shape.empty())) {
      return absl::InvalidArgumentError(
          fmt::format("{}: component {} must be a string scalar, got {}", kName, spec_.component(), c.DebugString()));
    }
    c.dtype = has_vocab_ ? DType::kInt64 : DType::kString;
    c.shape = {spec_.max_length() > 0 ? spec_.max_length() : -1};
    c.unknown_rank = false;
    return out;
  }

  absl::StatusOr<Element> Apply(Element input, const FunctionContext&) const override {
    TFD_RETURN_IF_ERROR(CheckComponent(kName, spec_.component(), input.size()));
    Tensor& t = input[static_cast<size_t>(spec_.component())];
    if (!t.is_string() || t.rank() != 0) {
      return absl::InvalidArgumentError(
          fmt::format("{}: component {} must be a string scalar, got {}", kName, spec_.component(), t.TypeString()));
    }
    std::vector<std::string> tokens = Split(t.strings()[0]);
    const int64_t max_length = spec_.max_length();
    if (!has_vocab_) {
      if (max_length > 0) tokens.resize(static_cast<size_t>(max_length));  // pads with ""
      const auto n = static_cast<int64_t>(tokens.size());
      t = Tensor::Strings({n}, std::move(tokens));
      return input;
    }
    const int64_t n = max_length > 0 ? max_length : static_cast<int64_t>(tokens.size());
    Tensor ids = Tensor::Zeros(DType::kInt64, {n});
    int64_t* out = ids.mutable_data<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      if (static_cast<size_t>(i) >= tokens.size()) {
        out[i] = spec_.pad_id();
        continue;
      }
      const std::string& tok = tokens[static_cast<size_t>(i)];
      // Debian's absl::string_view is not std::string_view, so build it explicitly.
      auto it = vocab_.find(absl::string_view(tok.data(), tok.size()));
      out[i] = it == vocab_.end() ? spec_.unk_id() : it->second;
    }
    t = std::move(ids);
    return input;
  }

 private:
  std::vector<std::string> Split(const std::string& text) const {
    std::vector<std::string> tokens;
    size_t start = 0;
    const size_t size = text.size();
    while (start < size) {
      while (start < size && is_delim_[static_cast<unsigned char>(text[start])]) ++start;
      size_t end = start;
      while (end < size && !is_delim_[static_cast<unsigned char>(text[end])]) ++end;
      if (end > start) {
        std::string tok = text.substr(start, end - start);
        if (spec_.lowercase()) {
          for (char& c : tok) {
            if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
          }
        }
        tokens.push_back(std::move(tok));
      }
      start = end;
    }
    return tokens;
  }

  const pipeline::Tokenize spec_;
  const absl::flat_hash_map<std::string, int64_t> vocab_;
  const bool has_vocab_;
  std::array<bool, 256> is_delim_{};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Function>> MakeTokenize(const pipeline::Tokenize& spec, MemoryScope memory,
                                                       std::shared_ptr<const PathPolicy> paths) {
  if (spec.max_length() < 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: max_length must be >= 0 (0: no limit), got {}", kName, spec.max_length()));
  }
  if (spec.max_length() > kMaxLength) {
    return absl::InvalidArgumentError(
        fmt::format("{}: max_length {} is too large (at most {})", kName, spec.max_length(), kMaxLength));
  }
  // Each output is max_length tokens (padded): a string costs its object and a little text.
  TFD_RETURN_IF_ERROR(memory.get().CheckAllocation(spec.max_length() * 40, memory.where,
                                                   fmt::format("max_length {} tokens per element", spec.max_length())));
  absl::flat_hash_map<std::string, int64_t> vocab;
  if (!spec.vocab_file().empty()) {
    if (paths) TFD_RETURN_IF_ERROR(paths->Check(spec.vocab_file()));
    TFD_ASSIGN_OR_RETURN(vocab, LoadVocab(spec.vocab_file()));
  }
  return std::make_unique<Tokenize>(spec, std::move(vocab));
}

}  // namespace tfdata
