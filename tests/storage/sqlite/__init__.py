"""The SQLite store: its file layout, schema versions and the files it keeps on disk."""
