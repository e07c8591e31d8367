// Types of the wgnn package (index.js; docs/NODE.md).

/** onnxruntime-node's names of the element types wgnn runs. */
export type TensorType = 'float32' | 'float16' | 'int32' | 'int64' | 'uint8' | 'int8' | 'bool';

export interface TensorDataMap {
  float32: Float32Array;
  float16: Uint16Array;
  int32: Int32Array;
  int64: BigInt64Array;
  uint8: Uint8Array;
  int8: Int8Array;
  bool: Uint8Array;
}
export type TensorData = TensorDataMap[TensorType];

export declare class Tensor<T extends TensorType = TensorType> {
  /** A tensor of `type`; data a typed array (a plain array is converted); dims default to [data.length]. */
  constructor(type: T, data: TensorDataMap[T] | readonly number[] | readonly bigint[] | readonly boolean[],
              dims?: readonly number[]);
  /** The type is taken from the typed array (a Uint16Array is float16, a Uint8Array uint8). */
  constructor(data: TensorData, dims?: readonly number[]);
  readonly type: T;
  readonly data: TensorDataMap[T];
  readonly dims: readonly number[];
  /** The number of elements. */
  readonly size: number;
  readonly location: 'cpu';
  readonly cpuData: TensorDataMap[T];
  getData(): Promise<TensorDataMap[T]>;
  reshape(dims: readonly number[]): Tensor<T>;
  dispose(): void;
}

export interface SessionOptions {
  /** float16 execution (needs shader-f16 on the adapter). Default false. */
  fp16?: boolean;
  /** 'auto' (the GPU, else the bundled lavapipe), 'gpu' or 'lavapipe'. Default: $WGNN_ADAPTER, else 'auto'. */
  adapter?: 'auto' | 'gpu' | 'lavapipe' | string;
  /** Where a model given as bytes finds its external data files. Default: the current folder. */
  externalDataDir?: string;
  /** Accepted for onnxruntime-node's code and ignored: wgnn has one provider, WebGPU. */
  executionProviders?: unknown[];
}

export interface ValueMetadata {
  name: string;
  isTensor: true;
  type: TensorType;
  /** A number per dimension; a dynamic one is its symbolic name, or -1. */
  shape: Array<number | string>;
}

export type FeedsType = Record<string, Tensor>;
export type FetchesType = readonly string[] | Record<string, null | Tensor>;
export type ReturnType = Record<string, Tensor>;

export declare class InferenceSession {
  static create(model: string | Uint8Array | ArrayBuffer, options?: SessionOptions): Promise<InferenceSession>;
  static create(buffer: ArrayBuffer, byteOffset: number, byteLength?: number,
                options?: SessionOptions): Promise<InferenceSession>;
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly inputMetadata: readonly ValueMetadata[];
  readonly outputMetadata: readonly ValueMetadata[];
  /** Runs the model off the JS thread; resolves to the outputs asked for (default: all). */
  run(feeds: FeedsType, fetches?: FetchesType, options?: object): Promise<ReturnType>;
  run(feeds: FeedsType, options?: object): Promise<ReturnType>;
  /** Frees the session's GPU memory now. */
  release(): Promise<void>;
}

export interface RemoveBackgroundOptions {
  /** The matting model (ISNet, MODNet); default isnet_any_size.onnx from modelFolders(). */
  model?: string;
  /** The model's input size (ISNet: N x N); 0 or unset: the model's own. */
  size?: number;
  adapter?: 'auto' | 'gpu' | 'lavapipe' | string;
  /** The matte made hard, as rembg's post_process_mask. Default false. */
  postProcess?: boolean;
}

/** Cuts out a photo (a path, or PNG/JPEG/WebP/TIFF bytes): an RGBA PNG with the matte as alpha (a Node.js Buffer). */
export declare function removeBackground(image: string | Uint8Array | ArrayBuffer,
                                         options?: RemoveBackgroundOptions): Promise<Uint8Array>;
/** What `wgnn info --json` prints for the device of this adapter choice. */
export declare function getDeviceInfo(adapter?: string): Promise<Record<string, unknown>>;
/** Where removeBackground() looks for its model, in order. */
export declare function modelFolders(): string[];
/** The library's version. */
export declare const version: string;

/** Errors are Error objects with wgnn's message and a code: 'WGNN_ERROR_MODEL', 'WGNN_ERROR_UNSUPPORTED', ... */
export interface WgnnError extends Error {
  code?: string;
}

export interface GeneratorModels {
  /** The decoder run every step after the prompt (with past_key_values inputs). */
  decoder: string;
  /** Optional: the prompt step's model (no past inputs). */
  first?: string;
  /** Optional: an encoder, run once; its first output is encoder_hidden_states. */
  encoder?: string;
}

export interface GenerateOptions {
  /** Default 64. */
  maxNewTokens?: number;
  /** A sequence ends after one of these (kept in its tokens). */
  eos?: number | number[];
  /** <= 0 (default): greedy; else sampling at this temperature after topK / topP. */
  temperature?: number;
  topK?: number;
  topP?: number;
  seed?: number;
  /** Tokens read back every this many steps (0: at the end, or every 8 with eos). */
  syncEvery?: number;
  /** The encoder's input (required with an encoder). */
  encoderInput?: Tensor;
}

export interface GenerateResult {
  /** The new tokens of each sequence (not the prompt), up to and including an end token. */
  tokens: number[][];
  encoderMs: number;
  promptMs: number;
  decodeMs: number;
  totalMs: number;
  stepMs: number[];
}

/** A decoder run token by token, the key/value cache and the sampling on the GPU. */
export declare class Generator {
  static create(models: GeneratorModels | string, options?: SessionOptions): Promise<Generator>;
  /** prompt: token ids (one sequence) or rows of them, all the same length. */
  generate(prompt: number[] | number[][], options?: GenerateOptions): Promise<GenerateResult>;
  release(): Promise<void>;
}

/** Generator.create, one generate, release. */
export declare function generate(models: GeneratorModels | string, prompt: number[] | number[][],
                                 options?: GenerateOptions & SessionOptions): Promise<GenerateResult>;
