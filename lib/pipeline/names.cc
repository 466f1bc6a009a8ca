#include "lib/pipeline/names.h"

#include <set>

namespace tfdata {

ComponentNames NamesAfterFunction(ComponentNames names, const pipeline::Function& fn) {
  if (fn.kind_case() == pipeline::Function::kPython) {
    // Whatever the code returns, unless the pipeline names it.
    if (fn.python().output_names().empty()) return std::nullopt;
    return std::vector<std::string>(fn.python().output_names().begin(), fn.python().output_names().end());
  }
  if (!names) return names;
  switch (fn.kind_case()) {
    case pipeline::Function::kParseExample: {
      const int c = fn.parse_example().component();
      if (c < 0 || c >= static_cast<int>(names->size())) return std::nullopt;
      std::vector<std::string> out(names->begin(), names->begin() + c);
      for (const auto& feature : fn.parse_example().feature()) out.push_back(feature.name());
      out.insert(out.end(), names->begin() + c + 1, names->end());
      return out;
    }
    case pipeline::Function::kCompare: return std::vector<std::string>{""};
    case pipeline::Function::kSelect: {
      std::vector<std::string> out;
      for (int c : fn.select().component()) {
        if (c < 0 || c >= static_cast<int>(names->size())) return std::nullopt;
        out.push_back((*names)[c]);
      }
      return out;
    }
    case pipeline::Function::kPlugin: return std::nullopt;  // whatever the code returns
    default: return names;
  }
}

ComponentNames NamesOf(const pipeline::Pipeline& p, ComponentNames names) {
  for (const pipeline::Op& op : p.op()) {
    switch (op.kind_case()) {
      case pipeline::Op::kRange:
      case pipeline::Op::kListFiles:
      case pipeline::Op::kTfrecord:
      case pipeline::Op::kTextLine: names = std::vector<std::string>{""}; break;
      case pipeline::Op::kFromTensorSlices:
        names = std::vector<std::string>(op.from_tensor_slices().tensor_size(), "");
        break;
      case pipeline::Op::kZip: {
        ComponentNames out = op.zip().input_size() > 0 && &op == &p.op(0) ? std::vector<std::string>{} : names;
        for (const auto& input : op.zip().input()) {
          ComponentNames in = NamesOf(input, std::nullopt);
          if (!out || !in) return std::nullopt;
          out->insert(out->end(), in->begin(), in->end());
        }
        names = out;
        break;
      }
      case pipeline::Op::kConcatenate:
        if (&op == &p.op(0)) {
          if (op.concatenate().input_size() == 0) return std::nullopt;
          names = NamesOf(op.concatenate().input(0), std::nullopt);
        }
        break;
      case pipeline::Op::kMap:
        for (const auto& fn : op.map().fn()) names = NamesAfterFunction(names, fn);
        break;
      case pipeline::Op::kInterleave: names = NamesOf(op.interleave().pipeline(), names); break;
      case pipeline::Op::kFlatMap:  // the last function's: python, named by its output_names or not
        for (const auto& fn : op.flat_map().fn()) names = NamesAfterFunction(names, fn);
        break;
      default: break;  // batch, shuffle, ...: the components stay
    }
  }
  return names;
}

ComponentNames DistinctNames(ComponentNames names) {
  if (!names || names->empty()) return std::nullopt;
  std::set<std::string> seen;
  for (const std::string& n : *names) {
    if (n.empty() || !seen.insert(n).second) return std::nullopt;
  }
  return names;
}

}  // namespace tfdata
