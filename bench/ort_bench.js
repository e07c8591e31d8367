// Times an ONNX model with ONNX Runtime (onnxruntime-node) the way `wgnn
// bench` times wgnn: load, first run, then the median and minimum of the
// steady runs, host to host (inputs from host memory, outputs back in host
// memory). Prints one JSON line.
//
//   node ort_bench.js MODEL [--ep webgpu|cpu] [--runs N] [--warmup N]
//                     [--input NAME=FILE.npy]... [--shape NAME=1x3x224x224]... [--seed N]
//
// Inputs not given get seeded random data of the declared shape (floats
// uniform in [-1, 1), float16 ones as IEEE half bits, integers 0..3); --shape
// sets dynamic dims. A float16 model (float16 inputs, e.g. export.py --half)
// takes '<f2' .npy files, or the random float16 data.
// bench/make_ort_peer.sh packs this file as bench.js beside onnxruntime-node
// and a node binary.
const fs = require('fs');
const path = require('path');
const ort = require(process.env.WGNN_ORT_MODULE || 'onnxruntime-node');

function usage(msg) {
  console.error('ort_bench: ' + msg);
  console.error('usage: node ort_bench.js MODEL [--ep webgpu|cpu] [--runs N] [--warmup N] ' +
                '[--input NAME=FILE.npy]... [--shape NAME=DIMS]... [--seed N]');
  process.exit(2);
}

function parseArgs(argv) {
  const a = { model: null, ep: 'webgpu', runs: 20, warmup: 3, inputs: {}, shapes: {}, seed: 0 };
  const pair = (flag, v) => {
    const i = v === undefined ? -1 : v.indexOf('=');
    if (i <= 0) usage(`${flag} ${v}: expected NAME=VALUE`);
    return [v.slice(0, i), v.slice(i + 1)];
  };
  const count = (flag, v, min) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) usage(`${flag} ${v}: expected an integer >= ${min}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--ep') a.ep = argv[++i];
    else if (k === '--runs') a.runs = count(k, argv[++i], 1);
    else if (k === '--warmup') a.warmup = count(k, argv[++i], 0);
    else if (k === '--seed') a.seed = count(k, argv[++i], 0);
    else if (k === '--input') { const [n, f] = pair(k, argv[++i]); a.inputs[n] = f; }
    else if (k === '--shape') {
      const [n, s] = pair(k, argv[++i]);
      const dims = s.split('x').map(Number);
      if (dims.some(d => !Number.isInteger(d) || d < 0)) usage(`--shape ${n}=${s}: expected dims like 1x3x224x224`);
      a.shapes[n] = dims;
    } else if (k.startsWith('--')) usage('unknown option ' + k);
    else if (!a.model) a.model = k;
    else usage('unexpected argument ' + k);
  }
  if (!a.model) usage('no model given');
  if (a.ep !== 'webgpu' && a.ep !== 'cpu') usage(`--ep ${a.ep}: expected webgpu or cpu`);
  return a;
}

const NPY = {
  '<f4': ['float32', Float32Array], '<f2': ['float16', Uint16Array], '<i4': ['int32', Int32Array],
  '<i8': ['int64', BigInt64Array], '|u1': ['uint8', Uint8Array], '|b1': ['bool', Uint8Array],
  '|i1': ['int8', Int8Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(file + ': not a .npy file');
  const v1 = buf[6] === 1;
  const hlen = v1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = v1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(file + ': Fortran order is not supported');
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  if (!NPY[descr]) throw new Error(`${file}: dtype ${descr} is not supported`);
  const [type, Arr] = NPY[descr];
  const body = buf.subarray(start + hlen);
  const data = new Arr(body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength));
  return new ort.Tensor(type, data, dims);
}

// Seeded uniform numbers in [0, 1) (mulberry32).
function generator(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6D2B79F5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// The IEEE binary16 bits of a number, rounded to nearest even (onnxruntime-node
// takes float16 data as a Uint16Array of such bits).
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function halfBits(v) {
  f32[0] = v;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);  // inf, NaN
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;  // beyond 65504 after rounding: inf
  let h, rem, halfway;
  if (e <= 0) {  // a subnormal half, or zero
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    h = mant >>> shift;
    rem = mant & ((1 << shift) - 1);
    halfway = 1 << (shift - 1);
  } else {
    h = (e << 10) | (mant >>> 13);
    rem = mant & 0x1fff;
    halfway = 0x1000;
  }
  if (rem > halfway || (rem === halfway && (h & 1))) h++;  // a carry moves into the exponent, as it should
  return sign | h;
}

function randomTensor(name, type, dims, rnd) {
  const n = dims.reduce((x, y) => x * y, 1);
  const fill = (arr, f) => { for (let i = 0; i < n; i++) arr[i] = f(); return new ort.Tensor(type, arr, dims); };
  switch (type) {
    case 'float32': return fill(new Float32Array(n), () => rnd() * 2 - 1);
    case 'float16': return fill(new Uint16Array(n), () => halfBits(rnd() * 2 - 1));
    case 'int64': return fill(new BigInt64Array(n), () => BigInt(Math.floor(rnd() * 4)));
    case 'int32': return fill(new Int32Array(n), () => Math.floor(rnd() * 4));
    case 'bool': return fill(new Uint8Array(n), () => (rnd() < 0.5 ? 0 : 1));
    default: throw new Error(`input '${name}' is ${type}: no random filler; pass --input ${name}=FILE.npy`);
  }
}

const msSince = t0 => Number(process.hrtime.bigint() - t0) / 1e6;

(async () => {
  const a = parseArgs(process.argv.slice(2));
  const version = require(path.join(path.dirname(require.resolve(process.env.WGNN_ORT_MODULE || 'onnxruntime-node')),
                                    '..', 'package.json')).version;
  let t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(a.model, { executionProviders: [a.ep],
                                                               graphOptimizationLevel: 'all' });
  const loadMs = msSince(t0);
  const rnd = generator(a.seed);
  const feeds = {};
  const meta = session.inputMetadata || [];
  for (const name of Object.keys(a.inputs).concat(Object.keys(a.shapes))) {
    if (!session.inputNames.includes(name)) throw new Error(`the model has no input '${name}' (its inputs: ${session.inputNames.join(', ')})`);
  }
  session.inputNames.forEach((name, i) => {
    if (a.inputs[name]) { feeds[name] = readNpy(a.inputs[name]); return; }
    const m = meta[i] || {};
    const dims = a.shapes[name] || (m.shape || []).map(d => {
      if (typeof d !== 'number' || d < 0) throw new Error(`input '${name}' has a dynamic dim; pass --shape ${name}=DIMS`);
      return d;
    });
    feeds[name] = randomTensor(name, m.type || 'float32', dims, rnd);
  });
  t0 = process.hrtime.bigint();
  await session.run(feeds);
  const firstMs = msSince(t0);
  for (let i = 0; i < a.warmup; i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < a.runs; i++) {
    t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(msSince(t0));
  }
  times.sort((x, y) => x - y);
  const n = times.length;
  const median = n % 2 ? times[(n - 1) / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  console.log(JSON.stringify({
    model: path.basename(a.model), ep: a.ep, ort_version: version, runs: a.runs, warmup: a.warmup,
    load_ms: loadMs, first_run_ms: firstMs, median_ms: median, min_ms: times[0], max_ms: times[n - 1],
  }));
  if (session.release) await session.release();
})().catch(e => { console.error('ort_bench: error: ' + e.message); process.exit(1); });
