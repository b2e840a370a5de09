"""Parse time of one DAG file, measured the way Airflow's DAG processor measures it.

The DAG processor (Airflow 3) has Airflow imported, pre-imports the ``airflow.*`` modules that the file names
(``_pre_import_airflow_modules``), then forks a child that runs ``_parse_file``: the DAG-stability check, a
``BundleDagBag`` of the one file, and the serialisation of every DAG in it. This script does the same in a fresh
interpreter: the untimed part is importing ``airflow.dag_processing.processor``, pre-importing the file's
Airflow modules and freezing the objects made so far out of the garbage collector's reach (``gc.freeze()``, which
the processor manager does before it forks a parser, so a parse does not scan Airflow's own objects); the timed
part is the processor's own ``_parse_file`` on the file. Everything the DAG file imports besides Airflow (the
provider, the pipeline configuration) is paid inside the timed part, as in the processor.

    python bench/dag_parse.py --file dags/findings_extraction.py --out parse.json
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from pathlib import Path

from common import PROJECT_DIR, write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    path = Path(args.file).resolve()
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="bench-airflow-home-"))
    os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(path.parent))
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

    started = time.perf_counter()
    import structlog
    from airflow.dag_processing import processor

    processor._pre_import_airflow_modules(str(path), structlog.get_logger("bench"))
    gc.freeze()  # as DagFileProcessorManager.before_run does before forking the parsers
    setup_s = time.perf_counter() - started

    request = processor.DagFileParseRequest(file=str(path), bundle_path=path.parent, bundle_name="dags-folder")
    started = time.perf_counter()
    result = processor._parse_file(request, structlog.get_logger("bench"))
    parse_s = time.perf_counter() - started
    write_json(args.out, {
        "file": str(path.relative_to(PROJECT_DIR)) if path.is_relative_to(PROJECT_DIR) else str(path),
        "parse_s": parse_s,
        "setup_s": setup_s,
        "dag_ids": [dag.dag_id for dag in result.serialized_dags] if result else [],
        "import_errors": dict(result.import_errors) if result and result.import_errors else {},
    })


if __name__ == "__main__":
    main()
