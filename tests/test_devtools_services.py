"""``devtools.services.Postgres``: URLs parsed and rendered, and the server helpers the tests and the bench use."""

from __future__ import annotations

from devtools.services import Postgres, configured_postgres, find_postgres, skip_or_fail


def test_a_url_is_parsed_into_its_server_and_database_and_rendered_back():
    server, database = Postgres.parse("postgresql+psycopg2://bench%40ci:p%2Fw@db.example.com:6543/findings")
    assert (server.host, server.port, server.user, server.password, database) == (
        "db.example.com", 6543, "bench@ci", "p/w", "findings")
    assert server.url(database) == "postgresql://bench%40ci:p%2Fw@db.example.com:6543/findings"
    assert "p/w" not in repr(server)
    bare, default_database = Postgres.parse("postgresql://")
    assert (bare, default_database) == (configured_postgres(), "postgres")


def test_the_server_helpers_on_a_real_postgresql():
    server, reason = find_postgres()
    if server is None:
        skip_or_fail(reason)
    assert server.version()[0].isdigit()
    with server.temporary_database("services_test") as database:
        conn = server.connect(database)
        try:
            with conn.cursor() as cur:
                cur.execute("CREATE TABLE t (x int)")
        finally:
            conn.close()
        server.empty_database(database)
        server.checkpoint(database)
        conn = server.connect(database)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
                assert cur.fetchone() == (0,)
        finally:
            conn.close()
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (database,))
            assert cur.fetchone() == (0,)
    finally:
        conn.close()
