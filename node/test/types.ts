// index.d.ts checked by the TypeScript compiler (tsc --noEmit --strict, in
// tests/tools/node_package_test.py): the calls docs/NODE.md shows type-check,
// and wrong ones do not (@ts-expect-error fails the check if they would).
import { InferenceSession, Tensor, removeBackground, Generator, generate, getDeviceInfo, version } from 'wgnn';
import type { WgnnError, ValueMetadata } from 'wgnn';

export async function uses(): Promise<void> {
  const s = await InferenceSession.create('model.onnx', { fp16: true, adapter: 'lavapipe' });
  const fromBytes = await InferenceSession.create(new Uint8Array(4));
  const x = new Tensor('float32', Float32Array.from([1, 2, 3, 4]), [1, 4]);
  const ids = new Tensor('int64', [1n, 2n], [1, 2]);
  const f: Float32Array = x.data;
  const i: BigInt64Array = ids.data;
  const out = await s.run({ [s.inputNames[0]]: x, ids }, ['y']);
  const y: Tensor = out.y;
  const meta: readonly ValueMetadata[] = fromBytes.inputMetadata;
  await s.run({ x }, { y: null });
  await s.release();
  const png: Uint8Array = await removeBackground('photo.jpg', { model: 'isnet.onnx', size: 320 });
  const g = await Generator.create({ decoder: 'decoder_with_past_model.onnx' });
  const r = await g.generate([5, 17, 42], { maxNewTokens: 8, eos: [2] });
  const tokens: number[][] = r.tokens;
  await g.release();
  await generate('decoder.onnx', [[1, 2]], { maxNewTokens: 4, fp16: false });
  const info: Record<string, unknown> = await getDeviceInfo('auto');
  const v: string = version;
  try {
    // @ts-expect-error: a Float32Array is not int32 data
    new Tensor('int32', new Float32Array(2));
    // @ts-expect-error: string tensors are not supported
    new Tensor('string', ['a']);
    // @ts-expect-error: feeds are Tensors
    await s.run({ x: [1, 2, 3, 4] });
  } catch (e) {
    const code: string | undefined = (e as WgnnError).code;
    console.log(code);
  }
  console.log(f, i, y, meta, png, tokens, info, v);
}
