import sys

from groupstream.cli.main import main

sys.exit(main())
