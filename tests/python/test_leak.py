"""1,000 runs of a small model in one process: the resident memory is flat
after the warm-up (outputs are numpy arrays that own wgnn's buffers; each is
freed with its array)."""
import gc
import os

import numpy as np

import wgnn


def rss_kib():
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def test_run_1000_times_rss_flat(small_model):
    s = wgnn.InferenceSession(small_model)
    rng = np.random.default_rng(0)
    feed = {"a": rng.standard_normal((64, 4), dtype=np.float32), "b": rng.standard_normal((64, 4), dtype=np.float32)}
    (want,) = s.run(None, feed)
    for _ in range(200):  # warm-up: allocator pools, numpy caches
        s.run(None, feed)
    gc.collect()
    before = rss_kib()
    samples = []
    for i in range(1000):
        (y,) = s.run(None, feed)
        if i % 100 == 99:
            gc.collect()
            samples.append(rss_kib())
    np.testing.assert_array_equal(y, want)
    growth = samples[-1] - before
    print(f"RSS after warm-up {before} KiB; every 100 runs: {samples}; growth {growth} KiB")
    # A leak of the 768-byte output alone would be 750 KiB over 1,000 runs;
    # of the inputs' copies, 2 MiB.
    assert growth < 512, f"RSS grew {growth} KiB over 1,000 runs: {samples}"
    assert s.builds() == 1
