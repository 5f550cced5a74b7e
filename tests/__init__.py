"""scratchvault's test suite, a package: tests and their helpers import as ``tests.*`` (``tests.support`` holds
what several areas share); child processes find it through PYTHONPATH (``tests.support.repository``)."""
