"""`wgnn serve --llm DIR` through the official openai Python client (the
exact version of tests/text/openai_requirements.txt, in .venv-openai made
by scripts/setup-openai), on the model folder of text_generate_e2e.py (the
mini Llama and the 211-token ChatML tokenizer):

  - a folder that is none, or lacks tokenizer.json: exit 1 with the reason;
  - GET /v1/models names the folder;
  - a completion (greedy) is `wgnn generate DIR --text`'s text, its usage
    the prompt's and the new tokens' counts; max_tokens ends it with
    finish_reason "length";
  - sampled with a seed, the CLI's sampled text (--temperature, --top-p,
    --seed);
  - a chat completion is `wgnn chat DIR`'s first answer;
  - streamed, the pieces join to the same texts, the last chunk before
    [DONE] holds the usage (stream_options.include_usage), and the raw
    stream is SSE lines ending with "data: [DONE]";
  - stop strings cut the text (finish_reason "stop"), streamed or not;
  - two requests at once are both answered, each with its own text; with
    --queue requests admitted, the next gets 503 with Retry-After;
  - bad requests get 400 with OpenAI's error object (invalid JSON, an
    unknown or mistyped field, no messages, a role that is not system, user
    or assistant, max_tokens < 1, temperature < 0, top_p outside (0, 1],
    n > 1), a wrong method 405, an unknown path or model 404;
  - a client that disconnects mid-stream ends its generation early, and
    the server answers the next request.

usage: serve_openai_test.py WGNN WORKDIR   (under another Python, it runs itself
with .venv-openai's)
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import text_generate_e2e as e2e  # noqa: E402

try:
    import openai
except ImportError:
    # Under another Python (ctest's /usr/bin/python3): .venv-openai's.
    VENV = os.path.join(os.path.dirname(os.path.dirname(HERE)), ".venv-openai")
    VENV_PY = os.path.join(VENV, "bin", "python")
    if os.path.exists(VENV_PY) and os.path.realpath(sys.prefix) != os.path.realpath(VENV):
        os.execv(VENV_PY, [VENV_PY, os.path.abspath(__file__), *sys.argv[1:]])
    sys.exit("the openai client is missing: scripts/setup-openai makes .venv-openai (scripts/setup runs it)")

WGNN, WORK = (os.path.abspath(a) for a in sys.argv[1:3])
passed = failed = 0


def check(name, problems):
    global passed, failed
    if problems:
        failed += 1
        print(f"FAIL {name}: " + "; ".join(problems))
    else:
        passed += 1
        print(f"pass {name}")
    sys.stdout.flush()


def cli(*args, stdin=None):
    p = subprocess.run([WGNN, *args], capture_output=True, text=True, timeout=300, input=stdin)
    if p.returncode != 0:
        raise RuntimeError(f"wgnn {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    return p.stdout


def start_server(folder):
    log = open(os.path.join(WORK, "serve.log"), "w")
    p = subprocess.Popen([WGNN, "serve", "--llm", folder, "--host", "127.0.0.1", "--port", "0", "--queue", "4"],
                         stdout=subprocess.PIPE, stderr=log, text=True)
    t0 = time.time()
    while time.time() - t0 < 120:
        line = p.stdout.readline()
        if not line:
            break
        if "/v1/" in line and "listening on http://" in line:
            port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
            threading.Thread(target=p.stdout.read, daemon=True).start()
            return p, port
    p.kill()
    log.close()
    with open(os.path.join(WORK, "serve.log")) as f:
        raise RuntimeError(f"wgnn serve --llm did not start: {f.read()[-2000:]}")


def raw(port, method, path, body=None, headers=None):
    """(status, parsed JSON or text) of one request through urllib."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def main():
    if os.path.exists(WORK):
        shutil.rmtree(WORK)
    os.makedirs(WORK)
    folder, _ = e2e.make_folder(WORK)
    model = "folder"
    N = 24
    prompts = ["Hello world!", "The quick brown fox."]
    # The references: the CLI's answers.
    ref = {}
    for t in prompts:
        j = json.loads(cli("generate", folder, "--text", t, "--max-new-tokens", str(N), "--json").strip().splitlines()[-1])
        ref[t] = j
    sampled = json.loads(cli("generate", folder, "--text", prompts[0], "--max-new-tokens", str(N), "--temperature",
                             "0.8", "--top-p", "0.9", "--seed", "7", "--json").strip().splitlines()[-1])
    chat_ref = json.loads(cli("chat", folder, "--system", "Be brief.", "--max-new-tokens", "8", "--json",
                              stdin="hi\n").strip().splitlines()[0])

    problems = []
    for bad_dir, want in [(os.path.join(WORK, "nothing"), "not a directory"),
                          (os.path.join(WORK, "llama"), "tokenizer.json")]:
        p = subprocess.run([WGNN, "serve", "--llm", bad_dir, "--port", "0"], capture_output=True, text=True,
                           timeout=120)
        if p.returncode != 1 or want not in p.stderr:
            problems.append(f"--llm {bad_dir}: exit {p.returncode}, stderr {p.stderr.strip()[-300:]!r} (expected 1 "
                            f"and {want!r})")
    check("serve --llm with a bad folder: exit 1, the reason", problems)

    server, port = start_server(folder)
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=120)

        problems = []
        ids = [m.id for m in client.models.list().data]
        if ids != [model]:
            problems.append(f"/v1/models lists {ids}, expected [{model!r}]")
        check("GET /v1/models", problems)

        # ---- completions, greedy: the CLI's text and counts ---------------
        problems = []
        for t in prompts:
            r = client.completions.create(model=model, prompt=t, max_tokens=N, temperature=0)
            want = ref[t]
            c = r.choices[0]
            if c.text != want["text"]:
                problems.append(f"{t!r}: text {c.text!r}, wgnn generate --text gives {want['text']!r}")
            toks = want["tokens"][0]
            if (r.usage.prompt_tokens, r.usage.completion_tokens) != (len(want["prompt_tokens"]), len(toks)):
                problems.append(f"{t!r}: usage {r.usage}, expected {len(want['prompt_tokens'])} prompt and "
                                f"{len(toks)} completion tokens")
            if r.usage.total_tokens != r.usage.prompt_tokens + r.usage.completion_tokens:
                problems.append(f"{t!r}: total_tokens {r.usage.total_tokens}")
            reason = "length" if len(toks) == N else "stop"
            if c.finish_reason != reason:
                problems.append(f"{t!r}: finish_reason {c.finish_reason}, expected {reason}")
            if not r.id.startswith("cmpl-") or r.object != "text_completion" or r.model != model or r.created <= 0:
                problems.append(f"{t!r}: id {r.id!r} object {r.object!r} model {r.model!r} created {r.created}")
        r = client.completions.create(model=model, prompt=prompts[0], max_tokens=3, temperature=0)
        if r.choices[0].finish_reason != "length" or r.usage.completion_tokens != 3:
            problems.append(f"max_tokens 3: finish_reason {r.choices[0].finish_reason}, "
                            f"{r.usage.completion_tokens} tokens")
        check("completions: the CLI's text, usage, finish_reason", problems)

        problems = []
        got = [client.completions.create(model=model, prompt=prompts[0], max_tokens=N, temperature=0.8, top_p=0.9,
                                         seed=7).choices[0].text for _ in range(2)]
        if got != [sampled["text"]] * 2:
            problems.append(f"seed 7: {got}, wgnn generate --temperature 0.8 --top-p 0.9 --seed 7 gives "
                            f"{sampled['text']!r}")
        if sampled["text"] == ref[prompts[0]]["text"]:
            problems.append("the sampled text is the greedy one: a weak test")
        check("sampling: a seed gives the CLI's sampled text", problems)

        # ---- chat: wgnn chat's first answer ------------------------------------
        problems = []
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
        r = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0)
        c = r.choices[0]
        if c.message.content != chat_ref["text"] or c.message.role != "assistant":
            problems.append(f"chat answer {c.message.role}: {c.message.content!r}, wgnn chat gives "
                            f"{chat_ref['text']!r}")
        if r.usage.prompt_tokens != len(chat_ref["prompt_tokens"]) or r.usage.completion_tokens != len(
                chat_ref["tokens"]):
            problems.append(f"chat usage {r.usage}, wgnn chat: {len(chat_ref['prompt_tokens'])} prompt and "
                            f"{len(chat_ref['tokens'])} new tokens")
        if not r.id.startswith("chatcmpl-") or r.object != "chat.completion":
            problems.append(f"chat id {r.id!r} object {r.object!r}")
        check("chat completions: wgnn chat's answer", problems)

        # ---- streaming ----------------------------------------------------------------
        problems = []
        t = prompts[0]
        pieces, usage, reasons = [], None, []
        for ch in client.completions.create(model=model, prompt=t, max_tokens=N, temperature=0, stream=True,
                                            stream_options={"include_usage": True}):
            if ch.usage is not None:
                usage = ch.usage
            for c in ch.choices:
                pieces.append(c.text)
                if c.finish_reason:
                    reasons.append(c.finish_reason)
        if "".join(pieces) != ref[t]["text"]:
            problems.append(f"streamed completion {''.join(pieces)!r}, expected {ref[t]['text']!r}")
        if len([p for p in pieces if p]) < 3:
            problems.append(f"only {len(pieces)} pieces: not streamed token by token")
        if usage is None or usage.completion_tokens != len(ref[t]["tokens"][0]):
            problems.append(f"streamed usage {usage}")
        if reasons != ["length" if len(ref[t]["tokens"][0]) == N else "stop"]:
            problems.append(f"streamed finish_reasons {reasons}")
        deltas, roles = [], []
        for ch in client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0,
                                                 stream=True):
            for c in ch.choices:
                if c.delta.role:
                    roles.append(c.delta.role)
                if c.delta.content:
                    deltas.append(c.delta.content)
        if "".join(deltas) != chat_ref["text"] or roles != ["assistant"]:
            problems.append(f"streamed chat {''.join(deltas)!r} roles {roles}, expected {chat_ref['text']!r}")
        # The raw stream: SSE events, [DONE] last.
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", method="POST",
                                     data=json.dumps({"model": model, "prompt": t, "max_tokens": 5, "temperature": 0,
                                                      "stream": True}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            ctype = resp.headers.get("Content-Type", "")
            body = resp.read().decode()
        events = [e for e in body.split("\n\n") if e]
        if not ctype.startswith("text/event-stream"):
            problems.append(f"stream Content-Type {ctype!r}")
        if not events or events[-1] != "data: [DONE]" or not all(e.startswith("data: ") for e in events):
            problems.append(f"raw stream {body[-300:]!r}: not SSE events ending with data: [DONE]")
        else:
            texts = "".join(json.loads(e[6:])["choices"][0]["text"] for e in events[:-1])
            if not ref[t]["text"].startswith(texts) or not texts:
                problems.append(f"raw stream text {texts!r}")
        check("streaming: pieces join to the text, usage chunk, [DONE]", problems)

        # ---- stop strings -------------------------------------------------------------
        problems = []
        full = ref[t]["text"]
        stripped = full.strip()
        stop = stripped[len(stripped) // 2:len(stripped) // 2 + 2]
        cut = full[:full.index(stop)]
        r = client.completions.create(model=model, prompt=t, max_tokens=N, temperature=0, stop=[stop, "\u00a7never"])
        if r.choices[0].text != cut or r.choices[0].finish_reason != "stop":
            problems.append(f"stop {stop!r}: {r.choices[0].text!r} ({r.choices[0].finish_reason}), expected {cut!r}")
        if r.usage.completion_tokens >= len(ref[t]["tokens"][0]):
            problems.append(f"stop {stop!r}: {r.usage.completion_tokens} tokens generated, not ended early")
        got = "".join(c.text for ch in client.completions.create(model=model, prompt=t, max_tokens=N, temperature=0,
                                                                   stop=stop, stream=True) for c in ch.choices)
        if got != cut:
            problems.append(f"streamed with stop {stop!r}: {got!r}, expected {cut!r}")
        check(f"stop strings ({stop!r})", problems)

        # ---- two at once ---------------------------------------------------------------
        problems = []
        results = {}

        def one(text, stream):
            try:
                if stream:
                    results[text] = "".join(
                        c.text for ch in client.completions.create(model=model, prompt=text, max_tokens=N,
                                                                   temperature=0, stream=True) for c in ch.choices)
                else:
                    results[text] = client.completions.create(model=model, prompt=text, max_tokens=N,
                                                              temperature=0).choices[0].text
            except Exception as e:  # reported below
                results[text] = e

        threads = [threading.Thread(target=one, args=(p, i == 0)) for i, p in enumerate(prompts)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(180)
        for p in prompts:
            if results.get(p) != ref[p]["text"]:
                problems.append(f"{p!r}: {results.get(p)!r}, expected {ref[p]['text']!r}")
        check("two requests at once", problems)

        # ---- errors, raw ------------------------------------------------------------------
        problems = []
        base = {"model": model, "prompt": "hi"}
        chat = {"model": model, "messages": messages}
        cases = [
            ("POST", "/v1/completions", b"{not json", 400, None),
            ("POST", "/v1/completions", {**base, "best_of": 2}, 400, "best_of"),
            ("POST", "/v1/completions", {**base, "max_tokens": "8"}, 400, "max_tokens"),
            ("POST", "/v1/completions", {**base, "max_tokens": 0}, 400, "max_tokens"),
            ("POST", "/v1/completions", {**base, "temperature": -0.5}, 400, "temperature"),
            ("POST", "/v1/completions", {**base, "top_p": 0}, 400, "top_p"),
            ("POST", "/v1/completions", {**base, "top_p": 1.5}, 400, "top_p"),
            ("POST", "/v1/completions", {**base, "n": 2}, 400, "n"),
            ("POST", "/v1/completions", {**base, "stop": 3}, 400, "stop"),
            ("POST", "/v1/completions", {"model": model}, 400, "prompt"),
            ("POST", "/v1/chat/completions", {"model": model}, 400, "messages"),
            ("POST", "/v1/chat/completions", {**chat, "messages": [{"role": "tool", "content": "x"}]}, 400,
             "messages[0].role"),
            ("POST", "/v1/chat/completions", {**chat, "max_completion_tokens": -1}, 400, "max_completion_tokens"),
            ("POST", "/v1/chat/completions", {**chat, "stream": "yes"}, 400, "stream"),
            ("POST", "/v1/chat/completions", {**chat, "model": "other"}, 404, "model"),
            ("GET", "/v1/completions", None, 405, None),
            ("POST", "/v1/models", {}, 405, None),
            ("GET", "/v1/embeddings", None, 404, None),
            ("GET", "/nothing", None, 404, None),
        ]
        for method, path, body, status, param in cases:
            got, j = raw(port, method, path, body)
            err = j.get("error") if isinstance(j, dict) else None
            if got != status:
                problems.append(f"{method} {path} {str(body)[:60]}: {got}, expected {status}")
            elif path.startswith("/v1/") and (not isinstance(err, dict) or not err.get("message") or
                                               set(err) != {"message", "type", "param", "code"} or
                                               (status == 400 and err["type"] != "invalid_request_error") or
                                               (param and err.get("param") != param)):
                problems.append(f"{method} {path} {str(body)[:60]}: error object {j!r} (param {param!r})")
        got, j = raw(port, "POST", "/v1/completions", base, {"Content-Type": "application/x-www-form-urlencoded"})
        if got != 400 or "application/json" not in str(j):
            problems.append(f"a form-encoded body: {got} {j!r}, expected 400 asking for JSON")
        try:
            client.completions.create(model=model, prompt="hi", max_tokens=0)
            problems.append("the client got no error for max_tokens 0")
        except openai.BadRequestError as e:
            if "max_tokens" not in str(e):
                problems.append(f"the client's error for max_tokens 0: {e}")
        check("bad requests: 400, 404, 405 with OpenAI's error object", problems)

        # ---- a full queue: 503 with Retry-After ------------------------------------------
        problems = []
        held = []  # --queue 4 requests admitted, their bodies never finished
        body = json.dumps({"model": model, "prompt": "hi"}).encode()
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: " + str(len(body) + 100).encode() + b"\r\n\r\n" + body)
            held.append(s)
        for _ in range(100):
            if raw(port, "GET", "/health")[1]["in_flight"] == 4:
                break
            time.sleep(0.05)
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", method="POST", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=30)
            problems.append("a fifth request with --queue 4 full was answered")
        except urllib.error.HTTPError as e:
            j = json.loads(e.read().decode())
            if e.code != 503 or not e.headers.get("Retry-After") or "busy" not in j["error"]["message"]:
                problems.append(f"a full queue: {e.code}, Retry-After {e.headers.get('Retry-After')}, {j}")
        for s in held:
            s.close()
        for _ in range(100):
            if raw(port, "GET", "/health")[1]["in_flight"] == 0:
                break
            time.sleep(0.05)
        r = client.completions.create(model=model, prompt=t, max_tokens=N, temperature=0)
        if r.choices[0].text != ref[t]["text"]:
            problems.append(f"after the queue emptied: {r.choices[0].text!r}")
        check("a full queue: 503 with Retry-After, then served again", problems)

        # ---- a client gone mid-stream ----------------------------------------------------
        problems = []
        _, before = raw(port, "GET", "/health")
        body = json.dumps({"model": model, "prompt": t, "max_tokens": 1000, "temperature": 0, "stream": True}).encode()
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        got = b""
        while b"data: {" not in got:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        s.close()
        if b" 200 " not in got.split(b"\r\n")[0] or b"data: {" not in got:
            problems.append(f"the stream did not start: {got[:200]!r}")
        after = None
        for _ in range(100):
            _, after = raw(port, "GET", "/health")
            if after["llm"]["waiting"] == 0 and after["llm"]["runs"] + after["llm"]["not_run"] > \
                    before["llm"]["runs"] + before["llm"]["not_run"]:
                break
            time.sleep(0.1)
        made = after["llm"]["tokens"] - before["llm"]["tokens"]
        if after["llm"]["waiting"] != 0 or made >= 1000:
            problems.append(f"after the disconnect: {after['llm']}, {made} tokens made of max_tokens 1000")
        if after["clients_gone"] <= before["clients_gone"]:
            problems.append(f"clients_gone {before['clients_gone']} -> {after['clients_gone']}")
        r = client.completions.create(model=model, prompt=t, max_tokens=N, temperature=0)
        if r.choices[0].text != ref[t]["text"]:
            problems.append(f"the next request: {r.choices[0].text!r}, expected {ref[t]['text']!r}")
        if server.poll() is not None:
            problems.append(f"the server exited ({server.returncode})")
        check(f"a client gone mid-stream: its run ended ({made} tokens), the next answered", problems)
    finally:
        server.terminate()
        try:
            rc = server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            rc = "killed"
    check("SIGTERM: exit 0", [] if rc == 0 else [f"exit {rc}"])
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
