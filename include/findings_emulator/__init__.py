"""Local emulator of the security findings management API (FastAPI on uvicorn, SQLite via SQLAlchemy).

Start it with ``findings-emulator`` or ``python -m findings_emulator``; drive it from tests with
:class:`findings_emulator.testing.EmulatorProcess`.
"""

__version__ = "0.1.0"
