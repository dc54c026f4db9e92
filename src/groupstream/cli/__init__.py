"""The ``groupstream`` command line."""
