// Runs an ONNX model with ONNX Runtime's CPU provider (onnxruntime-node) on
// .npy inputs and writes every output as OUTDIR/<name>.npy: the independent
// reference that tests/onnx/models_vs_ort.py compares wgnn with.
//   node ort_reference.js MODEL OUTDIR [NAME=FILE.npy]...
// WGNN_ORT_OPTIMIZATION (disabled, basic, extended, all; default ONNX
// Runtime's, all) sets the graph optimization level: ONNX Runtime's
// extended rewrites of QDQ models change some products' results
// (tests/onnx/quantized_vs_ort.py).
const path = require('path');
const fs = require('fs');
const ort = require(process.env.WGNN_ORT_MODULE || 'onnxruntime-node');

const DESCR = {
  '<f4': ['float32', Float32Array], '<f2': ['float16', Uint16Array], '<i4': ['int32', Int32Array],
  '<i8': ['int64', BigInt64Array], '|u1': ['uint8', Uint8Array], '|b1': ['bool', Uint8Array],
  '|i1': ['int8', Int8Array],
};
const TO_DESCR = Object.fromEntries(Object.entries(DESCR).map(([k, [t]]) => [t, k]));

function load(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(file + ': not a .npy file');
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const [type, Arr] = DESCR[descr] || (() => { throw new Error(file + ': dtype ' + descr); })();
  const body = buf.subarray(start + hlen);
  const data = new Arr(body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength));
  return new ort.Tensor(type, type === 'bool' ? Uint8Array.from(data) : data, dims);
}

function save(file, t) {
  const shape = t.dims.length === 1 ? `${t.dims[0]},` : t.dims.join(', ');
  let header = `{'descr': '${TO_DESCR[t.type]}', 'fortran_order': False, 'shape': (${shape}), }`;
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre.writeUInt16LE(header.length, 8);
  const d = t.data;
  const bytes = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), bytes]));
}

(async () => {
  const [model, outdir, ...specs] = process.argv.slice(2);
  const feeds = {};
  for (const s of specs) {
    const i = s.indexOf('=');
    feeds[s.slice(0, i)] = load(s.slice(i + 1));
  }
  const options = { executionProviders: ['cpu'] };
  if (process.env.WGNN_ORT_OPTIMIZATION) options.graphOptimizationLevel = process.env.WGNN_ORT_OPTIMIZATION;
  const session = await ort.InferenceSession.create(model, options);
  const out = await session.run(feeds);
  fs.mkdirSync(outdir, { recursive: true });
  for (const name of session.outputNames) {
    save(path.join(outdir, name.replace(/[^A-Za-z0-9_.-]/g, '_') + '.npy'), out[name]);
  }
})().catch(e => { console.error('ort_reference: ' + e.message); process.exit(1); });
