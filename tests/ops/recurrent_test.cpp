// wgnn.recurrent (RNN, GRU, LSTM steps) against a double-precision C++
// reference: every kind, both directions and bidirectional, sequence
// lengths (0, partial, full), initial states, peepholes, input_forget,
// clip, GRU's linear_before_reset, every activation, hidden sizes above the
// workgroup (several units per invocation), both kernels (persistent and a
// dispatch per step), float16, and the validation errors.
#include <gmock/gmock.h>

#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "op_test_util.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

struct Case {
  std::string kind = "lstm";
  int64_t T = 4, B = 2, H = 5, D = 1;
  bool reverse = false;  // when D == 1
  bool rb = true, h0 = true, c0 = true, p = false, seq = false;
  std::vector<int32_t> lens;  // when seq
  std::vector<int64_t> acts;  // 3 per direction; empty: the kind's defaults
  std::vector<double> alpha, beta;
  std::optional<double> clip;
  bool lbr = false, input_forget = false;
  std::string mode = "persistent";
  DType dt = DType::F32;
};

double act(int64_t code, double a, double b, double x) {
  switch (code) {
    case 0: return std::max(x, 0.0);
    case 1: return std::tanh(x);
    case 2: return 1 / (1 + std::exp(-x));
    case 3: return a * x + b;
    case 4: return x >= 0 ? x : a * x;
    case 5: return x > a ? x : 0;
    case 6: return a * std::tanh(b * x);
    case 7: return std::clamp(a * x + b, 0.0, 1.0);
    case 8: return x >= 0 ? x : a * (std::exp(x) - 1);
    case 9: return x / (1 + std::abs(x));
    default: return std::log1p(std::exp(x));
  }
}

void check(Case k, uint32_t seed) {
  if (k.dt == DType::F16 && !ctx().features().shader_f16) GTEST_SKIP() << "no shader-f16";
  SCOPED_TRACE(fmt::format("{} T{} B{} H{} D{} rev {} seq {} {} {}", k.kind, k.T, k.B, k.H, k.D, k.reverse, k.seq, k.mode,
                           dtype_name(k.dt)));
  const int64_t G = k.kind == "rnn" ? 1 : k.kind == "gru" ? 3 : 4;
  const int64_t T = k.T, B = k.B, H = k.H, D = k.D;
  const bool lstm = k.kind == "lstm";
  if (k.acts.empty()) {
    for (int64_t d = 0; d < D; ++d) {
      if (k.kind == "rnn") k.acts.insert(k.acts.end(), {1, 1, 1});
      else k.acts.insert(k.acts.end(), {2, 1, 1});
    }
  }
  if (k.alpha.empty()) k.alpha.assign(size_t(3 * D), 0.0);
  if (k.beta.empty()) k.beta.assign(size_t(3 * D), 0.0);
  auto q = [&](std::vector<float> v) { return quantize(std::move(v), k.dt); };
  const auto proj = q(random_floats(size_t(T * B * D * G * H), -1.5f, 1.5f, seed));
  const auto r = q(random_floats(size_t(D * G * H * H), -0.6f, 0.6f, seed + 1));
  const auto rb = q(random_floats(size_t(D * G * H), -0.3f, 0.3f, seed + 2));
  const auto h0 = q(random_floats(size_t(D * B * H), -0.8f, 0.8f, seed + 3));
  const auto c0 = q(random_floats(size_t(D * B * H), -0.8f, 0.8f, seed + 4));
  const auto p = q(random_floats(size_t(D * 3 * H), -0.5f, 0.5f, seed + 5));
  std::vector<int32_t> lens = k.seq ? k.lens : std::vector<int32_t>(size_t(B), int32_t(T));

  // Reference.
  std::vector<double> y(size_t(T * D * B * H), 0.0), yh(size_t(D * B * H)), yc(size_t(D * B * H));
  for (int64_t d = 0; d < D; ++d) {
    const bool rev = D == 2 ? d == 1 : k.reverse;
    // clip bounds the gates' inputs; LSTM's h(C) takes the cell as it is
    // (as ONNX Runtime computes it).
    auto f = [&](int w, double x) {
      if (k.clip && w < 2) x = std::clamp(x, -*k.clip, *k.clip);
      const size_t at = size_t(3 * d + w);
      return act(k.acts[at], k.alpha[at], k.beta[at], x);
    };
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> h(static_cast<size_t>(H)), c(static_cast<size_t>(H), 0.0);
      for (int64_t j = 0; j < H; ++j) {
        h[size_t(j)] = k.h0 ? h0[size_t((d * B + b) * H + j)] : 0.0;
        if (lstm && k.c0) c[size_t(j)] = c0[size_t((d * B + b) * H + j)];
      }
      const int64_t len = lens[size_t(b)];
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = rev ? len - 1 - s : s;
        auto x = [&](int64_t g, int64_t j) { return double(proj[size_t(((t * B + b) * D + d) * G * H + g * H + j)]); };
        auto dot = [&](int64_t g, int64_t j, const std::vector<double>& v) {
          double acc = 0;
          for (int64_t m = 0; m < H; ++m) acc += double(r[size_t(((d * G + g) * H + j) * H + m)]) * v[size_t(m)];
          return acc;
        };
        auto bias = [&](int64_t g, int64_t j) { return k.rb ? double(rb[size_t((d * G + g) * H + j)]) : 0.0; };
        auto peep = [&](int64_t w, int64_t j) { return k.p ? double(p[size_t(d * 3 * H + w * H + j)]) : 0.0; };
        std::vector<double> hn(static_cast<size_t>(H)), cn(static_cast<size_t>(H));
        std::vector<double> rh(static_cast<size_t>(H));
        if (k.kind == "gru") {
          for (int64_t j = 0; j < H; ++j) rh[size_t(j)] = f(0, x(1, j) + dot(1, j, h) + bias(1, j)) * h[size_t(j)];
        }
        for (int64_t j = 0; j < H; ++j) {
          if (k.kind == "rnn") {
            hn[size_t(j)] = f(0, x(0, j) + dot(0, j, h) + bias(0, j));
          } else if (k.kind == "gru") {
            const double z = f(0, x(0, j) + dot(0, j, h) + bias(0, j));
            const double rr = f(0, x(1, j) + dot(1, j, h) + bias(1, j));
            const double n = k.lbr ? f(1, x(2, j) + rr * (dot(2, j, h) + bias(2, j)))
                                   : f(1, x(2, j) + dot(2, j, rh) + bias(2, j));
            hn[size_t(j)] = (1 - z) * n + z * h[size_t(j)];
          } else {
            const double cp = c[size_t(j)];
            const double i = f(0, x(0, j) + dot(0, j, h) + bias(0, j) + peep(0, j) * cp);
            const double fg = k.input_forget ? 1 - i : f(0, x(2, j) + dot(2, j, h) + bias(2, j) + peep(2, j) * cp);
            const double g = f(1, x(3, j) + dot(3, j, h) + bias(3, j));
            cn[size_t(j)] = fg * cp + i * g;
            const double o = f(0, x(1, j) + dot(1, j, h) + bias(1, j) + peep(1, j) * cn[size_t(j)]);
            hn[size_t(j)] = o * f(2, cn[size_t(j)]);
          }
        }
        h = hn;
        if (lstm) c = cn;
        for (int64_t j = 0; j < H; ++j) y[size_t(((t * D + d) * B + b) * H + j)] = h[size_t(j)];
      }
      for (int64_t j = 0; j < H; ++j) {
        yh[size_t((d * B + b) * H + j)] = h[size_t(j)];
        yc[size_t((d * B + b) * H + j)] = c[size_t(j)];
      }
    }
  }

  Graph g(ctx());
  const Value none = None{};
  IntList rev;
  for (int64_t d = 0; d < D; ++d) rev.push_back(D == 2 ? d : k.reverse);
  ValueList alpha, beta;
  for (double v : k.alpha) alpha.push_back(v);
  for (double v : k.beta) beta.push_back(v);
  const TensorRef seq_t = k.seq ? g.add_constant({B}, DType::I32, lens.data()) : TensorRef{-1};
  Value out = ops::call(
      g, "wgnn.recurrent.default",
      {k.kind, upload(g, {T, B, D * G * H}, proj, k.dt), constant(g, {D, G * H, H}, r, k.dt),
       k.rb ? Value(constant(g, {D, G * H}, rb, k.dt)) : none, k.seq ? Value(seq_t) : none,
       k.h0 ? Value(upload(g, {D, B, H}, h0, k.dt)) : none,
       lstm && k.c0 ? Value(upload(g, {D, B, H}, c0, k.dt)) : none,
       lstm && k.p ? Value(constant(g, {D, 3 * H}, p, k.dt)) : none, IntList(k.acts), alpha, beta, rev,
       k.clip ? Value(*k.clip) : none, k.lbr, k.input_forget, k.mode});
  const ValueList& o = out.list();
  ASSERT_EQ(o.size(), lstm ? 3u : 2u);
  for (const Value& v : o) g.mark_output(v.tensor());
  EXPECT_EQ(g.info(o[0].tensor()).shape, (Shape{T, D, B, H}));
  EXPECT_EQ(g.info(o[1].tensor()).shape, (Shape{D, B, H}));
  g.run();
  const double atol = k.dt == DType::F16 ? 6e-3 : 2e-6, rtol = k.dt == DType::F16 ? 6e-3 : 2e-6;
  EXPECT_TRUE(all_close(download(g, o[0].tensor()), y, atol, rtol)) << "Y";
  EXPECT_TRUE(all_close(download(g, o[1].tensor()), yh, atol, rtol)) << "Y_h";
  if (lstm) EXPECT_TRUE(all_close(download(g, o[2].tensor()), yc, atol, rtol)) << "Y_c";
}

}  // namespace

TEST(Recurrent, EveryKindBothKernels) {
  for (const char* mode : {"persistent", "step"}) {
    for (const char* kind : {"rnn", "gru", "lstm"}) {
      Case k;
      k.kind = kind;
      k.mode = mode;
      check(k, 1);
      k.lbr = true;  // GRU only; ignored by the others
      if (k.kind == "gru") check(k, 2);
    }
  }
}

TEST(Recurrent, DirectionsAndSequenceLengths) {
  for (const char* mode : {"persistent", "step"}) {
    for (const char* kind : {"rnn", "gru", "lstm"}) {
      Case k;
      k.kind = kind;
      k.mode = mode;
      k.T = 5;
      k.B = 4;
      k.D = 2;
      k.seq = true;
      k.lens = {5, 0, 3, 1};
      check(k, 3);
      k.D = 1;
      k.reverse = true;
      k.lens = {2, 5, 0, 4};
      check(k, 4);
    }
  }
}

TEST(Recurrent, OptionalInputsAbsent) {
  for (const char* kind : {"rnn", "gru", "lstm"}) {
    Case k;
    k.kind = kind;
    k.rb = k.h0 = k.c0 = false;
    check(k, 5);
  }
}

TEST(Recurrent, LstmPeepholesInputForgetClip) {
  Case k;
  k.p = true;
  k.clip = 0.7;
  check(k, 6);
  k.input_forget = true;
  k.D = 2;
  check(k, 7);
  k.mode = "step";
  check(k, 8);
}

TEST(Recurrent, EveryActivation) {
  // codes 0..10 (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu,
  // ScaledTanh, HardSigmoid, Elu, Softsign, Softplus) over LSTM's f, g, h.
  const double a[11] = {0, 0, 0, 0.7, 0.05, 0.2, 0.9, 0.3, 0.8, 0, 0};
  const double b[11] = {0, 0, 0, 0.1, 0, 0, 1.3, 0.45, 0, 0, 0};
  for (int64_t first = 0; first < 11; first += 3) {
    Case k;
    k.D = 2;
    for (int64_t i = 0; i < 6; ++i) {
      const int64_t code = (first + i) % 11;
      k.acts.push_back(code);
      k.alpha.push_back(a[code]);
      k.beta.push_back(b[code]);
    }
    check(k, uint32_t(10 + first));
  }
}

TEST(Recurrent, HiddenLargerThanTheWorkgroup) {
  for (const char* kind : {"gru", "lstm"}) {
    Case k;
    k.kind = kind;
    k.H = 130;
    k.T = 3;
    k.B = 1;
    check(k, 20);
    k.mode = "step";
    check(k, 21);
  }
}

TEST(Recurrent, Float16) {
  for (const char* kind : {"rnn", "gru", "lstm"}) {
    Case k;
    k.kind = kind;
    k.dt = DType::F16;
    k.D = 2;
    check(k, 30);
  }
}

TEST(Recurrent, Errors) {
  Graph g(ctx());
  const Value none = None{};
  const TensorRef proj = g.add_tensor({3, 2, 4 * 5}, DType::F32);
  const TensorRef r = g.add_tensor({1, 20, 5}, DType::F32);
  auto call = [&](const std::string& kind, TensorRef rr, Value seq, IntList acts) {
    ValueList al(acts.size(), Value(0.0));
    return ops::call(g, "wgnn.recurrent.default", {kind, proj, rr, none, seq, none, none, none, acts, al, al,
                                                   IntList{0}, none, false, false, std::string("auto")});
  };
  auto expect = [&](auto&& f, const char* needle) {
    try {
      f();
      ADD_FAILURE() << "no error; expected " << needle;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("wgnn.recurrent.default"));
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  expect([&] { call("lstmx", r, none, {2, 1, 1}); }, "accepted: rnn, gru, lstm");
  expect([&] { call("gru", r, none, {2, 1, 1}); }, "expected [D, 3*H, H]");
  expect([&] { call("lstm", r, none, {2, 1}); }, "3 entries per direction");
  expect([&] { call("lstm", r, none, {2, 1, 11}); }, "activation code 11");
  expect([&] { call("lstm", r, g.add_tensor({3}, DType::I32), {2, 1, 1}); }, "argument 'seq' has shape [3]");
  expect([&] { call("lstm", r, g.add_tensor({2}, DType::F32), {2, 1, 1}); }, "expected int32");
  expect([&] { call("lstm", g.add_tensor({1, 20, 5}, DType::F16), none, {2, 1, 1}); }, "has dtype float16");
}
