"""The maps stay true to the territory: every link between the project's Markdown files reaches a file and, with an
``#anchor``, one of its headings (GitHub's rule for anchors), and a file's ``Contents:`` list is exactly its ``##``
and ``###`` headings, in order. A section moved from one file to another, or renamed, fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *ROOT.glob("docs/**/*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def headings(text: str, levels: tuple[int, ...] = (1, 2, 3, 4)) -> list[tuple[int, str]]:
    out, fence = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"^(#{1,6}) (.+?)\s*$", line)
        if m and len(m.group(1)) in levels:
            out.append((len(m.group(1)), m.group(2)))
    return out


def anchor(title: str) -> str:
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def test_github_anchor_rule():
    assert anchor("The maths (`alphazero_hpc/evaluate/elo.py`)") == "the-maths-alphazero_hpcevaluateelopy"
    assert anchor("Why the networks stop at ~520: search") == "why-the-networks-stop-at-520-search"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_reaches_its_file_and_heading(doc: Path):
    text = doc.read_text()
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, frag = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif frag and dest.suffix == ".md" and frag not in {anchor(t) for _, t in headings(dest.read_text())}:
            broken.append(f"{target}: no heading with that anchor in {dest.relative_to(ROOT)}")
    assert not broken, f"{doc.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize("doc", [d for d in DOCS if "\nContents:\n" in d.read_text()], ids=lambda p: p.name)
def test_contents_lists_every_section_in_order(doc: Path):
    text = doc.read_text()
    listed = re.findall(r"^\s*- \[[^\]]*\]\(#([^)]+)\)$", text.split("\nContents:\n", 1)[1].split("\n## ", 1)[0], flags=re.M)
    assert listed == [anchor(t) for _, t in headings(text, (2, 3))]


QUOTE = re.compile(r"((?:docs/[\w/-]+|README)\.md)`?,? \(?\"([^\"]{3,100})\"")


def sections(text: str) -> set[str]:
    """What a quoted section name may be: a heading, or the bold words that open a paragraph or a list item."""
    flat = re.sub(r"\s+", " ", text)
    return ({t for _, t in headings(text)} | set(re.findall(r"(?:^|\n)\s*(?:- )?\*\*([^*]+)\*\*", text))
            | set(re.findall(r"(?:^|\n)\s*(?:- )?\*\*([^*]+)\*\*", flat)))


def quoted_sections() -> list[tuple[str, str, str]]:
    files = [*ROOT.glob("*.md"), *ROOT.glob("docs/**/*.md"), *ROOT.glob("docs/**/*.py"), *ROOT.glob("alphazero_hpc/**/*.py"),
             *ROOT.glob("configs/*.yaml"), *ROOT.glob("tests/*.py"), *ROOT.glob("slurm/**/*.sh")]
    found = []
    for f in files:
        flat = re.sub(r"\s+", " ", re.sub(r"\n\s*#+ ?", " ", f.read_text()))  # comments wrapped over lines read as one
        found += [(str(f.relative_to(ROOT)), doc, title) for doc, title in QUOTE.findall(flat)]
    return found


def test_every_quoted_section_is_in_the_file_it_names():
    """A Markdown file named, then a section in quotes: that file has a heading or a bold paragraph opening with
    those words (a moved or renamed section fails here)."""
    cache: dict[str, set[str]] = {}
    missing = []
    for where, doc, title in quoted_sections():
        names = cache.setdefault(doc, sections((ROOT / doc).read_text()) if (ROOT / doc).exists() else set())
        if not any(n.startswith(title) or title.startswith(n.rstrip(".:")) for n in names):
            missing.append(f'{where}: {doc}, "{title}"')
    assert len(quoted_sections()) > 20 and not missing, "\n".join(missing)
