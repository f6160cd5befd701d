import sys

from lumber.compiler.cli import main

sys.exit(main())
