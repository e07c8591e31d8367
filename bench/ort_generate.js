// Greedy generation with ONNX Runtime (onnxruntime-node) over a folder made
// by scripts/models/decoders.py (Optimum's layout) or by onnxruntime-genai's
// model builder (model.onnx and genai_config.json): the same loop as wgnn's
// generate/generate.h. The CPU provider is the reference of
// tests/generate/generate_vs_ort.py; the WebGPU provider is the peer of
// bench/run_generate.sh. Prints one JSON line: the new tokens, the prompt
// step's time and each later step's, host to host.
//
//   node ort_generate.js DIR --prompt 1,2,3 [--new N] [--ep cpu|webgpu] [--repeat N]
//
// Each step's present outputs are the next step's past inputs; with
// --ep webgpu they are kept on the GPU (preferredOutputLocation
// 'gpu-buffer'), only the logits come back. --repeat runs the whole loop
// again (the timings are the last run's).
const fs = require('fs');
const path = require('path');
const ort = require(process.env.WGNN_ORT_MODULE || 'onnxruntime-node');

function usage(msg) {
  console.error('ort_generate: ' + msg);
  console.error('usage: node ort_generate.js DIR --prompt IDS [--new N] [--ep cpu|webgpu] [--repeat N]');
  process.exit(2);
}

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(file + ': not a .npy file');
  const v1 = buf[6] === 1;
  const hlen = v1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = v1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const types = { '<f4': ['float32', Float32Array], '<i8': ['int64', BigInt64Array] };
  if (!types[descr]) throw new Error(`${file}: dtype ${descr} is not supported here`);
  const [type, Arr] = types[descr];
  const body = buf.subarray(start + hlen);
  return new ort.Tensor(type, new Arr(body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength)), dims);
}

function argmaxLast(logits) {
  const [b, t, v] = logits.dims;
  const data = logits.data;
  let best = -Infinity, idx = 0;
  for (let i = 0, o = (t - 1) * v; i < v; i++) {
    if (data[o + i] > best) { best = data[o + i]; idx = i; }
  }
  return idx;
}

async function main() {
  const argv = process.argv.slice(2);
  const a = { dir: null, prompt: null, n: 64, ep: 'cpu', repeat: 1 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--prompt') a.prompt = argv[++i].split(',').map(Number);
    else if (k === '--new') a.n = Number(argv[++i]);
    else if (k === '--ep') a.ep = argv[++i];
    else if (k === '--repeat') a.repeat = Number(argv[++i]);
    else if (k.startsWith('--')) usage('unknown option ' + k);
    else if (!a.dir) a.dir = k;
    else usage('unexpected argument ' + k);
  }
  if (!a.dir || !a.prompt || a.prompt.some(x => !Number.isInteger(x))) usage('a folder and --prompt are needed');
  if (a.ep !== 'cpu' && a.ep !== 'webgpu') usage('--ep: cpu or webgpu');
  const file = f => path.join(a.dir, f);
  const t0 = performance.now();
  // WebGPU: the cache kept on the GPU where this onnxruntime-node allows it
  // (preferredOutputLocation), else through host memory (said in the JSON).
  let gpuCache = a.ep === 'webgpu';
  async function open(name) {
    if (!fs.existsSync(file(name))) return null;
    const probe = await ort.InferenceSession.create(file(name), { executionProviders: ['cpu'] });
    const opts = { executionProviders: [a.ep], graphOptimizationLevel: 'all' };
    if (gpuCache) {
      // The cache stays on the GPU; the logits come back.
      const loc = {};
      for (const o of probe.outputNames) loc[o] = o.startsWith('present') ? 'gpu-buffer' : 'cpu';
      opts.preferredOutputLocation = loc;
    }
    if (a.ep === 'cpu') return probe;
    return ort.InferenceSession.create(file(name), opts);
  }
  let dec, first, enc, loadMs, fallback = '';
  async function openAll() {
    // Optimum's decoder, or the one model of onnxruntime-genai's builder.
    dec = (await open('decoder_with_past_model.onnx')) || (await open('model.onnx'));
    first = await open('decoder_model.onnx');
    enc = await open('encoder_model.onnx');
    if (!dec) usage(a.dir + ': no decoder_with_past_model.onnx or model.onnx');
    loadMs = performance.now() - t0;
  }
  try {
    await openAll();
  } catch (e) {
    if (!gpuCache) throw e;
    fallback = String(e && e.message || e).split('\n')[0];
    gpuCache = false;
    await openAll();
  }
  // The builder leaves the cache's head size symbolic (kv_cache_dim); its
  // genai_config.json gives it.
  let headSize = 0;
  if (fs.existsSync(file('genai_config.json'))) {
    headSize = JSON.parse(fs.readFileSync(file('genai_config.json'), 'utf8')).model.decoder.head_size || 0;
  }
  const decMeta = {};
  for (const s of [dec, first]) {
    if (!s) continue;
    for (const m of s.inputMetadata || []) decMeta[m.name] = m;
  }

  let result = null;
  for (let r = 0; r < a.repeat; r++) {
   try {
    const tr = performance.now();
    let states = null;
    if (enc) {
      const x = readNpy(file('encoder_input.npy'));
      states = (await enc.run({ [enc.inputNames[0]]: x }))[enc.outputNames[0]];
    }
    const cache = {};
    let pastLen = 0;
    const tokens = [];
    const steps = [];
    async function step(s, ids, promptStep) {
      const t = ids.length;
      const f = {};
      for (const nm of s.inputNames) {
        if (nm === 'input_ids' || nm === 'decoder_input_ids') {
          f[nm] = new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, t]);
        } else if (nm === 'attention_mask' || nm === 'decoder_attention_mask') {
          f[nm] = new ort.Tensor('int64', new BigInt64Array(pastLen + t).fill(1n), [1, pastLen + t]);
        } else if (nm === 'position_ids') {
          f[nm] = new ort.Tensor('int64', BigInt64Array.from(ids.map((_, j) => BigInt(pastLen + j))), [1, t]);
        } else if (nm === 'encoder_hidden_states') {
          f[nm] = states;
        } else if (nm.startsWith('past')) {
          if (promptStep) {
            const m = decMeta[nm];
            const shape = m && m.shape
              ? m.shape.map((d, k) => (k === 0 ? 1 : typeof d === 'number' ? d : k === 3 && headSize ? headSize : 0))
              : null;
            if (!shape) throw new Error(`input ${nm}: its shape is not known (onnxruntime-node lacks inputMetadata)`);
            f[nm] = new ort.Tensor('float32', new Float32Array(0), shape);
          } else {
            f[nm] = cache[nm];
          }
        } else {
          throw new Error(`input ${nm}: no role in generation`);
        }
      }
      const out = await s.run(f);
      for (const [k, v] of Object.entries(out)) {
        if (k.startsWith('present')) {
          const name = 'past_key_values' + k.slice('present'.length);
          if (cache[name] && cache[name] !== v && cache[name].dispose && a.ep === 'webgpu') cache[name].dispose();
          cache[name] = v;
        }
      }
      pastLen += t;
      return argmaxLast(out.logits);
    }
    const tp = performance.now();
    let tok = await step(first || dec, a.prompt, true);
    tokens.push(tok);
    const promptMs = performance.now() - tp;
    for (let i = 1; i < a.n; i++) {
      const ts = performance.now();
      tok = await step(dec, [tok], false);
      tokens.push(tok);
      steps.push(performance.now() - ts);
    }
    const sorted = [...steps].sort((x, y) => x - y);
    const decode = steps.reduce((x, y) => x + y, 0);
    result = { tool: `ORT ${a.ep}`, tokens, load_ms: loadMs, total_ms: performance.now() - tr, prompt_ms: promptMs,
               steps: steps.length, median_step_ms: sorted.length ? sorted[Math.floor(sorted.length / 2)] : 0,
               ms_per_token: steps.length ? decode / steps.length : 0, cache_on_gpu: gpuCache };
    if (fallback) result.cache_on_gpu_refused = fallback;
   } catch (e) {
    // A run that fails with the cache on the GPU is run again through host memory.
    if (!gpuCache) throw e;
    fallback = String(e && e.message || e).split('\n')[0];
    gpuCache = false;
    await openAll();
    r -= 1;
   }
  }
  console.log(JSON.stringify(result));
}

main().catch(e => { console.error('ort_generate: ' + (e && e.stack || e)); process.exit(1); });
