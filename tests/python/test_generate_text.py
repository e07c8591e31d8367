"""wgnn.generate and wgnn.Generator: text in, text out, on the model folder
of tests/text/text_generate_e2e.py (scripts/models/decoders.py's mini Llama,
exported with /usr/bin/python3's PyTorch, beside tests/data/text/
chatml_folder's tokenizer, ChatML template and end tokens). The answers
must be the CLI's: `wgnn generate DIR --text`, `wgnn chat DIR`, --stop, as
the package's own CLI (wgnn/bin/wgnn, built with the extension) prints
them."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "text"))
import text_generate_e2e as e2e  # noqa: E402

import wgnn  # noqa: E402

NEW = 24
PROMPTS = ["The quick brown fox.", "Hello world!"]


def cli():
    path = os.path.join(os.path.dirname(wgnn.__file__), "bin", "wgnn")
    assert os.access(path, os.X_OK), f"{path} is missing: the package carries the CLI (python/CMakeLists.txt)"
    return path


def run(cmd, stdin=None):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, input=stdin)
    assert p.returncode == 0, f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}"
    return p.stdout


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("generate_text"))
    path, _decoder = e2e.make_folder(work)
    return path


def cli_text(folder, text, *extra):
    out = run([cli(), "generate", folder, "--text", text, "--max-new-tokens", str(NEW), "--json", *extra])
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("prompt", PROMPTS)
def test_prompt_is_the_cli_text(folder, prompt):
    want = cli_text(folder, prompt)
    assert len(set(want["tokens"][0])) >= 2, f"the CLI's tokens repeat one id ({want['tokens'][0]}): a weak test"
    got = wgnn.generate(folder, prompt, max_new_tokens=NEW)
    assert isinstance(got, str)
    assert got == want["text"]
    # Streamed: several pieces, joined the same text.
    pieces = list(wgnn.generate(folder, prompt, max_new_tokens=NEW, stream=True))
    assert all(isinstance(p, str) and p for p in pieces)
    assert len(pieces) > 1, pieces
    assert "".join(pieces) == want["text"]
    # The Generator class gives the same, and wgnn.generate reuses one.
    assert wgnn.Generator(folder).generate(prompt, max_new_tokens=NEW) == want["text"]


def test_default_max_new_tokens_and_eos_from_the_folder(folder):
    want = json.loads(run([cli(), "generate", folder, "--text", PROMPTS[0], "--json"]).strip().splitlines()[-1])
    assert wgnn.generate(folder, PROMPTS[0]) == want["text"]
    with open(os.path.join(folder, "generation_config.json")) as f:
        eos = json.load(f)["eos_token_id"]
    eos = eos if isinstance(eos, list) else [eos]
    assert set(eos) <= set(wgnn.Generator(folder).eos_token_ids)


def test_messages_are_the_cli_chat(folder):
    line = "Hello there, who are you?"
    out = run([cli(), "chat", folder, "--json", "--max-new-tokens", str(NEW)], stdin=line + "\n")
    want = json.loads(out.strip().splitlines()[0])["text"]
    messages = [{"role": "user", "content": line}]
    assert wgnn.generate(folder, messages=messages, max_new_tokens=NEW) == want
    assert "".join(wgnn.generate(folder, messages=messages, max_new_tokens=NEW, stream=True)) == want
    assert wgnn.Generator(folder).chat(messages, max_new_tokens=NEW) == want


def test_stop_trims_and_ends_early(folder):
    full = wgnn.generate(folder, PROMPTS[0], max_new_tokens=NEW)
    assert len(full) > 8, full
    # A stop string from the middle of the answer: the text ends before
    # its first appearance, as the CLI's --stop.
    s = full[len(full) // 2:len(full) // 2 + 3]
    want = full[:full.find(s)]
    cli_stop = cli_text(folder, PROMPTS[0], "--stop", s)
    assert cli_stop["stopped"] and cli_stop["text"] == want
    assert len(cli_stop["tokens"][0]) < NEW
    assert wgnn.generate(folder, PROMPTS[0], max_new_tokens=NEW, stop=s) == want
    assert wgnn.generate(folder, PROMPTS[0], max_new_tokens=NEW, stop=["\x01never", s]) == want
    streamed = list(wgnn.generate(folder, PROMPTS[0], max_new_tokens=NEW, stop=s, stream=True))
    assert "".join(streamed) == want
    assert s not in "".join(streamed)


def test_stream_closed_early(folder):
    it = wgnn.generate(folder, PROMPTS[1], max_new_tokens=NEW, stream=True)
    first = next(it)
    it.close()  # ends the run; the next call still works
    assert wgnn.generate(folder, PROMPTS[1], max_new_tokens=NEW).startswith(first)


def test_bad_arguments(folder, tmp_path):
    with pytest.raises(ValueError, match="exactly one of prompt"):
        wgnn.generate(folder)
    with pytest.raises(ValueError, match="exactly one of prompt"):
        wgnn.generate(folder, "hi", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(ValueError, match=r"messages\[0\] must be a dict"):
        wgnn.generate(folder, messages=[{"role": "user"}])
    with pytest.raises(ValueError, match="messages is empty"):
        wgnn.generate(folder, messages=[])
    with pytest.raises(ValueError, match="max_new_tokens must be an int of at least 1"):
        wgnn.generate(folder, "hi", max_new_tokens=0)
    with pytest.raises(ValueError, match="empty string would end every answer"):
        wgnn.generate(folder, "hi", stop="")
    with pytest.raises(ValueError, match="stop must be a str or a list of str"):
        wgnn.generate(folder, "hi", stop=[3])
    with pytest.raises(ValueError, match="top_p must be in"):
        wgnn.generate(folder, "hi", top_p=0)
    # The library's errors, as wgnn.Error (a RuntimeError).
    with pytest.raises(RuntimeError, match="not a model folder"):
        wgnn.generate(os.path.join(folder, "decoder_with_past_model.onnx"), "hi")
    no_tok = tmp_path / "no_tokenizer"
    no_tok.mkdir()
    shutil.copy(os.path.join(folder, "decoder_with_past_model.onnx"), no_tok)
    with pytest.raises(wgnn.Error, match="no tokenizer.json"):
        wgnn.generate(str(no_tok), "hi")
    no_dec = tmp_path / "no_decoder"
    shutil.copytree(os.path.join(ROOT, "tests", "data", "text", "chatml_folder"), no_dec)
    with pytest.raises(wgnn.Error, match="no decoder"):
        wgnn.generate(str(no_dec), "hi")
    raising = tmp_path / "raising"
    shutil.copytree(folder, raising)
    with open(raising / "tokenizer_config.json") as f:
        cfg = json.load(f)
    cfg["chat_template"] = "{{ raise_exception('System role not supported') if messages[0].role == 'system' }}"
    with open(raising / "tokenizer_config.json", "w") as f:
        json.dump(cfg, f)
    with pytest.raises(wgnn.Error, match="System role not supported"):
        wgnn.generate(str(raising), messages=[{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}])
