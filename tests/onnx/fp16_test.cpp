
// LayerNormalization's Mean output (float32 in the model) is float16 inside
// the graph, so ops mixing it with the normalized output work, and as a
// graph output it is cast back to float32.
TEST(Fp16Session, LayerNormStatisticsFollowTheMode) {
  ModelBuilder b;
  b.input("x", {2, 4});
  b.output("z", {2, 4});
  b.output("m", {2, 1});
  b.init_f32("s", {4}, {1, 1, 1, 1});
  b.init_f32("b", {4}, {0, 0, 0, 0});
  ModelBuilder::attr_int(b.node("LayerNormalization", {"x", "s", "b"}, {"y", "m"}), "axis", -1);
  b.node("Add", {"y", "m"}, {"z"});
  Session s(test::ctx(), b.save("fp16_ln_stats.onnx"), fp16_mode());
  HostTensor x(DType::F32, {2, 4});
  const float xv[] = {1, 2, 3, 4, -8, 0, 8, 16};
  std::memcpy(x.data.data(), xv, sizeof xv);
  auto out = s.run({{"x", x}});
  ASSERT_EQ(out.at("m").dtype, DType::F32);
  ASSERT_EQ(out.at("z").dtype, DType::F32);
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < 4; ++c) mean += xv[r * 4 + c] / 4.0;
    for (int c = 0; c < 4; ++c) var += (xv[r * 4 + c] - mean) * (xv[r * 4 + c] - mean) / 4.0;
    EXPECT_NEAR(out.at("m").get_double(size_t(r)), mean, 1e-3 * std::abs(mean) + 1e-3);
    for (int c = 0; c < 4; ++c) {
      const double want = (xv[r * 4 + c] - mean) / std::sqrt(var + 1e-5) + mean;
      EXPECT_NEAR(out.at("z").get_double(size_t(r * 4 + c)), want, 1e-2 * 4 + 1e-3) << r << "," << c;
    }
  }
}
