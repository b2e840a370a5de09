"""Alembic environment of the warehouse: runs on the connection the caller passes, never on a URL of its own.

``findings_provider.warehouse.versioning`` builds the Alembic configuration in code (there is no alembic.ini) and
puts an open SQLAlchemy connection in ``config.attributes["connection"]``; when that connection is already in a
transaction (``Warehouse.create_all`` holds the schema lock in it), Alembic runs inside it and the caller commits.
"""

from __future__ import annotations

from alembic import context
from findings_provider.warehouse.schema import metadata
from findings_provider.warehouse.versioning import VERSION_TABLE


def run_migrations() -> None:
    """Run the requested command on the passed connection, recording versions in ``VERSION_TABLE``."""
    if context.is_offline_mode():
        raise RuntimeError("offline (--sql) migrations are not supported: upgrade a database through a connection")
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError(
            "no connection in config.attributes['connection']: build the configuration with "
            "findings_provider.warehouse.versioning.alembic_config(connection)"
        )
    context.configure(
        connection=connection,
        target_metadata=metadata,  # what `revision --autogenerate` compares the database with
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters most things by copying the table
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
