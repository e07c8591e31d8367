"""wgnn.ray.remove_bg_folder on the three-node cluster: the CLI's outputs byte
for byte, restartable, and nothing lost or duplicated when an actor is
killed mid-run."""
import os
import signal
import threading
import time

import pytest
from conftest import N_PHOTOS, isnet_any_size, make_photos, outputs_of, run_cli

import wgnn
import wgnn.ray

pytestmark = pytest.mark.timeout(300)


def check_outputs(dst, reference):
    got = outputs_of(dst)
    temps = [p for p in got if ".tmp-" in os.path.basename(p)]
    assert not temps, f"temporary files left: {temps[:5]}"
    missing = sorted(set(reference) - set(got))
    extra = sorted(set(got) - set(reference))
    assert not missing and not extra, f"missing {missing[:5]}, unexpected {extra[:5]}"
    differ = [p for p in reference if got[p] != reference[p]]
    assert not differ, f"{len(differ)} outputs differ from the CLI's, e.g. {differ[:5]}"
    for p, data in got.items():
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[-8:-4] == b"IEND", f"{p} is not a whole PNG"


def test_folder_matches_cli_and_resumes(cluster, photos, tiny_model, fresh_dir):
    src, reference = photos
    assert len(reference) == N_PHOTOS
    t = time.time()
    summary = wgnn.ray.remove_bg_folder(src, fresh_dir, num_actors=3, num_gpus_per_actor=1, model=tiny_model,
                                        recursive=True, batch_size=8, quiet=True)
    print(f"{N_PHOTOS} photos through 3 actors in {time.time() - t:.1f} s")
    assert summary["done"] == N_PHOTOS and summary["skipped"] == 0, summary
    assert [os.path.basename(p) for p, _ in summary["failed"]] == ["broken.jpg"], summary["failed"]
    assert "broken.jpg" in summary["failed"][0][1] and "JPEG" in summary["failed"][0][1]
    check_outputs(fresh_dir, reference)
    # Again: everything exists, nothing is redone (the files keep their times).
    mtimes = {p: os.stat(os.path.join(fresh_dir, p)).st_mtime_ns for p in reference}
    again = wgnn.ray.remove_bg_folder(src, fresh_dir, num_actors=3, model=tiny_model, recursive=True, quiet=True)
    assert again["done"] == 0 and again["skipped"] == N_PHOTOS, again
    assert {p: os.stat(os.path.join(fresh_dir, p)).st_mtime_ns for p in reference} == mtimes
    # A third of the outputs removed: only those are made again.
    gone = sorted(reference)[::3]
    for p in gone:
        os.unlink(os.path.join(fresh_dir, p))
    third = wgnn.ray.remove_bg_folder(src, fresh_dir, num_actors=2, model=tiny_model, recursive=True, quiet=True)
    assert third["done"] == len(gone) and third["skipped"] == N_PHOTOS - len(gone), third
    check_outputs(fresh_dir, reference)


def test_too_few_gpus_is_an_error(cluster, photos, tiny_model, fresh_dir):
    """Ray would wait for a fourth GPU forever; remove_bg_folder says so at once."""
    src, _ = photos
    t = time.time()
    with pytest.raises(wgnn.Error, match="the cluster has 3 GPUs"):
        wgnn.ray.remove_bg_folder(src, fresh_dir, num_gpus_per_actor=4, model=tiny_model, recursive=True, quiet=True)
    assert time.time() - t < 30


def test_isnet_matches_cli(cluster, tmp_path):
    """ISNet itself (the derived any-size model at 32x32, the smallest size
    --size takes, to stay quick on lavapipe) on a few photos, two actors."""
    src, ref, dst = str(tmp_path / "src"), str(tmp_path / "ref"), str(tmp_path / "dst")
    make_photos(src, 6, seed=5)
    model = isnet_any_size()
    r = run_cli([src, "-o", ref, "--recursive", "--model", model, "--size", "32"])
    assert r.returncode == 0, r.stderr[-2000:]
    summary = wgnn.ray.remove_bg_folder(src, dst, num_actors=2, model=model, size=32, recursive=True, batch_size=3,
                                        quiet=True)
    assert summary["done"] == 6 and not summary["failed"], summary
    check_outputs(dst, outputs_of(ref))


def test_cutter_gives_the_cli_bytes_from_threads(photos, tiny_model, tmp_path):
    """Cutter.cut_bytes (the CLI's own decode, cut-out and PNG encoder in
    C++) from four threads at once, as an actor runs it: the CLI's bytes,
    with --post-process too (no cluster needed)."""
    from concurrent.futures import ThreadPoolExecutor

    src, reference = photos
    cutter = wgnn.ray.Cutter(tiny_model)
    jobs = []
    for rel, want in sorted(reference.items())[:60]:
        stem = os.path.join(src, rel[: -len("_cutout.png")])
        path = next(stem + e for e in (".jpg", ".jpeg", ".png", ".JPG") if os.path.exists(stem + e))
        jobs.append((path, want))
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda j: cutter.cut_bytes(open(j[0], "rb").read(), j[0]), jobs))
    for (path, want), png in zip(jobs, got):
        assert png == want, f"{path}: Cutter's PNG differs from the CLI's"
    post = tmp_path / "post"
    post.mkdir()
    r = run_cli([jobs[0][0], "-o", str(post / "p.png"), "--model", tiny_model, "--post-process"])
    assert r.returncode == 0, r.stderr[-2000:]
    assert cutter.cut_bytes(open(jobs[0][0], "rb").read(), post_process=True) == (post / "p.png").read_bytes()
    with pytest.raises(wgnn.Error, match="bg_color '300,0,0'"):
        cutter.cut_bytes(open(jobs[0][0], "rb").read(), bg_color="300,0,0")
    assert len(jobs) == min(60, len(reference))


def test_plan_matches_cli_rules(tmp_path):
    """Names and refusals as the CLI's (no cluster needed)."""
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    for name in ["x.JPG", "y.png", "y_cutout.png", "z_mask.png", "notes.txt", "a/w.webp"]:
        (src / name).write_bytes(b"")
    jobs = wgnn.ray.plan_folder(str(src), str(tmp_path / "out"))
    assert [(os.path.basename(i), os.path.relpath(o, tmp_path / "out")) for i, o in jobs] == [
        ("x.JPG", "x_cutout.png"), ("y.png", "y_cutout.png")]
    jobs = wgnn.ray.plan_folder(str(src), str(tmp_path / "out"), recursive=True)
    assert [os.path.relpath(o, tmp_path / "out") for _, o in jobs] == [
        os.path.join("a", "w_cutout.png"), "x_cutout.png", "y_cutout.png"]
    jobs = wgnn.ray.plan_folder([str(src / "x.JPG"), str(src / "a")], str(tmp_path / "out"), only_mask=True)
    assert [os.path.relpath(o, tmp_path / "out") for _, o in jobs] == ["x_mask.png", "w_mask.png"]
    with pytest.raises(wgnn.Error, match="is given twice"):
        wgnn.ray.plan_folder([str(src / "y.png"), str(src / "y.png")], str(tmp_path / "out"))
    with pytest.raises(wgnn.Error, match="names a folder, not a PNG"):
        wgnn.ray.plan_folder([str(src / "y.png"), str(src / "x.JPG")], str(tmp_path / "out.png"))
    (src / "x.png").write_bytes(b"")
    with pytest.raises(wgnn.Error, match="would both be cut out to"):
        wgnn.ray.plan_folder(str(src), str(tmp_path / "out"))
    (src / "empty").mkdir()
    (src / "empty" / "notes.txt").write_bytes(b"")
    with pytest.raises(wgnn.Error, match="holds no photos"):
        wgnn.ray.plan_folder(str(src / "empty"), str(tmp_path / "out"))


def worker_pids(class_part):
    """The processes of live Ray actors whose class name holds `class_part`
    (Ray titles an actor's process 'ray::CLASS...'; all nodes are local)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if cmd.startswith("ray::") and class_part in cmd.split("\0")[0]:
            pids.append(int(d))
    return pids


def test_killed_actor_loses_and_duplicates_nothing(cluster, photos, tiny_model, fresh_dir):
    src, reference = photos
    # Small batches, one photo at a time per actor, and the kill at the
    # 10th output: the run is still going when the kill lands.
    result, error = {}, []

    def run():
        try:
            result.update(wgnn.ray.remove_bg_folder(src, fresh_dir, num_actors=3, model=tiny_model, recursive=True,
                                                    batch_size=2, threads_per_actor=1, quiet=True))
        except BaseException as e:  # noqa: BLE001 - re-raised by the test
            error.append(e)

    stale = set(worker_pids("RemoveBgPredictor"))  # actors of earlier runs, maybe still stopping
    th = threading.Thread(target=run, daemon=True)
    th.start()
    deadline = time.time() + 120
    victim = None
    while time.time() < deadline and th.is_alive():
        # Names only: a temporary file may be renamed between a listing and an open.
        done = sum(1 for _r, _d, files in os.walk(fresh_dir) for f in files if f.endswith("_cutout.png"))
        workers = [p for p in worker_pids("RemoveBgPredictor") if p not in stale]
        if done >= 10 and workers:
            victim = workers[0]
            os.kill(victim, signal.SIGKILL)
            break
        time.sleep(0.05)
    assert victim is not None, "no RemoveBgPredictor actor was seen working"
    assert done < N_PHOTOS, "the run ended before the kill"
    killed_at = done
    th.join(timeout=240)
    assert not th.is_alive(), "remove_bg_folder did not return within 240 s of the kill"
    assert not error, error
    assert result["done"] + result["skipped"] == N_PHOTOS, result
    assert [os.path.basename(p) for p, _ in result["failed"]] == ["broken.jpg"]
    check_outputs(fresh_dir, reference)
    print(f"killed actor pid {victim} at {killed_at} of {N_PHOTOS} outputs; summary {result}")
