"""Rewrite docs/report-schema.md's generated field tables from report.json's models.

    python scripts/report_schema_doc.py          # rewrite the doc in place
    python scripts/report_schema_doc.py --check  # exit 1 when the doc differs from the models
"""

from __future__ import annotations

import sys
from pathlib import Path

from station.report.schema_doc import render_doc

DOC = Path(__file__).resolve().parent.parent / "docs" / "report-schema.md"


def main(argv: list[str]) -> int:
    text = DOC.read_text(encoding="utf-8")
    rendered = render_doc(text)
    if "--check" in argv:
        if rendered != text:
            print(f"{DOC} differs from the models: run python scripts/report_schema_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(rendered, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
