'use strict';
// wgnn for Node.js and Bun: ONNX models on the GPU through WebGPU, with
// onnxruntime-node's shape of API (InferenceSession, Tensor), and background
// removal. The native addon (prebuilt/<platform>-<arch>/wgnn.node) does the
// work off the JS thread; this file checks arguments and makes tensors.
// docs/NODE.md describes the API.
const path = require('path');

const PLATFORM = `${process.platform}-${process.arch}`;
const PREBUILT = path.join(__dirname, 'prebuilt', PLATFORM);

function loadAddon() {
  if (PLATFORM !== 'linux-x64') {
    throw new Error(`wgnn: no prebuilt binary for ${PLATFORM}; the package carries linux-x64 only`);
  }
  try {
    return require(path.join(PREBUILT, 'wgnn.node'));
  } catch (e) {
    const err = new Error(`wgnn: could not load ${path.join(PREBUILT, 'wgnn.node')}: ${e.message}`);
    err.cause = e;
    throw err;
  }
}
const native = loadAddon();

// onnxruntime-node's tensor types and the typed arrays that hold them.
const TYPES = {
  float32: Float32Array,
  float16: Uint16Array, // IEEE half bits, as onnxruntime-node keeps them
  int32: Int32Array,
  int64: BigInt64Array,
  uint8: Uint8Array,
  int8: Int8Array,
  bool: Uint8Array, // 0 or 1
};
const TYPE_LIST = Object.keys(TYPES).join(', ');

function typeOfArray(data) {
  if (data instanceof Float32Array) return 'float32';
  if (data instanceof Int32Array) return 'int32';
  if (data instanceof BigInt64Array) return 'int64';
  if (data instanceof Uint8Array) return 'uint8';
  if (data instanceof Int8Array) return 'int8';
  if (data instanceof Uint16Array) return 'float16';
  if (typeof Float16Array !== 'undefined' && data instanceof Float16Array) return 'float16';
  return undefined;
}

function checkDims(dims, what) {
  if (!Array.isArray(dims) && !ArrayBuffer.isView(dims)) throw new TypeError(`${what}: dims must be an array`);
  const out = Array.from(dims, Number);
  for (const d of out) {
    if (!Number.isInteger(d) || d < 0) throw new RangeError(`${what}: dims must be integers >= 0, got [${out}]`);
  }
  return out;
}

class Tensor {
  // new Tensor(type, data, dims?) or new Tensor(data, dims?): data is the
  // type's typed array (or a plain array, converted); dims default to
  // [data.length].
  constructor(a, b, c) {
    let type, data, dims;
    if (typeof a === 'string') {
      [type, data, dims] = [a, b, c];
    } else {
      [data, dims] = [a, b];
      type = typeOfArray(data);
      if (type === undefined) {
        throw new TypeError(`Tensor: give the type first for this data (${TYPE_LIST})`);
      }
    }
    const Arr = TYPES[type];
    if (Arr === undefined) throw new TypeError(`Tensor: type '${type}' is not supported; wgnn takes ${TYPE_LIST}`);
    if (Array.isArray(data)) {
      if (type === 'int64') data = BigInt64Array.from(data, (v) => BigInt(v));
      else if (type === 'bool') data = Uint8Array.from(data, (v) => (v ? 1 : 0));
      else if (type === 'float16') throw new TypeError('Tensor: float16 data is a Uint16Array of half bits');
      else data = Arr.from(data);
    } else if (typeof Float16Array !== 'undefined' && type === 'float16' && data instanceof Float16Array) {
      data = new Uint16Array(data.buffer, data.byteOffset, data.length);
    } else if (!(data instanceof Arr)) {
      const got = data && data.constructor ? data.constructor.name : typeof data;
      throw new TypeError(`Tensor: a ${type} tensor's data is a ${Arr.name}, not ${got}`);
    }
    dims = dims === undefined ? [data.length] : checkDims(dims, 'Tensor');
    const size = dims.reduce((x, y) => x * y, 1);
    if (size !== data.length) {
      throw new RangeError(`Tensor: dims [${dims}] hold ${size} elements but the data has ${data.length}`);
    }
    this.type = type;
    this.data = data;
    this.dims = Object.freeze(dims);
    this.size = size;
    this.location = 'cpu';
  }
  get cpuData() { return this.data; }
  async getData() { return this.data; }
  reshape(dims) { return new Tensor(this.type, this.data, dims); }
  dispose() {}
}

function sessionOptions(options) {
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object') throw new TypeError('InferenceSession.create: options must be an object');
  const adapter = options.adapter === undefined ? '' : options.adapter;
  if (typeof adapter !== 'string') throw new TypeError("options.adapter is 'auto', 'gpu' or 'lavapipe'");
  return { adapter, fp16: Boolean(options.fp16), externalDataDir: options.externalDataDir || '' };
}

function tensorFromNative(o) {
  const Arr = TYPES[o.type];
  return new Tensor(o.type, new Arr(o.data), o.dims);
}

class InferenceSession {
  constructor(handle, info) {
    this._handle = handle;
    this.inputMetadata = info.inputs.map(metadata);
    this.outputMetadata = info.outputs.map(metadata);
    this.inputNames = this.inputMetadata.map((m) => m.name);
    this.outputNames = this.outputMetadata.map((m) => m.name);
  }

  // InferenceSession.create(path | Uint8Array | ArrayBuffer, options?) or
  // (ArrayBuffer, byteOffset, byteLength?, options?), as onnxruntime-node.
  // options: { fp16, adapter ('auto' | 'gpu' | 'lavapipe'), externalDataDir }.
  static async create(source, a, b, c) {
    let options = a;
    if (source instanceof ArrayBuffer && typeof a === 'number') {
      const length = typeof b === 'number' ? b : source.byteLength - a;
      source = new Uint8Array(source, a, length);
      options = typeof b === 'number' ? c : b;
    } else if (source instanceof ArrayBuffer) {
      source = new Uint8Array(source);
    }
    if (typeof source !== 'string' && !ArrayBuffer.isView(source)) {
      throw new TypeError('InferenceSession.create: give a model path, a Uint8Array or an ArrayBuffer');
    }
    const info = await native.createSession(source, sessionOptions(options));
    return new InferenceSession(info.handle, info);
  }

  // run(feeds, fetches?, options?): feeds is { inputName: Tensor }; fetches
  // an array of output names or an object keyed by them (default: all).
  // Resolves to { outputName: Tensor }.
  async run(feeds, fetches, options) {
    if (this._handle === null) throw new Error('InferenceSession.run: the session was released');
    if (feeds === null || typeof feeds !== 'object') throw new TypeError('run: feeds is { inputName: Tensor }');
    if (fetches !== undefined && fetches !== null && !Array.isArray(fetches) && options === undefined) {
      // run(feeds, options) or run(feeds, { name: null }): an object of output names
      const keys = Object.keys(fetches);
      const known = keys.length > 0 && keys.every((k) => this.outputNames.includes(k));
      if (!known) fetches = undefined;
    }
    const list = [];
    for (const [name, t] of Object.entries(feeds)) {
      if (!(t instanceof Tensor)) {
        if (t && typeof t === 'object' && typeof t.type === 'string' && t.data && t.dims) {
          list.push({ name, type: t.type, dims: checkDims(t.dims, `input '${name}'`), data: t.data });
          continue;
        }
        throw new TypeError(`run: input '${name}' is not a Tensor`);
      }
      list.push({ name, type: t.type, dims: Array.from(t.dims), data: t.data });
    }
    let names = [];
    if (Array.isArray(fetches)) names = fetches.map(String);
    else if (fetches && typeof fetches === 'object') names = Object.keys(fetches);
    const outs = await native.run(this._handle, list, names);
    const result = {};
    for (const o of outs) result[o.name] = tensorFromNative(o);
    return result;
  }

  // Frees the session's GPU memory now (otherwise when it is collected).
  async release() {
    if (this._handle === null) return;
    const h = this._handle;
    this._handle = null;
    await native.release(h);
  }
}

function metadata(v) {
  return { name: v.name, isTensor: true, type: v.type, shape: v.shape };
}


function generateOptions(o, what) {
  o = o || {};
  if (typeof o !== 'object') throw new TypeError(`${what}: options must be an object`);
  const out = {};
  for (const key of ['maxNewTokens', 'temperature', 'topK', 'topP', 'seed', 'syncEvery']) {
    if (o[key] === undefined) continue;
    if (typeof o[key] !== 'number' || !Number.isFinite(o[key])) throw new TypeError(`${what}: ${key} must be a number`);
    out[key] = o[key];
  }
  if (out.maxNewTokens !== undefined && !(Number.isInteger(out.maxNewTokens) && out.maxNewTokens >= 1)) {
    throw new RangeError(`${what}: maxNewTokens must be an integer >= 1`);
  }
  if (o.eos !== undefined) out.eos = (Array.isArray(o.eos) ? o.eos : [o.eos]).map(Number);
  return out;
}

function promptRows(prompt, what) {
  if (!Array.isArray(prompt) || prompt.length === 0) {
    throw new TypeError(`${what}: the prompt is an array of token ids, or of such arrays (one per sequence)`);
  }
  const rows = Array.isArray(prompt[0]) || ArrayBuffer.isView(prompt[0]) ? prompt : [prompt];
  return rows.map((r) => Array.from(r, (v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new RangeError(`${what}: token ids are integers >= 0`);
    return n;
  }));
}

// A decoder (and optionally its prompt-step and encoder models) run token by
// token with the key/value cache on the GPU (docs/GENERATION.md).
class Generator {
  constructor(handle) { this._handle = handle; }

  // models: { decoder, first?, encoder? } (paths); options: { fp16, adapter }.
  static async create(models, options) {
    if (typeof models === 'string') models = { decoder: models };
    if (!models || typeof models !== 'object' || typeof models.decoder !== 'string') {
      throw new TypeError('Generator.create: models is { decoder, first?, encoder? } (paths)');
    }
    const o = sessionOptions(options);
    const abs = (p) => (typeof p === 'string' ? path.resolve(p) : undefined);
    const handle = await native.createGenerator(
      { decoder: abs(models.decoder), first: abs(models.first), encoder: abs(models.encoder) }, o);
    return new Generator(handle);
  }

  // generate(prompt, { maxNewTokens, eos, temperature, topK, topP, seed,
  // encoderInput }): prompt is token ids (one sequence) or an array of such
  // rows, all the same length. Resolves to { tokens: [[id, ...] per
  // sequence], promptMs, decodeMs, totalMs, stepMs, encoderMs }.
  async generate(prompt, options) {
    if (this._handle === null) throw new Error('Generator.generate: the generator was released');
    const rows = promptRows(prompt, 'generate');
    const o = generateOptions(options, 'generate');
    let enc = null;
    const e = options && options.encoderInput;
    if (e !== undefined && e !== null) {
      if (!(e instanceof Tensor)) throw new TypeError('generate: encoderInput must be a Tensor');
      enc = { type: e.type, dims: Array.from(e.dims), data: e.data };
    }
    return native.generate(this._handle, rows, o, enc);
  }

  async release() {
    if (this._handle === null) return;
    const h = this._handle;
    this._handle = null;
    await native.releaseGenerator(h);
  }
}

// generate(models, prompt, options): Generator.create, one generate, release.
async function generate(models, prompt, options) {
  const g = await Generator.create(models, options);
  try {
    return await g.generate(prompt, options);
  } finally {
    await g.release();
  }
}

// Where removeBackground() looks for its model when none is given, in order:
// $WGNN_HOME/models, then $XDG_CACHE_HOME/wgnn/models (~/.cache/wgnn/models).
function modelFolders() {
  return native.modelFolders('');
}

function defaultModel() {
  const folders = modelFolders();
  const found = native.findModel(folders);
  if (!found) {
    const tried = folders.map((d) => `\n  ${path.join(d, native.defaultModel)}`).join('');
    const err = new Error(`removeBackground: no model given and ${native.defaultModel} is in none of these folders:` +
                          `${tried}\ngive { model: PATH }, or copy it into one of them (wgnn's scripts/setup derives it)`);
    err.code = 'WGNN_ERROR_MODEL';
    throw err;
  }
  return found;
}

// removeBackground(image, { model, size, adapter, postProcess }): image is a
// file path or the bytes of a PNG, JPEG, WebP or TIFF; resolves to a PNG
// (Buffer) of the photo with the matte as its alpha, as `wgnn remove-bg`.
async function removeBackground(image, options) {
  const o = options || {};
  if (typeof image !== 'string' && !ArrayBuffer.isView(image) && !(image instanceof ArrayBuffer)) {
    throw new TypeError('removeBackground: give a file path, a Buffer or a Uint8Array');
  }
  const model = o.model === undefined || o.model === null ? defaultModel() : path.resolve(String(o.model));
  const size = o.size === undefined ? 0 : o.size;
  return native.removeBackground(typeof image === 'string' ? path.resolve(image) : image, model, size,
                                 o.adapter || '', Boolean(o.postProcess));
}

// The device sessions with this adapter choice use: what `wgnn info --json`
// prints (adapter, backend, driver, features, limits).
async function getDeviceInfo(adapter) {
  return JSON.parse(await native.deviceInfo(adapter || ''));
}

module.exports = {
  InferenceSession,
  Tensor,
  removeBackground,
  Generator,
  generate,
  getDeviceInfo,
  modelFolders,
  version: native.version,
};
