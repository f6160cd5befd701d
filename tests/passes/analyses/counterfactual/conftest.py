"""Puts this directory on sys.path so tests can import the brute-force oracle (cf_brute)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
