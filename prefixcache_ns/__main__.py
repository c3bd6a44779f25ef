"""``python -m prefixcache``: the same command as the ``prefixcache`` console script."""

import sys

from prefixcache.cli.app import main

if __name__ == "__main__":
    sys.exit(main())
