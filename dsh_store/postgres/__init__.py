"""The PostgreSQL backend: session logs as rows, one per event, keeping each record's bytes.

Importing this package imports the psycopg driver only when a store is used (the
``postgres`` extra); :mod:`dsh_store.postgres.url` needs no driver at all. The schema,
the locking and the failure model are documented in ``docs/postgres.md``.
"""
