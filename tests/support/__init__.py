"""Helpers the test areas share. Nothing here imports ``vault`` at import time of the package itself: a child
process running another release imports ``tests.support.file_keyring`` beside that release's code."""
