"""The README a newcomer reads first, and the documentation's references:
  - README.md is at most 250 lines and starts with the two set-up commands
    (scripts/demo, scripts/test) in one block;
  - every relative link of README.md and docs/*.md names a file that exists
    (and, with #anchor, a heading of that file);
  - every plain-text mention of a docs/ page, a script or a source file
    (docs/NAME.md, scripts/NAME, bench/NAME, tests/.../NAME.py) in README.md
    and docs/*.md names a file that exists, so that moving a section
    cannot leave its readers pointing at nothing.
The site itself is built by mkdocs --strict (ctest docs_site).

usage: docs_test.py REPO_ROOT
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))


def slug(heading):
    """The anchor a Markdown renderer (Python-Markdown's toc, GitHub) gives a heading."""
    s = re.sub(r"[`*_\[\]()]", "", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s)
    return re.sub(r"[ ]+", "-", s).strip("-")


def anchors(path):
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def main():
    problems = []
    readme = os.path.join(ROOT, "README.md")
    lines = open(readme, encoding="utf-8").read().split("\n")
    if len(lines) > 251:
        problems.append(f"README.md has {len(lines)} lines; at most 250")
    head = "\n".join(lines[:6])
    if not re.match(r"# wgnn\n\n```sh\nscripts/demo .*\nscripts/test .*\n```", head):
        problems.append("README.md does not start with the two set-up commands (scripts/demo, scripts/test)")
    pages = [readme] + sorted(os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                              if f.endswith(".md"))
    checked = 0
    for page in pages:
        text = open(page, encoding="utf-8").read()
        here = os.path.dirname(page)
        name = os.path.relpath(page, ROOT)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path, _, frag = target.partition("#")
            full = os.path.normpath(os.path.join(here, path))
            checked += 1
            if not os.path.exists(full):
                problems.append(f"{name}: link to {target}: no such file")
            elif frag and full.endswith(".md") and frag not in anchors(full):
                problems.append(f"{name}: link to {target}: {path} has no heading #{frag}")
        for ref in set(re.findall(r"(?<![\w/.-])((?:docs|scripts|bench|tests)/[\w./-]*\w)", text)):
            if "*" in ref or "<" in ref or ref.startswith("docs/results/") and not ref.endswith((".md", ".jsonl", ".txt", ".json")):
                continue
            checked += 1
            if not os.path.exists(os.path.join(ROOT, ref)):
                problems.append(f"{name}: mentions {ref}, which does not exist")
    for p in problems:
        print("FAIL", p)
    print(f"{checked} links and mentions in {len(pages)} pages checked; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
