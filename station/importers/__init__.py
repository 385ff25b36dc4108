"""`station import`: raw data measured without the station (the seed modules' FIFO dumps,
cyclictest output, scope captures as CSV) made into a results directory that `station
report` reads like any campaign. docs/import.md has the formats and options.

    source.py      a file's bytes and checksum, format detection, ImportInputError
    dump.py        legacy / v1 record dumps (decoded by station/parsers/records.py)
    scope_csv.py   scope captures, one row per pulse
    cyclictest.py  --json files, -h histogram text, status lines
    results_dir.py the target directory: checks, run directories through RunStore, campaign.json
"""

from station.importers.results_dir import (
    ImportedRun,
    ImportOptions,
    ImportResult,
    import_files,
    run_id_of,
)
from station.importers.source import FORMATS, ImportInputError

__all__ = ["FORMATS", "ImportInputError", "ImportOptions", "ImportResult", "ImportedRun",
           "import_files",
           "run_id_of"]
