"""The version-chained migration edges of the session log format (v0 -> v4).

Ships as ``dsh_store.migrations``; one module per adjacent edge.
"""
