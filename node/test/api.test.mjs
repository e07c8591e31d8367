// The package's API against an installed copy (tests/tools/node_package_test.py
// installs the tarball in a fresh folder, copies this file there and runs it
// with `node --test` and `bun test`). WGNN_TEST_MODELS names a folder with
// the models that test writes (affine.onnx, types.onnx); WGNN_TEST_ISNET and
// WGNN_TEST_PHOTO the matting model and a photo.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import * as esm from 'wgnn';

const require = createRequire(import.meta.url);
const cjs = require('wgnn');
const { InferenceSession, Tensor, removeBackground, getDeviceInfo, Generator, generate } = esm;

const MODELS = process.env.WGNN_TEST_MODELS;
const ISNET = process.env.WGNN_TEST_ISNET;
const PHOTO = process.env.WGNN_TEST_PHOTO;
const affine = () => path.join(MODELS, 'affine.onnx');

test('require and import give the same objects', () => {
  assert.equal(cjs.InferenceSession, esm.InferenceSession);
  assert.equal(cjs.Tensor, esm.Tensor);
  assert.equal(esm.default, cjs);
  assert.match(cjs.version, /^\d+\.\d+\.\d+$/);
});

test('the package loads its own libraries and, without a GPU, its own lavapipe', async () => {
  const info = await getDeviceInfo();
  const text = JSON.stringify(info);
  const pkg = path.dirname(require.resolve('wgnn'));
  if (/lavapipe/.test(text) && /bundled/.test(text)) assert.ok(text.includes(pkg), text);
});

test('Tensor: types, typed arrays, dims', () => {
  const t = new Tensor('float32', [1, 2, 3, 4, 5, 6], [2, 3]);
  assert.ok(t.data instanceof Float32Array);
  assert.deepEqual(t.dims, [2, 3]);
  assert.equal(t.size, 6);
  assert.equal(new Tensor(new BigInt64Array(2)).type, 'int64');
  assert.equal(new Tensor('int64', [1, 2]).data[1], 2n);
  assert.deepEqual(Array.from(new Tensor('bool', [true, false]).data), [1, 0]);
  assert.deepEqual(new Tensor(new Int32Array(4)).dims, [4]);
  assert.throws(() => new Tensor('float32', new Int32Array(2)), /Float32Array/);
  assert.throws(() => new Tensor('string', ['a']), /not supported.*float32/);
  assert.throws(() => new Tensor('float32', new Float32Array(5), [2, 3]), /6 elements but the data has 5/);
  assert.throws(() => new Tensor('float32', new Float32Array(2), [-1, -2]), /dims/);
});

test('a session: names, metadata, a run, fetches', async () => {
  const s = await InferenceSession.create(affine());
  assert.deepEqual(s.inputNames, ['x']);
  assert.deepEqual(s.outputNames, ['y']);
  assert.deepEqual(s.inputMetadata[0], { name: 'x', isTensor: true, type: 'float32', shape: ['N', 4] });
  const x = new Tensor('float32', Float32Array.from([1, 2, 3, 4, 0, 1, -2, 2]), [2, 4]);
  const { y } = await s.run({ x });
  assert.ok(y instanceof Tensor);
  assert.equal(y.type, 'float32');
  assert.deepEqual(y.dims, [2, 4]);
  assert.deepEqual(Array.from(y.data), [3, -1, 2.5, 13, 1, 0, 0, 7]);
  assert.deepEqual(Object.keys(await s.run({ x }, ['y'])), ['y']);
  assert.deepEqual(Object.keys(await s.run({ x }, { y: null })), ['y']);
  await s.release();
  await assert.rejects(s.run({ x }), /released/);
});

test('a session from bytes (Uint8Array, ArrayBuffer with offset)', async () => {
  const bytes = await readFile(affine());
  const s1 = await InferenceSession.create(new Uint8Array(bytes));
  const padded = new Uint8Array(bytes.length + 8);
  padded.set(bytes, 8);
  const s2 = await InferenceSession.create(padded.buffer, 8, bytes.length, {});
  const x = new Tensor('float32', Float32Array.from([1, 1, 1, 1]), [1, 4]);
  assert.deepEqual(Array.from((await s1.run({ x })).y.data), [3, 0, 1.5, 4]);
  assert.deepEqual(Array.from((await s2.run({ x })).y.data), [3, 0, 1.5, 4]);
});

test('every element type in and out', async () => {
  const s = await InferenceSession.create(path.join(MODELS, 'types.onnx'));
  const feeds = {
    i64: new Tensor('int64', BigInt64Array.from([1n, -2n, 2n ** 30n]), [3]),
    b: new Tensor('bool', Uint8Array.from([1, 0, 1]), [3]),
    u8: new Tensor('uint8', Uint8Array.from([0, 7, 255]), [3]),
    i8: new Tensor('int8', Int8Array.from([-128, 5]), [2]),
    i32: new Tensor('int32', Int32Array.from([-3, 4]), [2]),
    f16: new Tensor('float16', Uint16Array.from([0x3c00, 0xc000]), [2]), // 1, -2
  };
  const out = await s.run(feeds);
  assert.equal(out.i64_out.type, 'int64');
  assert.deepEqual(Array.from(out.i64_out.data), [2n, -1n, 2n ** 30n + 1n]);
  assert.equal(out.b_out.type, 'bool');
  assert.deepEqual(Array.from(out.b_out.data), [0, 1, 0]);
  assert.equal(out.u8_out.type, 'uint8');
  assert.deepEqual(Array.from(out.u8_out.data), [0, 7, 255]);
  assert.equal(out.i8_out.type, 'int8');
  assert.deepEqual(Array.from(out.i8_out.data), [-128, 5]);
  assert.equal(out.i32_out.type, 'int32');
  assert.deepEqual(Array.from(out.i32_out.data), [-9, 12]);
  assert.equal(out.f16_out.type, 'float16');
  assert.ok(out.f16_out.data instanceof Uint16Array);
  assert.deepEqual(Array.from(out.f16_out.data), [0x4000, 0xc400]); // 2, -4
  // int64 is int32 on the GPU: a value beyond is refused, not wrapped.
  feeds.i64 = new Tensor('int64', BigInt64Array.from([1n, 2n, 2n ** 40n]), [3]);
  await assert.rejects(s.run(feeds), (e) => /int32 range/.test(e.message) && e.code === 'WGNN_ERROR_MODEL');
});

test('errors carry wgnn messages and codes', async () => {
  await assert.rejects(InferenceSession.create(path.join(MODELS, 'missing.onnx')),
                       (e) => e instanceof Error && /missing\.onnx/.test(e.message) && /^WGNN_ERROR_/.test(e.code));
  await assert.rejects(InferenceSession.create(new Uint8Array([1, 2, 3, 4])), /model/i);
  await assert.rejects(InferenceSession.create(42), TypeError);
  const s = await InferenceSession.create(affine());
  const x = new Tensor('float32', new Float32Array(4), [1, 4]);
  await assert.rejects(s.run({ z: x }), /'z' is not an input/);
  await assert.rejects(s.run({ x: new Tensor('float32', new Float32Array(3), [1, 3]) }), /shape|dim/i);
  await assert.rejects(s.run({ x: new Tensor('int32', new Int32Array(4), [1, 4]) }), /int32|dtype|type/i);
  await assert.rejects(s.run({ x }, ['nope']), /no output named 'nope'/);
  await assert.rejects(s.run({ x: [1, 2, 3, 4] }), /not a Tensor/);
});

test('runs in parallel settle with their own results', async () => {
  const s = await InferenceSession.create(affine());
  const runs = [];
  for (let i = 0; i < 16; ++i) {
    runs.push(s.run({ x: new Tensor('float32', Float32Array.from([i, i, i, i]), [1, 4]) }));
  }
  const outs = await Promise.all(runs);
  outs.forEach(({ y }, i) => assert.deepEqual(Array.from(y.data), [2 * i + 1, 1 - i, 0.5 * i + 1, 3 * i + 1]));
});

// Loading ISNet takes seconds on a busy 2-core machine: more than Bun's
// default 5 s per test.
test('removeBackground: bytes in, an RGBA PNG out, the JS thread free meanwhile', { timeout: 120000 }, async () => {
  let ticks = 0;
  const timer = setInterval(() => ++ticks, 5);
  let png;
  try {
    png = await removeBackground(await readFile(PHOTO), { model: ISNET, size: 64 });
  } finally {
    clearInterval(timer);
  }
  assert.ok(Buffer.isBuffer(png));
  assert.deepEqual(Array.from(png.subarray(0, 8)), [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.equal(png[25], 6, 'colour type 6: RGBA');
  assert.ok(ticks > 5, `the event loop ran ${ticks} times during the cut-out`);
});

test('removeBackground errors', async () => {
  await assert.rejects(removeBackground(Buffer.from('not an image'), { model: ISNET, size: 64 }), /image|PNG|JPEG/i);
  await assert.rejects(removeBackground(PHOTO, { model: path.join(MODELS, 'missing.onnx') }), /missing\.onnx/);
  await assert.rejects(removeBackground(path.join(MODELS, 'missing.png'), { model: ISNET }), /missing\.png/);
  await assert.rejects(removeBackground(PHOTO, { model: ISNET, size: -3 }), RangeError);
  await assert.rejects(removeBackground(12), TypeError);
});

test('generation: a decoder token by token, greedy, with an end token and a batch', async () => {
  const decoder = path.join(MODELS, 'decoder.onnx'); // next token = last + 1 (mod 8)
  const g = await Generator.create({ decoder });
  const r = await g.generate([0, 1], { maxNewTokens: 5 });
  assert.deepEqual(r.tokens, [[2, 3, 4, 5, 6]]);
  assert.equal(r.stepMs.length, 4);
  assert.ok(r.totalMs > 0);
  assert.deepEqual((await g.generate([[0, 1]], { maxNewTokens: 5, eos: [4] })).tokens, [[2, 3, 4]]);
  assert.deepEqual((await g.generate([[0, 1], [5, 6]], { maxNewTokens: 5 })).tokens,
                   [[2, 3, 4, 5, 6], [7, 0, 1, 2, 3]]);
  await assert.rejects(g.generate([0, 1], { maxNewTokens: 0 }), RangeError);
  await g.release();
  await assert.rejects(g.generate([0, 1]), /released/);
  assert.deepEqual((await generate({ decoder }, [3], { maxNewTokens: 2 })).tokens, [[4, 5]]);
  await assert.rejects(Generator.create({ decoder: path.join(MODELS, 'missing.onnx') }), /missing\.onnx/);
  await assert.rejects(Generator.create({ decoder: affine() }), (e) => typeof e.code === 'string');
});

test('sessions the garbage collector frees are released off the JS thread', async () => {
  // The addon's count of sessions alive (a test hook, not the API).
  const native = require(path.join(path.dirname(require.resolve('wgnn')), 'prebuilt', 'linux-x64', 'wgnn.node'));
  const before = native.liveSessions();
  for (let i = 0; i < 20; ++i) await InferenceSession.create(affine()); // dropped at once
  assert.ok(native.liveSessions() <= before + 20); // some may be collected already
  for (let i = 0; i < 3; ++i) {
    if (globalThis.Bun) {
      globalThis.Bun.gc(true);
    } else {
      v8.setFlagsFromString('--expose-gc');
      vm.runInNewContext('gc')();
    }
    await new Promise((resolve) => setTimeout(resolve, 10)); // the finalizers run
  }
  const s = await InferenceSession.create(affine()); // its job frees the collected ones first
  assert.ok(native.liveSessions() <= before + 1 + 10,
            `${native.liveSessions() - before - 1} of 20 dropped sessions are still alive after collection`);
  const { y } = await s.run({ x: new Tensor('float32', Float32Array.from([1, 1, 1, 1]), [1, 4]) });
  assert.deepEqual(Array.from(y.data), [3, 0, 1.5, 4]);
});
