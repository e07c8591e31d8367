"""`wgnn generate DIR --text` and `wgnn chat DIR` end to end, on a model
folder made here: scripts/models/decoders.py's mini Llama (vocabulary of
211, exported with PyTorch at test time) beside the text files of
tests/data/text/chatml_folder/ (a 211-token BPE with ChatML's special
tokens, a ChatML chat template, eos <|im_end|> and <|endoftext|>, written by
make_fixtures.py with Python's tokenizers and jinja2).

  - --text: the prompt ids are the ones Python's tokenizers gives for the
    text (tests/data/text/tokenizer_cases.json); the new tokens are those of
    `wgnn generate DECODER --prompt <those ids>` with the folder's end
    tokens; the text printed is their decode (written out here for this
    tokenizer: the tokens joined, U+2581 as a space, the first one's leading
    space dropped, special tokens skipped); --stream prints the same text
    (its pieces, printed as each token is read back, joined); --stop cuts
    it where the string first appears, and ends the run there (the token
    callback: fewer steps, the tokens up to the one completing the string);
  - chat: a scripted two-turn conversation from stdin; turn 1's prompt ids
    are those of the chat template rendered by jinja2 and encoded by Python
    (tests/data/text/chatml_first_turn.json); turn 2's prompt holds turn 1's
    answer and the second line, with 5 <|im_start|> (system, user,
    assistant, user, assistant); without --json both answers stream;
  - errors: a folder without tokenizer.json, without a decoder, a template
    that raises; --text with a decoder file.

usage: text_generate_e2e.py WGNN WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "text")
WGNN = WORK = None  # main()'s arguments
NEW = 24


def run(cmd, stdin=None, ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, input=stdin)
    if ok and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    return p


class Decoder:
    """tokenizers' decode(ids, skip_special_tokens=True) for the chatml_211
    tokenizer (BPE over Metaspace, prepend_scheme "always")."""

    def __init__(self, path):
        with open(path) as f:
            tj = json.load(f)
        self.token = {i: t for t, i in tj["model"]["vocab"].items()}
        self.special = set()
        for a in tj["added_tokens"]:
            self.token[a["id"]] = a["content"]
            if a["special"]:
                self.special.add(a["id"])

    def __call__(self, ids):
        toks = [self.token[i] for i in ids if i not in self.special]
        out = []
        for n, t in enumerate(toks):
            t = t.replace("\u2581", " ")
            if n == 0 and t.startswith(" "):
                t = t[1:]
            out.append(t)
        return "".join(out)


def make_folder(work):
    """The model folder in WORK/folder: the mini Llama exported into WORK/llama
    beside tests/data/text/chatml_folder's files. Its path and its decoder's."""
    run(["/usr/bin/python3", os.path.join(ROOT, "scripts/models/decoders.py"), "--model", "llama", "--size", "mini",
         "--out", work])
    folder = os.path.join(work, "folder")
    shutil.copytree(os.path.join(DATA, "chatml_folder"), folder)
    decoder = os.path.join(folder, "decoder_with_past_model.onnx")
    shutil.copy(os.path.join(work, "llama", "decoder_with_past_model.onnx"), decoder)
    return folder, decoder


def main():
    global WGNN, WORK
    WGNN, WORK = (os.path.abspath(a) for a in sys.argv[1:3])
    if os.path.exists(WORK):
        shutil.rmtree(WORK)
    os.makedirs(WORK)
    folder, decoder = make_folder(WORK)
    decode = Decoder(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(DATA, "tokenizer_cases.json")) as f:
        fixture = next(x for x in json.load(f)["fixtures"] if x["tokenizer"] == "chatml_211.json")
    with open(os.path.join(folder, "generation_config.json")) as f:
        eos = json.load(f)["eos_token_id"]
    passed = failed = 0
    texts = 0

    def check(name, problems):
        nonlocal passed, failed
        if problems:
            failed += 1
            print(f"FAIL {name}: " + "; ".join(problems))
        else:
            passed += 1
            print(f"pass {name}")

    # ---- generate --text ------------------------------------------------------
    for case in fixture["cases"]:
        text = case["text"]
        if text not in ("The quick brown fox.", "Hello world!", "Numbers 3.14159 and 1,000,000 and 2026-12-06"):
            continue
        problems = []
        got = json.loads(run([WGNN, "generate", folder, "--text", text, "--max-new-tokens", str(NEW), "--json"])
                         .stdout.strip().splitlines()[-1])
        if got["prompt_tokens"] != case["ids"]:
            problems.append(f"prompt ids {got['prompt_tokens']}, Python's tokenizers gives {case['ids']}")
        ref = json.loads(run([WGNN, "generate", decoder, "--prompt", ",".join(map(str, case["ids"])), "--eos",
                              ",".join(map(str, eos)), "--max-new-tokens", str(NEW), "--json"])
                         .stdout.strip().splitlines()[-1])["tokens"][0]
        toks = got["tokens"][0]
        if toks != ref:
            problems.append(f"tokens {toks}, --prompt gives {ref}")
        if len(set(toks)) < 2:
            problems.append(f"the tokens repeat one id ({toks}): a weak test")
        want = decode(toks)
        if got["text"] != want:
            problems.append(f"text {got['text']!r}, the decode of the tokens is {want!r}")
        plain = run([WGNN, "generate", folder, "--text", text, "--max-new-tokens", str(NEW)]).stdout
        if plain != want + "\n":
            problems.append(f"printed {plain!r}, expected {want + chr(10)!r}")
        streamed = run([WGNN, "generate", folder, "--text", text, "--max-new-tokens", str(NEW), "--stream"]).stdout
        if streamed != want + "\n":
            problems.append(f"--stream printed {streamed!r}, expected {want + chr(10)!r}")
        stripped = want.strip()
        if len(stripped) >= 6:
            stop = stripped[len(stripped) // 2:len(stripped) // 2 + 2]
            cut = want[:want.index(stop)]
            for extra in ([], ["--stream"]):
                out = run([WGNN, "generate", folder, "--text", text, "--max-new-tokens", str(NEW), "--stop", stop,
                           "--stop", "\u00a7never\u00a7", *extra]).stdout
                if out != cut + "\n":
                    problems.append(f"--stop {stop!r} {' '.join(extra)}: printed {out!r}, expected {cut + chr(10)!r}")
            # The run ends at the token that completes the stop string: fewer
            # steps, the tokens a prefix of the full run's.
            early = json.loads(run([WGNN, "generate", folder, "--text", text, "--max-new-tokens", str(NEW), "--stop",
                                    stop, "--json"]).stdout.strip().splitlines()[-1])
            et = early["tokens"][0]
            if early["text"] != cut or not early["stopped"]:
                problems.append(f"--stop {stop!r} --json: text {early['text']!r} stopped {early['stopped']}, "
                                f"expected {cut!r} and true")
            if toks[:len(et)] != et or stop not in decode(et) or stop in decode(et[:-1]):
                problems.append(f"--stop {stop!r}: tokens {et} are not the full run's {toks} up to the one that "
                                f"completes the stop string")
            if early["last_run"]["steps"] >= got["last_run"]["steps"] or len(et) >= len(toks):
                problems.append(f"--stop {stop!r}: {early['last_run']['steps']} steps ({len(et)} tokens), the full "
                                f"run {got['last_run']['steps']} ({len(toks)}): not ended early")
        else:
            problems.append(f"the answer {want!r} is too short to check --stop")
        check(f"generate --text {text!r}", problems)
        texts += 1
    if texts != 3:
        check("the fixture's texts", [f"{texts} of the 3 texts found in tokenizer_cases.json"])

    # ---- chat -------------------------------------------------------------------
    with open(os.path.join(DATA, "chatml_first_turn.json")) as f:
        first_turn = json.load(f)
    problems = []
    p = run([WGNN, "chat", folder, "--system", "Be brief.", "--max-new-tokens", "8", "--json"], stdin="hi\nagain\n")
    turns = [json.loads(line) for line in p.stdout.strip().splitlines()]
    if len(turns) != 2:
        problems.append(f"{len(turns)} turns answered, expected 2: {p.stdout!r}")
    else:
        t1, t2 = turns
        if t1["prompt_tokens"] != first_turn["prompt_tokens"]:
            problems.append(f"turn 1 prompt ids {t1['prompt_tokens']}, the template rendered by jinja2 and "
                            f"encoded by Python's tokenizers gives {first_turn['prompt_tokens']}")
        im_start = 2
        if t2["prompt_tokens"].count(im_start) != 5:
            problems.append(f"turn 2's prompt has {t2['prompt_tokens'].count(im_start)} <|im_start|>, expected 5")
        said = decode(t2["prompt_tokens"])
        if "again" not in said or t1["text"].strip() not in said:
            problems.append(f"turn 2's prompt {said!r} lacks the second line or turn 1's answer {t1['text']!r}")
        for t in turns:
            if t["text"] != decode(t["tokens"]):
                problems.append(f"turn {t['turn']}: text {t['text']!r} is not the decode of {t['tokens']}")
        # Streamed, the same answers, one line each.
        streamed = run([WGNN, "chat", folder, "--system", "Be brief.", "--max-new-tokens", "8"],
                       stdin="hi\nagain\n").stdout
        want = "".join(t["text"] + "\n" for t in turns)
        if streamed != want:
            problems.append(f"streamed chat printed {streamed!r}, expected {want!r}")
    check("chat: two turns, the template applied", problems)

    # ---- errors -------------------------------------------------------------------
    problems = []
    no_tok = os.path.join(WORK, "no_tokenizer")
    os.makedirs(no_tok)
    shutil.copy(decoder, no_tok)
    no_dec = os.path.join(WORK, "no_decoder")
    shutil.copytree(os.path.join(DATA, "chatml_folder"), no_dec)
    raising = os.path.join(WORK, "raising")
    shutil.copytree(folder, raising)
    with open(os.path.join(raising, "tokenizer_config.json")) as f:
        cfg = json.load(f)
    cfg["chat_template"] = "{{ raise_exception('System role not supported') if messages[0].role == 'system' }}"
    with open(os.path.join(raising, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f)
    for cmd, stdin, want in [
        ([WGNN, "generate", no_tok, "--text", "hi"], None, "no tokenizer.json"),
        ([WGNN, "generate", no_dec, "--text", "hi"], None, "no decoder"),
        ([WGNN, "chat", raising, "--system", "x"], "hi\n", "System role not supported"),
        ([WGNN, "generate", decoder, "--text", "hi"], None, "not a model folder"),
    ]:
        r = run(cmd, stdin=stdin, ok=False)
        if r.returncode == 0 or want not in r.stderr:
            problems.append(f"{' '.join(cmd[1:3])}: exit {r.returncode}, stderr {r.stderr.strip()!r} "
                            f"(expected an error saying {want!r})")
    check("errors name what is wrong", problems)

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
