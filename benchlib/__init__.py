"""benchlib: reproducible measurements of PostgreSQL-backed job queues.

Everything that runs, measures and renders lives here; notebooks only call in.

Importing benchlib keeps `rfc3987_syntax` from loading. Altair imports jsonschema, whose format
checker imports rfc3987_syntax when it is installed (Jupyter's `jsonschema[format-nongpl]`
installs it), and that module builds ~35 Earley parsers at import: 2-3.4 s of every kernel,
CLI call and test worker on this project's 2-core machine, before anything was measured (2 to
3 minutes of the 65 notebook runs of the standard profile). Its only use is jsonschema's `iri`
format check, which neither Vega-Lite's schema nor ours uses; a None in sys.modules makes the
import fail, and jsonschema leaves that one check out (python-jsonschema/jsonschema#1428).
"""
from __future__ import annotations

import sys

sys.modules.setdefault("rfc3987_syntax", None)  # must run before altair or jsonschema is imported

from benchlib.errors import BenchError  # noqa: E402

__all__ = ["BenchError"]
