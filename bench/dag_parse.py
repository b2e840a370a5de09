"""Parse time of one DAG file, measured the way Airflow's DAG processor measures it.

The DAG processor (Airflow 3) has Airflow imported, pre-imports the ``airflow.*`` modules that the file names
(``_pre_import_airflow_modules``), then forks a child that runs ``_parse_file``: the DAG-stability check, a
``BundleDagBag`` of the one file, and the serialisation of every DAG in it. This script does the same in a fresh
interpreter: the untimed part is importing ``airflow.dag_processing.processor``, pre-importing the file's
Airflow modules and freezing the objects made so far out of the garbage collector's reach (``gc.freeze()``, which
the processor manager does before it forks a parser, so a parse does not scan Airflow's own objects); the timed
part is the processor's own ``_parse_file`` on the file. Everything the DAG file imports besides Airflow (the
provider, the pipeline configuration) is paid inside the timed part, as in the processor.

It measures the steady state of a deployment, where Python wrote the bytecode (``__pycache__``) of the provider
and of the DAG file the first time they were imported: before the timed part the script compiles both (untimed;
only what is missing or stale), so the figure does not depend on ``PYTHONDONTWRITEBYTECODE``, under which every
parse would compile the provider's source again. The provider's import and the DAG file's execution stay timed.

    python bench/dag_parse.py --file dags/findings_extraction.py --out parse.json
"""

from __future__ import annotations

import argparse
import compileall
import gc
import importlib.util
import os
import time
from pathlib import Path

from common import PROJECT_DIR, scratch_airflow_home, write_json


def compile_bytecode(dag_file: Path) -> None:
    """Write the bytecode a deployment has after its first parse: the provider's modules and the DAG file's (the
    DAG processor's loader reads and writes the DAG file's ``__pycache__`` like any import). Up-to-date files are
    left alone; the provider is found without importing it."""
    spec = importlib.util.find_spec("findings_provider")
    for package_dir in (spec.submodule_search_locations or []) if spec else []:
        compileall.compile_dir(package_dir, quiet=1)
    compileall.compile_file(dag_file, quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    path = Path(args.file).resolve()
    scratch_airflow_home()
    os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(path.parent))
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

    started = time.perf_counter()
    compile_bytecode(path)
    import structlog
    from airflow.dag_processing import processor

    processor._pre_import_airflow_modules(str(path), structlog.get_logger("bench"))
    gc.freeze()  # as DagFileProcessorManager.before_run does before forking the parsers
    setup_s = time.perf_counter() - started

    request = processor.DagFileParseRequest(file=str(path), bundle_path=path.parent, bundle_name="dags-folder")
    started, cpu_started = time.perf_counter(), time.process_time()
    result = processor._parse_file(request, structlog.get_logger("bench"))
    parse_s, parse_cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    write_json(args.out, {
        "file": str(path.relative_to(PROJECT_DIR)) if path.is_relative_to(PROJECT_DIR) else str(path),
        "parse_s": parse_s,
        "parse_cpu_s": parse_cpu_s,
        "setup_s": setup_s,
        "dag_ids": [dag.dag_id for dag in result.serialized_dags] if result else [],
        "import_errors": dict(result.import_errors) if result and result.import_errors else {},
    })


if __name__ == "__main__":
    main()
