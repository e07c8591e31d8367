// Runs ONNX backend test cases (model.onnx + test_data_set_N/{input,output}_K.pb)
// and compares with the stored outputs.
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "onnx/session.h"
#include "onnx/tensor_proto.h"
#include "tools/commands.h"

namespace fs = std::filesystem;

namespace wgnn::tools {
namespace {

HostTensor read_pb(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  onnx::TensorProto t;
  if (!in || !t.ParseFromIstream(&in)) throw Error(fmt::format("cannot parse tensor file '{}'", p.string()));
  return onnx_import::from_tensor_proto(t, p.parent_path().string());
}

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> v;
  for (int k = 0;; ++k) {
    fs::path p = dir / fmt::format("{}_{}.pb", prefix, k);
    if (!fs::exists(p)) break;
    v.push_back(p);
  }
  return v;
}

// "" if equal within tolerance, else what differs.
std::string compare(const HostTensor& got, const HostTensor& want, double rtol, double atol) {
  if (got.dtype != want.dtype) return fmt::format("dtype {} vs expected {}", dtype_name(got.dtype), dtype_name(want.dtype));
  if (got.shape != want.shape) return fmt::format("shape {} vs expected {}", shape_str(got.shape), shape_str(want.shape));
  const bool fl = got.dtype == DType::F32 || got.dtype == DType::F16;
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < size_t(got.numel()); ++i) {
    bool ok;
    if (fl) {
      const double a = got.get_double(i), b = want.get_double(i);
      if (std::isnan(b)) ok = std::isnan(a);
      else if (std::isinf(b)) ok = a == b;
      else {
        const double err = std::abs(a - b);
        ok = err <= atol + rtol * std::abs(b);
        if (!ok || std::isnan(a)) worst = std::max(worst, std::isnan(a) ? INFINITY : err);
      }
    } else {
      ok = got.get_int(i) == want.get_int(i);
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (!bad) return "";
  return fmt::format("{} of {} values differ (first at {}: {} vs {}; worst error {:.3g})", bad, got.numel(), first,
                     got.get_double(first), want.get_double(first), worst);
}

}  // namespace

int conformance(gpu::Context& ctx, const ConformanceOptions& o) {
  std::vector<fs::path> cases;
  for (const std::string& d : o.dirs) {
    if (fs::exists(fs::path(d) / "model.onnx")) {
      cases.emplace_back(d);
      continue;
    }
    if (!fs::is_directory(d)) throw Error(fmt::format("'{}' is not a folder", d));
    std::vector<fs::path> sub;
    for (const auto& e : fs::directory_iterator(d)) {
      if (fs::exists(e.path() / "model.onnx")) sub.push_back(e.path());
    }
    std::sort(sub.begin(), sub.end());
    cases.insert(cases.end(), sub.begin(), sub.end());
  }
  int passed = 0, failed = 0, skipped = 0;
  for (const fs::path& c : cases) {
    const std::string name = c.parent_path().filename().string() + "/" + c.filename().string();
    if (!o.filter.empty() && name.find(o.filter) == std::string::npos) continue;
    std::string status = "PASS", detail;
    try {
      onnx_import::SessionOptions so;
      so.fp16 = o.fp16;
      onnx_import::Session s(ctx, (c / "model.onnx").string(), so);
      std::vector<fs::path> sets;
      for (const auto& e : fs::directory_iterator(c)) {
        if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
      }
      std::sort(sets.begin(), sets.end());
      if (sets.empty()) throw Error("no test_data_set_N folder");
      for (const fs::path& set : sets) {
        std::map<std::string, HostTensor> inputs;
        const auto in_files = numbered(set, "input");
        if (in_files.size() != s.inputs().size()) {
          throw Error(fmt::format("{} input files for {} model inputs", in_files.size(), s.inputs().size()));
        }
        for (size_t k = 0; k < in_files.size(); ++k) inputs[s.inputs()[k].name] = read_pb(in_files[k]);
        auto outputs = s.run(inputs);
        const auto out_files = numbered(set, "output");
        for (size_t k = 0; k < out_files.size() && k < s.outputs().size(); ++k) {
          const std::string diff = compare(outputs.at(s.outputs()[k].name), read_pb(out_files[k]), o.rtol, o.atol);
          if (!diff.empty()) {
            status = "FAIL";
            detail = fmt::format("{} output '{}': {}", set.filename().string(), s.outputs()[k].name, diff);
            break;
          }
        }
        if (status != "PASS") break;
      }
    } catch (const Unsupported& e) {
      status = "UNSUPPORTED";
      detail = e.what();
    } catch (const std::exception& e) {
      status = "FAIL";
      detail = e.what();
    }
    if (status == "PASS") ++passed;
    else if (status == "FAIL") ++failed;
    else ++skipped;
    std::string first_line = detail.substr(0, detail.find('\n'));
    if (status == "PASS" || o.verbose || status == "FAIL" || !o.quiet_unsupported) {
      fmt::print("{:<11} {}{}{}\n", status, name, detail.empty() ? "" : ": ", first_line);
    }
  }
  fmt::print("{} passed, {} failed, {} skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}

}  // namespace wgnn::tools
