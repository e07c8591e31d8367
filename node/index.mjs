// The ES module entry: the same objects as index.js (require('wgnn')).
import { createRequire } from 'module';

const wgnn = createRequire(import.meta.url)('./index.js');
export const { InferenceSession, Tensor, removeBackground, Generator, generate, getDeviceInfo, modelFolders, version } = wgnn;
export default wgnn;
