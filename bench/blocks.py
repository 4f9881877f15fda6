"""Where the benches' tables live: the marked blocks of README.md and the pages of docs/.

A bench ends by printing its table between `<!-- bench:NAME TABLE; refresh: COMMAND -->` and `<!-- /bench -->`
(`bench.common.readme_block`); the page quoting it holds the same block. `tests/test_bench.py` reads every page's
blocks through `doc_blocks`, and `refresh_blocks` pastes a new run's block into whichever page holds it:

    python -m bench.bench_formats | tee formats.txt | python -m bench.blocks    # prints the pages it rewrote
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.common import ROOT

# <!-- bench:NAME TABLE; refresh: COMMAND --> the table <!-- /bench -->, as readme_block prints it
BLOCK = re.compile(
    r"<!-- bench:(\w+) (\w+); refresh: (python -m bench\.(\w+)[^\n]*?) -->\n(.*?)\n<!-- /bench -->", re.S
)


@dataclass(frozen=True)
class Block:
    """One marked block of a page: where it is, whose table it is, the command that refreshes it, the table."""

    page: Path
    bench: str
    table: str
    command: str
    body: str

    @property
    def text(self) -> str:
        """The block as it stands in its page, markers included."""
        return f"<!-- bench:{self.bench} {self.table}; refresh: {self.command} -->\n{self.body}\n<!-- /bench -->"


def doc_pages(root: Path = ROOT) -> list[Path]:
    """The pages a bench's block may live in: README.md and every page of docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def doc_blocks(root: Path = ROOT) -> list[Block]:
    """Every marked block of every page, in page order."""
    return [
        Block(page, bench, table, command, body)
        for page in doc_pages(root)
        for bench, table, command, _module, body in BLOCK.findall(page.read_text())
    ]


def refresh_blocks(output: str, root: Path = ROOT) -> list[Path]:
    """Each block a bench printed in `output` replaces, verbatim, the block of the same bench and table in the
    page that holds it (where several pages hold one, as a run with other options does, the one whose refresh
    command is the printed one). Returns the pages written. A printed block that no page holds, or that
    several hold alike, is a LookupError, and then nothing is written."""
    held = doc_blocks(root)
    texts = {page: page.read_text() for page in doc_pages(root)}
    for bench, table, command, _module, body in BLOCK.findall(output):
        same = [b for b in held if (b.bench, b.table) == (bench, table)]
        if len(same) > 1:
            same = [b for b in same if b.command == command]
        if len(same) != 1:
            raise LookupError(f"{bench} {table} ({command}): held by {len(same)} pages under {root}, not one")
        new = Block(same[0].page, bench, table, command, body)
        texts[new.page] = texts[new.page].replace(same[0].text, new.text, 1)
    written = [page for page, text in texts.items() if text != page.read_text()]
    for page in written:
        page.write_text(texts[page])
    return written


if __name__ == "__main__":
    print(*(page.relative_to(ROOT) for page in refresh_blocks(sys.stdin.read())), sep="\n")
