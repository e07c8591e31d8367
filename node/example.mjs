// wgnn from JavaScript (Node.js or Bun): a model run on the GPU, then a
// photo cut out.
//
//   node example.mjs MODEL.onnx [PHOTO ISNET.onnx OUT.png [SIZE]]
//
// MODEL.onnx has one float input of shape [N, 4] (as docs/INSTALL.md's C
// and C++ examples); it is fed [[1, 2, 3, 4]] and its first output printed.
// With a photo, ISNet (isnet_any_size.onnx) cuts it out into OUT.png (RGBA,
// the matte as alpha), at SIZE x SIZE (default: the model's own).
import { writeFile } from 'node:fs/promises';
import { InferenceSession, Tensor, removeBackground, version } from 'wgnn';

const [modelPath, photo, isnet, out, size] = process.argv.slice(2);
if (!modelPath) {
  console.error('usage: example.mjs MODEL.onnx [PHOTO ISNET.onnx OUT.png [SIZE]]');
  process.exit(2);
}

const session = await InferenceSession.create(modelPath);           // the GPU, or lavapipe
const x = new Tensor('float32', Float32Array.from([1, 2, 3, 4]), [1, 4]);
const outputs = await session.run({ [session.inputNames[0]]: x });  // name -> Tensor
const y = outputs[session.outputNames[0]];
console.log(`wgnn ${version}: ${session.inputNames[0]} -> ${session.outputNames[0]} [${y.dims}]`);
console.log(`y = ${Array.from(y.data).join(' ')}`);
await session.release();

if (photo) {
  const png = await removeBackground(photo, { model: isnet, size: size ? Number(size) : undefined });
  await writeFile(out, png);                                         // RGBA: the matte is the alpha
  console.log(`cut-out: ${out} (${png.length} bytes)`);
}
