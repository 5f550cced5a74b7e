"""A writer or reader of the database files: tampering, rollback, row ids, damaged rows, what the files show."""
