"""Only the C extension lives here; everything else is in pyproject.toml.

``groupstream.protocol.records._crecords`` is the consumer's record decoder and the producer's record encoder in
C, built from source by ``pip install`` (``pip install -e .`` builds it in place). It is optional: where it
cannot be compiled (no C compiler or Python headers) the install goes on and the pure-Python decoder and encoder
run instead, slower.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "groupstream.protocol.records._crecords",
            ["src/groupstream/protocol/records/_crecords.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
