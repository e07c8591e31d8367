// wgnn.sample.default against a plain C++ reference: greedy (the first
// largest logit of the last position, ties included), sampling with
// temperature, top-k and top-p (the same counter-based hash; the reference
// in double, so a token may differ only where u * total falls within
// float32 rounding of a boundary), the frequencies of a known distribution,
// float16 logits, and every validation error.
#include <gmock/gmock.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "op_test_util.h"
#include "ops/registry.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

uint32_t hash(uint32_t v) {
  const uint32_t s = v * 747796405u + 2891336453u;
  const uint32_t w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
  return (w >> 22u) ^ w;
}

struct Ref {
  int64_t token = -1;
  double margin = 1;  // distance of u * total from the nearest boundary, relative to total
};

// One row: `x` its logits (the last position), the kernel's rule in double.
Ref reference(const std::vector<float>& x, double temperature, int64_t top_k, double top_p, uint32_t seed_lo,
              uint32_t seed_hi, uint32_t step, uint32_t row) {
  const size_t V = x.size();
  const double m = *std::max_element(x.begin(), x.end());
  std::vector<float> sorted(x);
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  float kth = sorted.back();
  if (top_k > 0 && size_t(top_k) < V) kth = sorted[size_t(top_k) - 1];
  std::vector<double> w(V, 0.0);
  double total = 0;
  for (size_t i = 0; i < V; ++i) {
    if (x[i] >= kth) w[i] = std::exp((double(x[i]) - m) / temperature), total += w[i];
  }
  if (top_p < 1) {
    // The largest threshold (a logit value) whose kept mass reaches top_p * total.
    float thr = kth;
    for (float v : sorted) {
      if (v < kth) break;
      double mass = 0;
      for (size_t i = 0; i < V; ++i)
        if (x[i] >= v) mass += w[i];
      if (mass >= top_p * total) {
        thr = v;
        break;
      }
    }
    total = 0;
    for (size_t i = 0; i < V; ++i) {
      if (x[i] < thr) w[i] = 0;
      total += w[i];
    }
  }
  const uint32_t r = hash(hash(hash(seed_lo ^ hash(seed_hi)) + step) + row);
  const double at = double(r >> 8u) / 16777216.0 * total;
  Ref out;
  double run = 0;
  for (size_t i = 0; i < V; ++i) {
    if (w[i] == 0) continue;
    const double next = run + w[i];
    out.margin = std::min({out.margin, std::abs(at - run) / total, std::abs(next - at) / total});
    if (out.token < 0 && next > at) out.token = int64_t(i);
    run = next;
  }
  if (out.token < 0) {
    for (size_t i = V; i > 0; --i)
      if (w[i - 1] > 0) {
        out.token = int64_t(i - 1);
        break;
      }
  }
  return out;
}

struct Sampled {
  std::vector<int64_t> ids;
};

// Runs the op once per step on `logits` [B, S, V] (rng = seed, step).
std::vector<std::vector<int64_t>> sample(const Shape& shape, const std::vector<float>& logits, DType dt,
                                         double temperature, int64_t top_k, double top_p, uint64_t seed, int steps) {
  Graph g(ctx());
  g.set_checked(false);
  TensorRef x = upload(g, shape, logits, dt);
  TensorRef rng = g.add_tensor({4}, DType::I32, TensorKind::Input);
  TensorRef y = ops::call(g, "wgnn.sample.default",
                          {x, temperature > 0 ? Value(rng) : Value(), temperature, top_k, top_p})
                    .tensor();
  g.mark_output(y);
  std::vector<std::vector<int64_t>> out;
  for (int s = 0; s < steps; ++s) {
    const int32_t r[4] = {int32_t(uint32_t(seed)), int32_t(uint32_t(seed >> 32)), s, 0};
    g.write(rng, r, sizeof(r));
    g.run();
    out.push_back(g.read<int64_t>(y));
  }
  return out;
}

std::vector<float> last_row(const std::vector<float>& logits, const Shape& shape, int64_t b) {
  const int64_t S = shape.size() == 3 ? shape[1] : 1, V = shape.back();
  const auto first = logits.begin() + (b * S + S - 1) * V;
  return std::vector<float>(first, first + V);
}

TEST(Sample, GreedyIsTheFirstLargestLogitOfTheLastPosition) {
  for (const int64_t V : {1, 7, 256, 1000, 50257}) {
    const Shape shape{3, 4, V};
    std::vector<float> x = random_floats(size_t(numel(shape)), -4, 4, uint32_t(V));
    // Row 1: a tie between two positions (the first must win); row 2: the
    // maximum at the very end.
    if (V > 3) {
      auto r1 = x.begin() + (1 * 4 + 3) * V;
      r1[1] = r1[V - 2] = 9.0f;
      x[size_t((2 * 4 + 3) * V + V - 1)] = 9.5f;
    }
    const auto got = sample(shape, x, DType::F32, 0.0, 0, 1.0, 0, 1)[0];
    for (int64_t b = 0; b < 3; ++b) {
      const auto row = last_row(x, shape, b);
      const int64_t want = int64_t(std::max_element(row.begin(), row.end()) - row.begin());
      EXPECT_EQ(got[size_t(b)], want) << "V " << V << " row " << b;
    }
  }
}

TEST(Sample, MatchesTheReferenceWithTemperatureTopKAndTopP) {
  struct Case {
    double t;
    int64_t k;
    double p;
  };
  const Shape shape{4, 2, 3000};
  const std::vector<float> x = random_floats(size_t(numel(shape)), -3, 3, 5);
  for (const Case c : {Case{1.0, 0, 1.0}, Case{0.7, 50, 1.0}, Case{1.3, 0, 0.9}, Case{0.9, 40, 0.6}, Case{2.0, 1, 1.0}}) {
    const uint64_t seed = 0x1234567890ull;
    const auto got = sample(shape, x, DType::F32, c.t, c.k, c.p, seed, 50);
    int near_boundary = 0, differ = 0;
    for (int s = 0; s < 50; ++s) {
      for (int64_t b = 0; b < 4; ++b) {
        const Ref r = reference(last_row(x, shape, b), c.t, c.k, c.p, uint32_t(seed), uint32_t(seed >> 32),
                                uint32_t(s), uint32_t(b));
        if (got[size_t(s)][size_t(b)] == r.token) continue;
        if (r.margin < 1e-5) ++near_boundary;
        else ++differ;
      }
    }
    EXPECT_EQ(differ, 0) << fmt::format("t {} k {} p {}", c.t, c.k, c.p);
    EXPECT_LE(near_boundary, 2) << fmt::format("t {} k {} p {}", c.t, c.k, c.p);
  }
}

TEST(Sample, TopKOneAndATinyTopPAreGreedy) {
  const Shape shape{2, 500};
  const std::vector<float> x = random_floats(size_t(numel(shape)), -2, 2, 9);
  const auto greedy = sample(shape, x, DType::F32, 0.0, 0, 1.0, 0, 1)[0];
  for (const auto& ids : sample(shape, x, DType::F32, 1.0, 1, 1.0, 3, 10)) EXPECT_EQ(ids, greedy);
  for (const auto& ids : sample(shape, x, DType::F32, 1.0, 0, 1e-6, 3, 10)) EXPECT_EQ(ids, greedy);
}

TEST(Sample, FrequenciesFollowTheSoftmax) {
  // p = 1/10, 2/10, 3/10, 4/10 at temperature 1; 64 rows x 40 steps.
  const int64_t rows = 64;
  const Shape shape{rows, 4};
  std::vector<float> x;
  for (int64_t b = 0; b < rows; ++b)
    for (double p : {0.1, 0.2, 0.3, 0.4}) x.push_back(float(std::log(p)));
  const auto got = sample(shape, x, DType::F32, 1.0, 0, 1.0, 77, 40);
  std::vector<double> count(4, 0);
  for (const auto& ids : got)
    for (int64_t id : ids) count[size_t(id)] += 1;
  const double n = double(rows * 40);
  for (size_t i = 0; i < 4; ++i) {
    const double p = 0.1 * double(i + 1), sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(count[i], n * p, 4 * sd) << "token " << i;
  }
  // Top-p 0.65 keeps the two most likely (0.4 + 0.3 reaches it, 0.4 alone
  // does not): only tokens 2 and 3, in proportion 3:4.
  const auto kept = sample(shape, x, DType::F32, 1.0, 0, 0.65, 78, 20);
  double c2 = 0, c3 = 0;
  for (const auto& ids : kept)
    for (int64_t id : ids) {
      EXPECT_TRUE(id == 2 || id == 3) << id;
      (id == 2 ? c2 : c3) += 1;
    }
  EXPECT_NEAR(c2 / (c2 + c3), 3.0 / 7.0, 0.06);
}

TEST(Sample, Float16Logits) {
  if (!ctx().features().shader_f16) GTEST_SKIP() << "the adapter lacks shader-f16";
  const Shape shape{2, 3, 700};
  const std::vector<float> x = quantize(random_floats(size_t(numel(shape)), -4, 4, 21), DType::F16);
  const auto got = sample(shape, x, DType::F16, 0.0, 0, 1.0, 0, 1)[0];
  for (int64_t b = 0; b < 2; ++b) {
    const auto row = last_row(x, shape, b);
    EXPECT_EQ(got[size_t(b)], int64_t(std::max_element(row.begin(), row.end()) - row.begin()));
  }
}

TEST(Sample, Errors) {
  Graph g(ctx());
  TensorRef x = upload(g, {2, 10}, std::vector<float>(20, 0.f), DType::F32);
  TensorRef x1 = upload(g, {10}, std::vector<float>(10, 0.f), DType::F32);
  TensorRef rng = g.add_tensor({4}, DType::I32, TensorKind::Input);
  TensorRef rng_f = g.add_tensor({4}, DType::F32, TensorKind::Input);
  auto err = [&](const ValueList& args) {
    try {
      ops::call(g, "wgnn.sample.default", args);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(err({x1, Value(), 0.0, int64_t(0), 1.0}), HasSubstr("[batch, vocab]"));
  EXPECT_THAT(err({x, Value(), 1.0, int64_t(0), 1.0}), HasSubstr("needs the seed"));
  EXPECT_THAT(err({x, rng_f, 1.0, int64_t(0), 1.0}), HasSubstr("int32"));
  EXPECT_THAT(err({x, rng, 1.0, int64_t(-1), 1.0}), HasSubstr("top_k"));
  EXPECT_THAT(err({x, rng, 1.0, int64_t(0), 0.0}), HasSubstr("top_p"));
  EXPECT_THAT(err({x, rng, 1.0, int64_t(0), 1.5}), HasSubstr("top_p"));
}

}  // namespace
