// Element d of eight u32 packed as two vec4 (a uniform's Dims field:
// ops/layout.h), e.g. a shape or its strides.
fn dim_of(v: array<vec4<u32>, 2>, d: u32) -> u32 { return v[d >> 2u][d & 3u]; }
