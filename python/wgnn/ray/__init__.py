"""wgnn on Ray (docs/SCALING.md): ONNX models and background removal over a
Ray cluster, one wgnn device per Ray actor.

    import ray, wgnn.ray
    ds = ray.data.from_numpy(images)                       # column "data"
    out = ds.map_batches(wgnn.ray.Predictor, fn_constructor_args=("model.onnx",),
                         concurrency=4, num_gpus=1, batch_size=32)

    wgnn.ray.remove_bg_folder("photos/", "cutouts/", num_actors=8)   # as `wgnn remove-bg photos -o cutouts`

    from ray import serve
    serve.run(wgnn.ray.remove_bg_app(max_replicas=8))      # POST /remove-bg, as `wgnn serve`

Adapters: Ray gives an actor with num_gpus=1 its GPU through
CUDA_VISIBLE_DEVICES, and wgnn opens the WebGPU adapter that variable names
(docs/ADAPTERS.md); `wgnn.resolve_adapter()` says which.

Needs the `ray` extra (pip install 'wgnn[ray]'); Ray itself is imported only
by the functions that start work on a cluster, so the building blocks
(Predictor, RemoveBgPredictor, plan_folder, write_atomic, the Cutter) work
without it.
"""
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import wgnn

from ._photo import PHOTO_EXTENSIONS, Cutter, parse_color

__all__ = [
    "Predictor", "RemoveBgPredictor", "Cutter", "plan_folder", "write_atomic", "remove_temp_files",
    "remove_bg_folder", "remove_bg_app", "RemoveBgDeployment", "parse_color", "PHOTO_EXTENSIONS",
]


def _die_on_device_loss(e):
    """A lost device stays lost for this process: exit, so that Ray restarts
    the actor (a new process, a new device) and retries its batch."""
    if isinstance(e, wgnn.DeviceLost):
        print(f"wgnn.ray: the GPU device was lost ({e}); exiting so that Ray restarts this actor",
              file=sys.stderr, flush=True)
        os._exit(75)


class Predictor:
    """A callable class for Dataset.map_batches: one InferenceSession per
    actor, made in __init__; numpy batches in, numpy batches out.

    model: an ONNX file (or its bytes). sess_options: a wgnn.SessionOptions
        (fp16, adapter, ...), passed to the session as is.
    input_columns: {model input name: batch column}; None: each input reads
        the column of its own name, except that a model with one input reads
        the batch's only column, or its "data" column (ray.data.from_numpy's
        name) when it has several.
    output_columns: {model output name: batch column}; None: each output
        goes to a column of its own name. Outputs not named are not read back
        when output_columns is given.
    keep_columns: batch columns carried through to the output (an id, a
        path), or True for all the input columns.

    A batch runs as one model run: the model's first dimension must be free
    (or equal the batch size). The rows of each column are stacked into one
    array of the input's dtype.
    """

    def __init__(self, model, sess_options=None, input_columns=None, output_columns=None, keep_columns=()):
        self.session = wgnn.InferenceSession(model, sess_options=sess_options)
        self._inputs = self.session.get_inputs()
        self._outputs = self.session.get_outputs()
        self.input_columns = dict(input_columns) if input_columns else None
        self.output_columns = dict(output_columns) if output_columns else None
        self.keep_columns = keep_columns
        names = {o.name for o in self._outputs}
        for name in (self.output_columns or {}):
            if name not in names:
                raise wgnn.Error(f"output_columns: the model has no output {name!r}; its outputs are "
                                 + ", ".join(repr(n) for n in sorted(names)))
        names = {i.name for i in self._inputs}
        for name in (self.input_columns or {}):
            if name not in names:
                raise wgnn.Error(f"input_columns: the model has no input {name!r}; its inputs are "
                                 + ", ".join(repr(n) for n in sorted(names)))

    def _column_for(self, inp, batch):
        if self.input_columns and inp.name in self.input_columns:
            col = self.input_columns[inp.name]
        elif inp.name in batch:
            col = inp.name
        elif len(self._inputs) == 1 and len(batch) == 1:
            col = next(iter(batch))
        elif len(self._inputs) == 1 and "data" in batch:
            col = "data"
        else:
            raise wgnn.Error(f"the batch has no column for the model's input {inp.name!r} (columns: "
                             f"{', '.join(map(repr, batch))}); give input_columns={{{inp.name!r}: COLUMN}}")
        if col not in batch:
            raise wgnn.Error(f"input_columns maps {inp.name!r} to the column {col!r}, which the batch lacks "
                             f"(columns: {', '.join(map(repr, batch))})")
        return col

    def __call__(self, batch):
        feed = {}
        for inp in self._inputs:
            col = batch[self._column_for(inp, batch)]
            if isinstance(col, np.ndarray) and col.dtype != object:
                feed[inp.name] = col
            else:  # ragged columns come as an object array of arrays
                feed[inp.name] = np.stack([np.asarray(v) for v in col])
        if self.output_columns:
            names = list(self.output_columns)
            columns = [self.output_columns[n] for n in names]
        else:
            names = [o.name for o in self._outputs]
            columns = names
        try:
            results = self.session.run(names, feed)
        except wgnn.Error as e:
            _die_on_device_loss(e)
            raise
        out = {}
        keep = list(batch) if self.keep_columns is True else list(self.keep_columns or ())
        for c in keep:
            out[c] = batch[c]
        for c, r in zip(columns, results):
            out[c] = r
        return out


# ---- remove-bg over a folder ------------------------------------------------

def _is_photo_name(name):
    ext = os.path.splitext(name)[1].lower()
    if ext not in PHOTO_EXTENSIONS:
        return False
    return not (name.endswith("_cutout.png") or name.endswith("_mask.png"))


def _output_name(path, only_mask=False):
    stem = os.path.splitext(os.path.basename(path))[0]
    return stem + ("_mask.png" if only_mask else "_cutout.png")


def _path_key(rel):
    """std::filesystem::path's order: component by component."""
    return rel.split(os.sep)


def _scan(folder, recursive):
    found = []
    if recursive:
        for root, dirs, files in os.walk(folder):
            # recursive_directory_iterator does not follow symlinked folders.
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
            for f in files:
                p = os.path.join(root, f)
                if os.path.isfile(p) and _is_photo_name(f):
                    found.append(os.path.relpath(p, folder))
    else:
        try:
            names = os.listdir(folder)
        except OSError as e:
            raise wgnn.Error(f"cannot list the folder '{folder}': {e.strerror}") from None
        found = [f for f in names if os.path.isfile(os.path.join(folder, f)) and _is_photo_name(f)]
    return sorted(found, key=_path_key)


def plan_folder(inputs, output, recursive=False, only_mask=False):
    """The (photo, output) pairs `wgnn remove-bg INPUTS... -o OUTPUT` makes
    with several photos or a folder: a folder's photos (.png .jpg .jpeg .webp
    .tif .tiff, any case; not *_cutout.png or *_mask.png; subfolders with
    recursive) go to OUTPUT/SUB/STEM_cutout.png, a photo given by name to
    OUTPUT/STEM_cutout.png. A photo given twice, two photos with one output
    and an output that is a photo are a wgnn.Error before anything runs, as
    in the CLI."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = [os.fspath(i) for i in inputs]
    if not inputs:
        raise wgnn.Error("give a photo, several, or a folder")
    output = os.fspath(output)
    if os.path.splitext(output)[1].lower() == ".png" and not os.path.isdir(output):
        if len(inputs) == 1:
            raise wgnn.Error(f"'{inputs[0]}' is a folder: its photos' cut-outs go to a folder, and -o '{output}' "
                             "names a PNG")
        raise wgnn.Error(f"-o '{output}': with several photos -o names a folder, not a PNG")
    jobs = []
    for src in inputs:
        if os.path.isdir(src):
            found = _scan(src, recursive)
            if not found:
                raise wgnn.Error(f"the folder '{src}' holds no photos (.png .jpg .jpeg .webp .tif .tiff)"
                                 + ("" if recursive else "; --recursive reads its subfolders"))
            for rel in found:
                jobs.append((os.path.join(src, rel),
                             os.path.join(output, os.path.dirname(rel), _output_name(rel, only_mask))))
        else:
            jobs.append((src, os.path.join(output, _output_name(src, only_mask))))

    def norm(p):
        return os.path.normpath(os.path.realpath(os.path.abspath(p)))

    seen = {}
    for src, _ in jobs:
        key = norm(src)
        if key in seen:
            raise wgnn.Error(f"'{src}' is given twice" if seen[key] == src
                             else f"'{src}' is given twice (also as '{seen[key]}')")
        seen[key] = src
    owner = {}
    for src, out in jobs:
        key = norm(out)
        if key in seen:
            raise wgnn.Error(f"the output for '{src}' would be '{out}', which is the photo '{seen[key]}' itself: "
                             "give another -o")
        if key in owner:
            raise wgnn.Error(f"'{owner[key]}' and '{src}' would both be cut out to '{out}': rename one, or run them "
                             "with different -o folders")
        owner[key] = src
    return jobs


_counter = 0
_counter_lock = threading.Lock()


def _temp_prefix(path):
    d, name = os.path.split(path)
    return os.path.join(d, f".{name}.tmp-")


def write_atomic(path, data):
    """Writes `data` to `path` as the CLI does (util/file.h): into
    '.NAME.tmp-PID-N' beside it, fsync, then renamed into place, so the path
    holds either nothing or the whole file. The temporary file is removed
    when the write fails; a killed process may leave one, which
    remove_temp_files() clears."""
    global _counter
    with _counter_lock:
        n = _counter
        _counter += 1
    tmp = f"{_temp_prefix(path)}{os.getpid()}-{n}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise wgnn.Error(f"cannot write '{path}': {e.strerror}") from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except OSError as e:
        os.close(fd)
        _unlink_quietly(tmp)
        raise wgnn.Error(f"cannot write '{path}': {e.strerror}") from None
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp)
        raise
    os.close(fd)
    try:
        os.replace(tmp, path)
    except OSError as e:
        _unlink_quietly(tmp)
        raise wgnn.Error(f"cannot write '{path}': {e.strerror}") from None


def _unlink_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def remove_temp_files(outputs):
    """Removes the '.NAME.tmp-*' files write_atomic may have left beside
    these outputs (a writer killed mid-write); returns how many. Call it
    only when no writer of these outputs runs."""
    removed = 0
    by_dir = {}
    for out in outputs:
        d, name = os.path.split(out)
        by_dir.setdefault(d or ".", set()).add(f".{name}.tmp-")
    for d, prefixes in by_dir.items():
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            if n.startswith(".") and ".tmp-" in n and n[: n.index(".tmp-") + 5] in prefixes:
                try:
                    os.unlink(os.path.join(d, n))
                    removed += 1
                except OSError:
                    pass
    return removed


def _read_file(path):
    """The file's bytes; errors as image::read_photo's."""
    if not os.path.exists(path):
        raise wgnn.Error(f"'{path}': no such file")
    if os.path.isdir(path):
        raise wgnn.Error(f"'{path}' is a folder, not an image file")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise wgnn.Error(f"cannot read '{path}': {e.strerror}") from None


class RemoveBgPredictor:
    """A callable class for Dataset.map_batches: cuts out the photos of a
    batch with columns "input" (a photo's path) and "output" (the PNG to
    write), as `wgnn remove-bg` does: an output that exists is skipped
    (unless overwrite), every output is written atomically, and a photo
    that fails is reported, not raised. Returns the batch's input and output
    with "status" ("done", "skipped", "failed") and "error" (why it failed).

    The Remover (model, size, preprocess, adapter: as Cutter) is made once
    per actor. only_mask, bg_color and post_process: as the CLI's
    --only-mask, --bg-color and --post-process.
    """

    def __init__(self, model=None, size=0, preprocess="auto", adapter=None, overwrite=False, only_mask=False,
                 bg_color=None, post_process=False, max_pixels=8192 * 8192, threads=4):
        self.cutter = Cutter(model, size=size, preprocess=preprocess, adapter=adapter)
        if threads < 1:
            raise wgnn.Error(f"threads {threads}: give 1 or more")
        # Photos of a batch in parallel: each one's reading, decoding,
        # encoding and writing run beside the others' (the GIL released);
        # the device's lock lets one photo at a time through the model.
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="wgnn-remove-bg") if threads > 1 else None
        self.overwrite = overwrite
        self.options = dict(only_mask=only_mask, bg_color=parse_color(bg_color, "--bg-color") if bg_color else None,
                            post_process=post_process)
        if only_mask and bg_color:
            raise wgnn.Error("--only-mask writes the matte, --bg-color a composite: give one of them")
        self.max_pixels = max_pixels

    def one(self, src, out):
        """Cuts out one photo: ("done" | "skipped" | "failed", error)."""
        if not self.overwrite and os.path.exists(out):
            return "skipped", ""
        try:
            png = self.cutter.cut_bytes(_read_file(src), src, max_pixels=self.max_pixels, **self.options)
            os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
            write_atomic(out, png)
        except wgnn.Error as e:
            _die_on_device_loss(e)
            return "failed", str(e)
        except (OSError, ValueError, TypeError) as e:
            return "failed", f"{src}: {e}"
        return "done", ""

    def __call__(self, batch):
        pairs = [(str(src), str(out)) for src, out in zip(batch["input"], batch["output"])]
        if self.pool is not None and len(pairs) > 1:
            results = list(self.pool.map(lambda p: self.one(*p), pairs))
        else:
            results = [self.one(*p) for p in pairs]
        status = [s for s, _ in results]
        errors = [e for _, e in results]
        return {"input": np.asarray(batch["input"], dtype=object), "output": np.asarray(batch["output"], dtype=object),
                "status": np.asarray(status, dtype=object), "error": np.asarray(errors, dtype=object)}


def remove_bg_folder(inputs, output, num_actors=1, num_gpus_per_actor=1, size=0, model=None, recursive=False,
                     overwrite=False, only_mask=False, bg_color=None, post_process=False, preprocess="auto",
                     batch_size=8, num_cpus_per_actor=1, threads_per_actor=4, adapter=None, ray_remote_args=None,
                     quiet=False):
    """`wgnn remove-bg INPUTS... -o OUTPUT` over a Ray cluster: the same
    outputs, byte for byte (JPEG and PNG photos; docs/SCALING.md), with the
    photos spread over `num_actors` actors, each holding the model on its
    own GPU (num_gpus_per_actor; 0 for CPU-only nodes, where wgnn runs on
    lavapipe). Each actor works on threads_per_actor photos of its batch at
    once (decoding and encoding beside the model's runs); num_cpus_per_actor
    is what Ray reserves for it (docs/SCALING.md sizes both).

    Each photo's output is written once, atomically; an output that exists
    is skipped (overwrite redoes it), so a run that was stopped is resumed
    by running it again. An actor that dies (a killed process, a lost
    device) is restarted by Ray and its batch retried: photos it finished
    are then skipped. The temporary files of writers killed mid-write are
    removed before and after the run, so two runs (or a run and the CLI)
    must not write into one output folder at once. Connects to a running
    cluster (ray.init()) unless one is connected already.

    Returns {"done": n, "skipped": n, "failed": [(photo, reason), ...],
    "temp_files_removed": n}; raises wgnn.Error for what the CLI refuses
    before it runs (see plan_folder).
    """
    import ray

    if num_actors < 1:
        raise wgnn.Error(f"num_actors {num_actors}: give 1 or more")
    if batch_size < 1:
        raise wgnn.Error(f"batch_size {batch_size}: give 1 or more")
    if only_mask and bg_color:
        raise wgnn.Error("--only-mask writes the matte, --bg-color a composite: give one of them")
    if bg_color:
        parse_color(bg_color, "--bg-color")
    size = int(size)
    if size != 0 and (size < 32 or size % 32 != 0):
        raise wgnn.Error(f"--size {size}: give a multiple of 32 (ISNet: 1024 by default; 512 or 320 are faster)")
    if model is not None and not os.path.isfile(model):
        raise wgnn.Error(f"model '{model}': no such file")
    jobs = plan_folder(inputs, output, recursive=recursive, only_mask=only_mask)
    output = os.fspath(output)
    try:
        os.makedirs(output, exist_ok=True)
    except OSError as e:
        raise wgnn.Error(f"-o '{output}': cannot make the folder: {e.strerror}") from None
    if not os.access(output, os.W_OK):
        raise wgnn.Error(f"-o '{output}': the folder is not writable")
    # Absolute paths: the actors' working folders are not the driver's.
    outputs = [os.path.abspath(o) for _, o in jobs]
    removed = remove_temp_files(outputs)
    todo = [{"input": os.path.abspath(s), "output": o} for (s, _), o in zip(jobs, outputs)
            if overwrite or not os.path.exists(o)]
    skipped = len(jobs) - len(todo)
    done, failed = 0, []
    if todo:
        if not ray.is_initialized():
            ray.init()
        # Ray would wait for GPUs that never come: say so instead.
        gpus = ray.cluster_resources().get("GPU", 0)
        if num_gpus_per_actor and gpus < num_gpus_per_actor:
            raise wgnn.Error(f"num_gpus_per_actor={num_gpus_per_actor}, and the cluster has {gpus:g} GPUs: start its "
                             "GPU nodes first, or give num_gpus_per_actor=0 to run on CPU nodes (lavapipe)")
        model = os.path.abspath(model) if model is not None else None
        # A block is what Ray retries when an actor dies: one batch each for
        # small runs, at most 20 per actor (and 200 in all) for large ones.
        blocks = max(1, min((len(todo) + batch_size - 1) // batch_size, max(num_actors * 20, 200)))
        ds = ray.data.from_items(todo, override_num_blocks=blocks)
        remote = dict(ray_remote_args or {})
        ds = ds.map_batches(
            RemoveBgPredictor,
            fn_constructor_kwargs=dict(model=model, size=size, preprocess=preprocess, adapter=adapter,
                                       overwrite=overwrite, only_mask=only_mask, bg_color=bg_color,
                                       post_process=post_process, threads=threads_per_actor),
            batch_size=batch_size, concurrency=num_actors, num_gpus=num_gpus_per_actor, num_cpus=num_cpus_per_actor,
            batch_format="numpy", **remote)
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
            for src, status, err in zip(batch["input"], batch["status"], batch["error"]):
                if status == "done":
                    done += 1
                elif status == "skipped":
                    skipped += 1
                else:
                    failed.append((str(src), str(err)))
        removed += remove_temp_files(outputs)
    if not quiet:
        print(f"remove-bg: {done} done, {skipped} skipped, {len(failed)} failed, of {len(jobs)} photos",
              file=sys.stderr)
        for src, err in failed:
            print(f"remove-bg: failed: {src}: {err}", file=sys.stderr)
    return {"done": done, "skipped": skipped, "failed": failed, "temp_files_removed": removed}


def __getattr__(name):
    # The Serve deployment imports ray.serve, which takes a while: on use.
    if name in ("remove_bg_app", "RemoveBgDeployment"):
        from . import serve as _serve

        return getattr(_serve, name)
    raise AttributeError(f"module 'wgnn.ray' has no attribute {name!r}")
