#!/usr/bin/env python3
"""Writes the fixtures of tests/text/ into tests/data/text/: small tokenizers
trained here with Hugging Face's `tokenizers` on text written below, the ids
and decodes that Python's tokenizers gives for varied strings, and chat
templates rendered by Python's jinja2 the way transformers'
apply_chat_template renders them. The C++ tests (tests/text/*_test.cpp)
check text/ against these exactly.

Run through scripts/text-fixtures (a venv with the pinned tokenizers and
jinja2 of tests/text/requirements.txt); the output is committed, so the
tests need no Python package.

  bpe_bytelevel.json  byte-level BPE with a Llama-3-like split regex
                      (lookahead) and a <|begin_of_text|> template
  wordpiece.json      BERT-like: lowercasing normalizer, WordPiece, [CLS] ...
                      [SEP]
  unigram.json        SentencePiece-like: Unigram over Metaspace, <s> first
  bpe_bytefallback.json
                      Llama-2 / Mistral-like: BPE over "▁"-joined text
                      (Prepend and Replace normalizers), <0xNN> byte tokens
                      for characters it lacks, the decoder Replace,
                      ByteFallback, Fuse, Strip; <s> first
  chatml_211.json     a BPE of exactly 211 tokens (the vocabulary of
                      scripts/models/decoders.py's mini models) with ChatML's
                      special tokens: the tokenizer of the model folder in
                      tests/data/text/chatml_folder/
"""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox
import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "text")

CORPUS = [
    "The quick brown fox jumps over the lazy dog while the cat watches from the window.",
    "A tokenizer turns text into numbers, and a decoder turns the numbers back into text.",
    "Generation runs one token at a time; the cache keeps the keys and values of earlier tokens.",
    "Hello world! How are you today? I'm fine, thanks. Let's write some code: for (int i = 0; i < 10; ++i) {}",
    "Numbers like 3.14159, 2026, 1,000,000 and 42 appear in text too.",
    "Caf\u00e9, na\u00efve, r\u00e9sum\u00e9, \u00fcber, Stra\u00dfe, \u00f1and\u00fa: accents and letters beyond ASCII.",
    "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3082\u5c11\u3057\u3002\u4e2d\u6587\u4e5f\u6709\u4e00\u70b9\u3002\ud55c\uad6d\uc5b4\ub3c4.",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0393\u03b5\u03b9\u03b1 \u03c3\u03bf\u03c5 \u03ba\u03cc\u03c3\u03bc\u03b5.",
    "Emoji: \U0001F600 \U0001F680 \u2764\ufe0f \U0001F44D\U0001F3FD and flags \U0001F1EB\U0001F1F7.",
    "    indented lines\n\ttabs\tand\ttabs\n\nblank lines, trailing spaces   \n",
    "def greet(name):\n    return f\"Hello, {name}!\"\n\nprint(greet('world'))\n",
    "The assistant answers the user's question briefly and politely.",
    "Once upon a time there was a small model that learned to speak a few words.",
] * 8

# Strings whose ids and decodes the fixtures hold: unicode, emoji, runs of
# whitespace, special tokens inside text, characters the corpus never had.
CASES = [
    "Hello world!",
    "The quick brown fox.",
    "",
    " ",
    "   leading and trailing spaces   ",
    "tabs\tand\nnewlines\n\n\nand   runs     of spaces",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber Stra\u00dfe",
    "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0 \u4e2d\u6587 \ud55c\uad6d\uc5b4",
    "Emoji \U0001F600\U0001F680 \u2764\ufe0f \U0001F44D\U0001F3FD \U0001F1EB\U0001F1F7 \U0001F9D1\u200d\U0001F4BB",
    "unseen: \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35 \u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 \U0001F98A",
    "code: for (int i = 0; i < 10; ++i) { x[i] = i * 2; }",
    "Numbers 3.14159 and 1,000,000 and 2026-12-06",
    "MiXeD CaSe and UPPER words",
    "don't won't it's I'm we'll",
]

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def bpe_bytelevel():
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B:1",
                                      special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))]),
    ])
    return tok, specials


def wordpiece():
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=None, clean_text=True,
                                                handle_chinese_chars=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    trainer = trainers.WordPieceTrainer(vocab_size=500, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return tok, specials


def unigram():
    specials = ["<unk>", "<s>", "</s>", "<start_of_turn>", "<end_of_turn>"]
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first")
    trainer = trainers.UnigramTrainer(vocab_size=400, special_tokens=specials, unk_token="<unk>",
                                      show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B:1",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return tok, specials


def bpe_bytefallback():
    specials = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"]
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    ascii_corpus = [line.replace(" ", "\u2581") for line in CORPUS if line.isascii()]
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(ascii_corpus, trainer)
    # The 256 byte tokens in the model's vocabulary (as SentencePiece
    # exports have them), after what training gave.
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B:1",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return tok, specials


def chatml_211():
    specials = ["<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    ascii_corpus = [line for line in CORPUS if line.isascii()]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=211, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(ascii_corpus, trainer)
    n = tok.get_vocab_size(with_added_tokens=True)
    if n < 211:  # fill up to the models' vocabulary with unused special tokens
        tok.add_special_tokens([f"<unused_{i}>" for i in range(211 - n)])
    assert tok.get_vocab_size(with_added_tokens=True) == 211, tok.get_vocab_size(with_added_tokens=True)
    return tok, specials


def tokenizer_fixture(name, tok, specials):
    path = os.path.join(OUT, name + ".json")
    tok.save(path)
    tok = Tokenizer.from_file(path)  # what the C++ side loads
    cases = []
    for text in CASES + [f"{specials[1]} inside {specials[-1]}text{specials[-1]} and after"]:
        ids = tok.encode(text, add_special_tokens=True).ids
        plain = tok.encode(text, add_special_tokens=False).ids
        cases.append({
            "text": text,
            "ids": ids,
            "ids_no_special": plain,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip": tok.decode(ids, skip_special_tokens=True),
        })
    return {
        "tokenizer": name + ".json",
        "vocab_size": tok.get_vocab_size(with_added_tokens=True),
        "token_to_id": {t: tok.token_to_id(t) for t in specials + ["the", "\u2581the", "no such token \U0001F600"]},
        "cases": cases,
    }


# ---- chat templates, as transformers renders them --------------------------

def render(template, messages, add_generation_prompt, bos, eos):
    """transformers' apply_chat_template: a sandboxed jinja2 environment with
    trim_blocks, lstrip_blocks and loop controls, its tojson filter,
    raise_exception and strftime_now."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(template).render(messages=messages, tools=None, documents=None,
                                            add_generation_prompt=add_generation_prompt, bos_token=bos,
                                            eos_token=eos)


LLAMA3_STYLE = """{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {%- set system = messages[0]['content'] | trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system = "You are a helpful assistant." %}
{%- endif %}
{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' + system + '<|eot_id|>' }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

CHATML_STYLE = """{%- for message in messages %}
    {%- if loop.first and messages[0]['role'] != 'system' %}
        {{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
    {{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

GEMMA_STYLE = """{{ bos_token }}
{% if messages[0]['role'] == 'system' %}
{{ raise_exception('System role not supported') }}
{% endif %}
{% for message in messages %}
{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
{% endif %}
{% if message['role'] == 'assistant' %}
{% set role = 'model' %}
{% else %}
{% set role = message['role'] %}
{% endif %}
{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}
{% endfor %}
{% if add_generation_prompt %}
{{'<start_of_turn>model\\n'}}
{% endif %}
"""

# Python's str and dict methods, tojson, namespace, loop controls and the
# whitespace rules on indented block tags.
PYCOMPAT = """{% set ns = namespace(count=0) %}
{% for message in messages %}
    {% if message.role == 'user' %}
        {% set ns.count = ns.count + 1 %}
    {% endif %}
    {% if message.content.strip().startswith('STOP') %}
        {% break %}
    {% endif %}
  [{{ message.role.upper() }}] {{ message.content.strip() | replace('\\n', ' / ') }}
    {% for key, value in message.items() %}
        {% if key not in ['role', 'content'] %}
    {{ key }}={{ value | tojson }}
        {% endif %}
    {% endfor %}
{% endfor %}
users: {{ ns.count }}; first: {{ messages[0] | tojson }}
words: {{ messages[-1].content.split() | length }}; {{ messages | length }} messages
{{ {'a': [1, 2.5, none, true], 'b': {'c': 'd"e'}} | tojson(indent=2) }}
{% if add_generation_prompt %}>>> {% endif %}"""

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "  Be brief.  "}, {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3+3?\n"}],
    [{"role": "user", "content": "Caf\u00e9 \U0001F600 \u65e5\u672c\n\ttabs"},
     {"role": "assistant", "content": "  spaced  answer  "}],
    [{"role": "user", "content": "two\nlines", "name": "ann", "score": 3},
     {"role": "assistant", "content": "ok", "tags": ["x", "y\u00e9"]},
     {"role": "user", "content": " STOP here "}, {"role": "assistant", "content": "never shown"}],
]


def template_fixture():
    out = []
    for name, template, bos, eos in [("llama3_style", LLAMA3_STYLE, "<|begin_of_text|>", "<|eot_id|>"),
                                     ("chatml_style", CHATML_STYLE, "", "<|im_end|>"),
                                     ("gemma_style", GEMMA_STYLE, "<bos>", "<eos>"),
                                     ("pycompat", PYCOMPAT, "<s>", "</s>")]:
        cases = []
        for messages in CONVERSATIONS:
            for gen in (True, False):
                try:
                    cases.append({"messages": messages, "add_generation_prompt": gen,
                                  "expected": render(template, messages, gen, bos, eos)})
                except jinja2.exceptions.TemplateError as e:
                    cases.append({"messages": messages, "add_generation_prompt": gen, "error": str(e)})
        out.append({"name": name, "template": template, "bos_token": bos, "eos_token": eos, "cases": cases})
    return out


def chatml_folder(tok):
    """The text files of a model folder (tokenizer.json, tokenizer_config.json,
    generation_config.json); the end-to-end test adds a decoder. Also the
    prompt of a first chat turn (system "Be brief.", user "hi") as
    apply_chat_template(tokenize=True) gives it: rendered, then encoded
    without adding special tokens."""
    folder = os.path.join(OUT, "chatml_folder")
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    first_turn = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    rendered = render(CHATML_STYLE, first_turn, True, "", "<|im_end|>")
    with open(os.path.join(OUT, "chatml_first_turn.json"), "w") as f:
        json.dump({"messages": first_turn, "prompt": rendered,
                   "prompt_tokens": tok.encode(rendered, add_special_tokens=False).ids}, f, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                   "chat_template": CHATML_STYLE, "model_max_length": 160}, f, indent=2, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")],
                   "max_new_tokens": 24}, f, indent=2)
        f.write("\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    fixtures = []
    for name, make in [("bpe_bytelevel", bpe_bytelevel), ("wordpiece", wordpiece), ("unigram", unigram),
                       ("bpe_bytefallback", bpe_bytefallback), ("chatml_211", chatml_211)]:
        tok, specials = make()
        fixtures.append(tokenizer_fixture(name, tok, specials))
        if name == "chatml_211":
            chatml_folder(tok)
    meta = {"tokenizers": tokenizers.__version__, "jinja2": jinja2.__version__}
    with open(os.path.join(OUT, "tokenizer_cases.json"), "w") as f:
        json.dump({"made_with": meta, "fixtures": fixtures}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(OUT, "chat_template_cases.json"), "w") as f:
        json.dump({"made_with": meta, "templates": template_fixture()}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(OUT) for n in ns)
    print(f"make_fixtures: wrote {OUT} ({total} bytes; tokenizers {meta['tokenizers']}, jinja2 {meta['jinja2']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
