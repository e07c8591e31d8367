"""wgnn: ONNX models on the GPU through WebGPU, with ONNX Runtime's Python API.

    import wgnn as ort                      # instead of: import onnxruntime as ort
    sess = ort.InferenceSession("model.onnx")
    print(sess.get_inputs()[0].name, sess.get_inputs()[0].shape, sess.get_inputs()[0].type)
    y, = sess.run(None, {"x": x})           # numpy arrays in, numpy arrays out

Devices: sessions with the same adapter choice share one device (started on
first use). Calls that reach the device (creating a session, run, remove_bg,
get_device_info) release the GIL and take turns on it: a session may be used
from several threads, its runs then run one after another, as do the runs
of sessions on the same device (the C++ API's rule, docs/ERRORS.md, "Threads").
"""
import atexit
import json
import os
import queue
import sys
import threading

import numpy as np

from . import _wgnn
from ._wgnn import DeviceLost, Error, GpuError, HostOutOfMemory, Unsupported

__version__ = _wgnn.__version__
__all__ = [
    "InferenceSession", "SessionOptions", "NodeArg", "get_device_info", "get_available_providers", "supported_ops",
    "remove_bg", "list_adapters", "resolve_adapter", "Generator", "generate", "Error", "Unsupported", "GpuError", "DeviceLost", "HostOutOfMemory",
]

# The name wgnn gives its execution provider (get_providers()).
PROVIDER = "WgnnExecutionProvider"


def get_available_providers():
    return [PROVIDER]


class SessionOptions:
    """What a session is made with.

    fp16: float16 mode (float32 activations and weights stored as float16 on
        the GPU; needs shader-f16, an Error says so otherwise).
    adapter: "auto" (the machine's GPU, else the bundled lavapipe), "gpu" or
        "lavapipe"; or one adapter: an index in list_adapters(), a UUID
        ("GPU-..." as nvidia-smi -L writes it, or a prefix), "VVVV:DDDD"
        (vendor and device id in hex), "pci:ADDRESS" or a part of its name.
        None: the environment's WGNN_ADAPTER, else auto; without a named
        adapter an NVIDIA one is the one CUDA_VISIBLE_DEVICES names (as Ray
        hands an actor its GPU; docs/ADAPTERS.md).
    limits: "adapter" (the adapter's own) or "default" (WebGPU's default
        limits); None: WGNN_LIMITS, else adapter.
    verbose: after each run that built a graph (a new set of input shapes),
        print the session's summary to stderr, as `wgnn run --verbose` does
        (also log_severity_level = 0, as in ONNX Runtime).
    fusion, checked, max_plans, max_plan_sizes, size_classes, tiered, ir_import, outputs: SessionOptions
        of the C++ API (onnx/session.h); outputs (a list of names, None: all)
        limits what the session computes, as run(output_names) limits what a
        run returns. tiered (on): where the GPU has tensor cores, a
        float16 session's first runs use the regular kernels while the
        tensor-core ones compile, then switch (results within the float16
        tolerances); False gives the same bits from the first run.
    ONNX Runtime's other settings (graph_optimization_level,
    intra_op_num_threads, ...) may be set and have no effect.
    """

    def __init__(self):
        self.fp16 = False
        self.adapter = None
        self.limits = None
        self.verbose = False
        self.log_severity_level = 2
        self.fusion = True
        self.checked = True
        self.max_plans = 8
        self.max_plan_sizes = 64
        self.size_classes = True
        self.tiered = True
        self.ir_import = True
        self.outputs = None

    def _native(self):
        o = _wgnn._Options()
        o.adapter = self.adapter or ""
        o.limits = self.limits or ""
        o.fp16 = bool(self.fp16)
        o.verbose = bool(self.verbose) or self.log_severity_level == 0
        o.fusion = bool(self.fusion)
        o.checked = bool(self.checked)
        if self.max_plan_sizes is None or int(self.max_plan_sizes) < 1:
            raise ValueError(f"SessionOptions.max_plan_sizes is {self.max_plan_sizes}: keep at least 1 size")
        o.max_plans = int(self.max_plans)
        o.max_plan_sizes = int(self.max_plan_sizes)
        o.size_classes = bool(self.size_classes)
        o.tiered = bool(self.tiered)
        o.ir_import = bool(self.ir_import)
        if self.max_plans is None or int(self.max_plans) < 1:
            raise ValueError(f"SessionOptions.max_plans is {self.max_plans}: keep at least 1 plan")
        if self.outputs is not None:
            if isinstance(self.outputs, str) or not all(isinstance(n, str) for n in self.outputs):
                raise TypeError("SessionOptions.outputs: a list of output names, or None for all")
            o.outputs = list(self.outputs)
        return o


class NodeArg:
    """An input or output: name, shape (ints; a dynamic dim is its symbolic
    name, or None) and type (ONNX Runtime's strings: 'tensor(float)', ...)."""

    __slots__ = ("name", "shape", "type")

    def __init__(self, name, shape, type):  # noqa: A002
        self.name, self.shape, self.type = name, shape, type

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


def _check_providers(providers, provider_options=None):
    """Checks ONNX Runtime's providers argument; returns the device_id its
    options give (ONNX Runtime's name for the GPU's index), else None."""
    if providers is None:
        return None
    if isinstance(providers, str) or not hasattr(providers, "__iter__"):
        raise TypeError("providers: a list of provider names (or (name, options) pairs), as in ONNX Runtime")
    device_id = None
    providers = list(providers)
    for i, p in enumerate(providers):
        name = p[0] if isinstance(p, tuple) else p
        if not isinstance(name, str):
            raise TypeError(f"providers: {p!r} is not a provider name")
        opts = p[1] if isinstance(p, tuple) and len(p) > 1 else None
        if opts is None and provider_options is not None and i < len(provider_options):
            opts = provider_options[i]
        if opts and "device_id" in opts and device_id is None:
            try:
                device_id = int(opts["device_id"])
            except (TypeError, ValueError):
                raise ValueError(f"providers: device_id must be an adapter index, not {opts['device_id']!r}") from None
            if device_id < 0:
                raise ValueError(f"providers: device_id must be an adapter index, not {device_id}")
    return device_id


class InferenceSession:
    """An ONNX model on the GPU, with onnxruntime.InferenceSession's API.

    path_or_bytes: a file name (external data is read beside it) or the
    model's bytes (external data relative to the current folder).
    providers: accepted as ONNX Runtime takes them; wgnn always runs on its
    device (get_providers() says 'WgnnExecutionProvider'). A provider's
    {"device_id": N} option picks adapter N of list_adapters() when
    sess_options.adapter names none.
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        device_id = _check_providers(providers, provider_options)
        options = sess_options if sess_options is not None else SessionOptions()
        if not isinstance(options, SessionOptions):
            raise TypeError(f"sess_options: a wgnn.SessionOptions, not {type(options).__name__}")
        native = options._native()
        if device_id is not None and not options.adapter:
            native.adapter = str(device_id)
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self._s = _wgnn._Session(bytes(path_or_bytes), os.getcwd(), native)
        elif isinstance(path_or_bytes, (str, os.PathLike)):
            self._s = _wgnn._Session(os.fspath(path_or_bytes), native)
        else:
            raise TypeError(f"path_or_bytes: a file name or the model's bytes, not {type(path_or_bytes).__name__}")
        self._options = options
        self._verbose = native.verbose
        self._builds = 0
        self._inputs = [NodeArg(*v) for v in self._s.inputs()]
        self._outputs = [NodeArg(*v) for v in self._s.outputs()]
        self._input_names = {v.name for v in self._inputs}

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_providers(self):
        return [PROVIDER]

    def get_session_options(self):
        return self._options

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model: `input_feed` maps input names to arrays (numpy, or
        anything numpy.asarray takes, in the input's declared dtype); returns
        the outputs named (all, in the model's order, when None or empty) as
        numpy arrays."""
        if not isinstance(input_feed, dict):
            raise TypeError(f"input_feed: a dict of input name -> array, not {type(input_feed).__name__}")
        feed = []
        for name, value in input_feed.items():
            if name not in self._input_names:
                known = ", ".join(repr(v.name) for v in self._inputs)
                raise Error(f"no input named {name!r}: the model's inputs are {known}")
            # asarray keeps a 0-d value 0-d (ascontiguousarray makes it 1-d).
            feed.append((name, np.asarray(value, order="C")))
        names = list(output_names) if output_names else []
        outputs = self._s.run(names, feed)
        if self._verbose and self._s.builds() != self._builds:
            self._builds = self._s.builds()
            shapes = ", ".join(f"{n} {list(a.shape)}" for n, a in feed)
            print(f"wgnn: built graph {self._builds} for {shapes}\n{self._s.summary()}", file=sys.stderr)
        return outputs

    # wgnn's own: how many graphs were built (one per set of input shapes).
    def builds(self):
        return self._s.builds()

    def plans(self):
        """Plans kept: each serves every set of input shapes whose recording
        has its structure; every plan takes its buffers from the session's
        one set (onnx/session.h)."""
        return self._s.plans()

    def plan_sizes(self):
        """Sets of input shapes kept, over all plans."""
        return self._s.plan_sizes()

    def summary(self):
        return self._s.summary()

    def reset_state(self):
        """Sets the model's state back to its initial values: an ExecuTorch
        program's mutable buffers (a key/value cache), which otherwise carry
        over from each run to the next. Nothing for a model without state."""
        self._s.reset_state()


def supported_ops():
    """The ONNX operators (default domain) wgnn maps, sorted."""
    return list(_wgnn.onnx_ops())


def get_device_info(adapter=None, limits=None):
    """What `wgnn info --json` says (adapter, backend, driver, features,
    limits), as a dict, for the device sessions with this adapter choice use."""
    return json.loads(_wgnn.device_info(adapter or "", limits or ""))


def list_adapters(adapter=None):
    """Every WebGPU adapter this process can open, as dicts (index, name,
    vendor, vendor_id, device_id, backend, type, uuid, pci_bus), in the
    order adapter indexes count; `adapter` picks the Vulkan driver ("auto",
    "gpu", "lavapipe"). Starts no device. `wgnn info --adapters` prints it."""
    return json.loads(_wgnn.adapters_json(adapter or ""))


_DRIVER_CHOICES = ("", "auto", "gpu", "lavapipe")


def resolve_adapter(spec=None, adapters=None, cuda_visible_devices=None):
    """The adapter (a dict of list_adapters()) that a session made with
    SessionOptions.adapter = `spec` opens, by the rule sessions use: `spec`
    names it, else CUDA_VISIBLE_DEVICES does for NVIDIA adapters, else the
    first. adapters: a list to choose from (default: list_adapters());
    cuda_visible_devices: the variable's value (default: the environment's)."""
    spec = spec if spec is not None else os.environ.get("WGNN_ADAPTER", "")
    if adapters is None:
        adapters = list_adapters(spec if spec in _DRIVER_CHOICES else None)
    adapters = list(adapters)
    if cuda_visible_devices is None:
        cuda_visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    i = _wgnn.select_adapter_index(json.dumps(adapters), spec, cuda_visible_devices)
    return adapters[i]


_HERE = os.path.dirname(os.path.abspath(__file__))
_removers = {}


def model_folders():
    """Where remove_bg() looks for its model when none is given, in order
    (the CLI's list, with the package's bin/ as the program's folder)."""
    return _wgnn.model_folders(os.path.join(_HERE, "bin"))


def _default_model():
    folders = model_folders()
    found = _wgnn.find_model(folders)
    if not found:
        tried = "".join(f"\n  {os.path.join(d, _wgnn.default_model)}" for d in folders)
        raise Error(f"remove_bg: no model given and {_wgnn.default_model} is in none of these folders:{tried}\n"
                    "give model=PATH, or copy it into one of them (scripts/setup derives it)")
    return found


def remove_bg(image, model=None, size=0, preprocess="auto", adapter=None):
    """Cuts out a photo's subject, as `wgnn remove-bg` does (the same pre- and
    post-processing, matting/remover.h).

    image: a PIL image (RGB or RGBA; other modes are converted, gray as RGB)
        or an HxWx3 / HxWx4 uint8 array. An RGBA photo's own alpha is
        multiplied into the matte.
    model: an ISNet or MODNet ONNX file; None: isnet_any_size.onnx from
        model_folders(). size: the model's input size (0: its own).
    Returns an RGBA image of the same kind (PIL in, PIL out; array in, HxWx4
    uint8 array out) whose alpha is the matte. Models stay loaded between
    calls.
    """
    path = os.path.abspath(os.fspath(model)) if model is not None else _default_model()
    key = (path, int(size), preprocess, adapter or "")
    remover = _removers.get(key)
    if remover is None:
        remover = _removers[key] = _wgnn._Remover(path, int(size), preprocess, adapter or "")
    is_pil = type(image).__module__.startswith("PIL.")
    if is_pil:
        if image.mode not in ("RGB", "RGBA"):
            has_alpha = image.mode in ("LA", "PA", "La") or "transparency" in image.info
            image = image.convert("RGBA" if has_alpha else "RGB")
        array = np.asarray(image)
    else:
        array = np.asarray(image)
        if array.dtype != np.uint8:
            raise TypeError(f"remove_bg: needs a uint8 image, got {array.dtype}")
    rgba, _alpha = remover.run(np.ascontiguousarray(array))
    if is_pil:
        from PIL import Image

        return Image.fromarray(rgba, "RGBA")
    return rgba


class Generator:
    """A model folder loaded for text generation, as `wgnn generate DIR --text`
    and `wgnn chat DIR` load it: the decoder's ONNX files, tokenizer.json, the
    chat template (tokenizer_config.json's chat_template or
    chat_template.jinja), and generation_config.json's end tokens and
    max_new_tokens (docs/TEXT.md).

        gen = wgnn.Generator("models/qwen2.5-0.5b-instruct")
        print(gen.generate("The capital of France is", max_new_tokens=16))
        for piece in gen.chat([{"role": "user", "content": "Hi"}], stream=True):
            print(piece, end="", flush=True)

    The model stays loaded (on the device, with its plans) for the object's
    life, like a transformers model or a llama_cpp.Llama; wgnn.generate()
    keeps one per (folder, adapter). Calls take turns on the device, as
    InferenceSession runs do. adapter: as SessionOptions.adapter.
    """

    def __init__(self, model_dir, adapter=None):
        self.model_dir = os.path.abspath(os.fspath(model_dir))
        self._g = _wgnn._TextGenerator(self.model_dir, adapter or "")

    @property
    def eos_token_ids(self):
        """The end tokens (generation_config.json's eos_token_id, then
        tokenizer_config.json's eos_token)."""
        return list(self._g.eos_ids())

    def generate(self, prompt=None, *, messages=None, max_new_tokens=None, temperature=0.0, top_k=0, top_p=1.0,
                 seed=0, stop=None, stream=False):
        """The text generated after `prompt` (a string, encoded with the
        tokenizer's special tokens, as `wgnn generate DIR --text`) or after
        `messages` (a list of {"role", "content"} dicts rendered with the
        chat template, add_generation_prompt on, as `wgnn chat`): exactly one
        of them.

        max_new_tokens: None: generation_config.json's, else 64. The run also
            ends at an end token (not part of the text; special tokens are
            skipped).
        temperature <= 0: greedy; else sampling after top_k (0: off) and
            top_p (1.0: off) with `seed` (the same seed, the same text).
        stop: a string or a list of them: generation ends at the token that
            completes one, and the text ends before it.
        stream: False returns the text (str); True returns an iterator of
            its pieces (whole UTF-8 characters), each yielded as soon as its
            token is read back from the GPU (generation runs in a thread,
            without the GIL); joined they are the text stream=False gives.
            Closing the iterator early (break, or dropping it) ends the run
            at the next token.
        Errors are wgnn.Error (a RuntimeError) with the library's message;
        bad arguments are ValueError or TypeError.
        """
        if (prompt is None) == (messages is None):
            raise ValueError("generate: give exactly one of prompt (a string) and messages (a list of "
                             "{'role', 'content'} dicts)")
        if prompt is not None:
            if not isinstance(prompt, str):
                raise TypeError(f"generate: prompt must be a str, got {type(prompt).__name__}")
            ids = self._g.encode_text(prompt)
        else:
            ids = self._g.encode_chat(_messages(messages))
        if max_new_tokens is None:
            max_new_tokens = self._g.default_max_new_tokens()
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"generate: max_new_tokens must be an int of at least 1, got {max_new_tokens!r}")
        if not 0.0 < float(top_p) <= 1.0:
            raise ValueError(f"generate: top_p must be in (0, 1], got {top_p!r}")
        if int(top_k) < 0:
            raise ValueError(f"generate: top_k must be 0 (off) or more, got {top_k!r}")
        if int(seed) < 0:
            raise ValueError(f"generate: seed must be 0 or more, got {seed!r}")
        stops = _stops(stop)
        args = (ids, int(max_new_tokens), float(temperature), int(top_k), float(top_p), int(seed), stops)
        if not stream:
            return self._g.run(*args, None)
        return _stream(self._g, args)

    def chat(self, messages, **kwargs):
        """generate(messages=messages, **kwargs): the assistant's answer."""
        return self.generate(messages=messages, **kwargs)


def _messages(messages):
    if isinstance(messages, (str, bytes)) or not hasattr(messages, "__iter__"):
        raise ValueError("generate: messages must be a list of {'role', 'content'} dicts")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise ValueError(f"generate: messages[{i}] must be a dict with string 'role' and 'content', got {m!r}")
        out.append((m["role"], m["content"]))
    if not out:
        raise ValueError("generate: messages is empty")
    return out


def _stops(stop):
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else list(stop)
    for s in stops:
        if not isinstance(s, str):
            raise ValueError(f"generate: stop must be a str or a list of str, got an item {s!r}")
        if not s:
            raise ValueError("generate: stop: an empty string would end every answer at once")
    return stops


_DONE = object()


def _stream(g, args):
    """The pieces of g.run(*args) as they come: the run goes on in a thread
    (the C++ call holds the device, not the GIL) and hands each piece to a
    queue this generator drains."""
    pieces = queue.Queue()
    closed = threading.Event()

    def on_piece(piece):
        if closed.is_set():
            return False  # the consumer went away: end the run
        pieces.put(piece)
        return True

    def work():
        try:
            g.run(*args, on_piece)
            pieces.put(_DONE)
        except BaseException as e:  # handed to the consumer, raised there
            pieces.put(e)

    t = threading.Thread(target=work, name="wgnn.generate", daemon=True)
    t.start()
    try:
        while True:
            item = pieces.get()
            if item is _DONE:
                break
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        closed.set()
        t.join()


_generators = {}
_generators_lock = threading.Lock()


def generate(model_dir, prompt=None, *, messages=None, max_new_tokens=None, temperature=0.0, top_k=0, top_p=1.0,
             seed=0, stop=None, stream=False, adapter=None):
    """Text in, text out: Generator(model_dir, adapter).generate(...), the
    Generator kept for later calls with the same folder and adapter (the
    first call loads the model; later ones reuse it and its plans).

        text = wgnn.generate("models/qwen", "Once upon a time", max_new_tokens=32)
        for piece in wgnn.generate("models/qwen", messages=[{"role": "user", "content": "Hi"}],
                                   stream=True):
            print(piece, end="", flush=True)

    See Generator.generate for the arguments.
    """
    key = (os.path.abspath(os.fspath(model_dir)), adapter or "")
    with _generators_lock:
        gen = _generators.get(key)
        if gen is None:
            gen = _generators[key] = Generator(key[0], adapter)
    return gen.generate(prompt, messages=messages, max_new_tokens=max_new_tokens, temperature=temperature,
                        top_k=top_k, top_p=top_p, seed=seed, stop=stop, stream=stream)


@atexit.register
def _release():
    _removers.clear()
    _generators.clear()
    _wgnn.release_devices()
