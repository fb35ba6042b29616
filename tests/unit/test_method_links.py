"""Every link into METHOD.md that the report's code writes lands on a heading there."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_method_anchor_is_a_heading():
    anchors = {_slug(m) for m in re.findall(r"^#+ (.+)$", (ROOT / "METHOD.md").read_text(), re.M)}
    used = {(f.name, a) for f in (ROOT / "benchlib").rglob("*") if f.suffix in {".py", ".j2"}
            for a in re.findall(r"METHOD\.md#([\w-]+)", f.read_text())}
    assert used, "no link into METHOD.md found: the pattern is wrong"
    assert not [(f, a) for f, a in used if a not in anchors], anchors
