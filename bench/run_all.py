"""`make bench`: `bench/run.py suite` (see there). Kept for the Makefile.

.venv/bin/python bench/run_all.py [--quick] [--render] [--from NAME]
"""

import sys

from run import main

if __name__ == "__main__":
    main(["suite", *sys.argv[1:]])
