"""Rewrite the generated field tables of docs/report-schema.md (report.json's models) and
docs/manifest-schema.md (manifest.json's).

    python scripts/report_schema_doc.py          # rewrite the docs in place
    python scripts/report_schema_doc.py --check  # exit 1 when a doc differs from the models
"""

from __future__ import annotations

import sys
from pathlib import Path

from station.report.schema_doc import manifest_tables, render_doc, tables

DOCS = Path(__file__).resolve().parent.parent / "docs"


def main(argv: list[str]) -> int:
    status = 0
    for doc, generated in ((DOCS / "report-schema.md", tables()), (DOCS / "manifest-schema.md", manifest_tables())):
        text = doc.read_text(encoding="utf-8")
        rendered = render_doc(text, generated)
        if "--check" in argv:
            if rendered != text:
                print(f"{doc} differs from the models: run python scripts/report_schema_doc.py", file=sys.stderr)
                status = 1
            continue
        doc.write_text(rendered, encoding="utf-8")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
