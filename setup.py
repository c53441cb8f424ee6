"""The optional compiled record decoder of the Spark source (`replog/spark/_batch_decode.c`).

Everything else about the package is in pyproject.toml. `optional=True`: without a C compiler
the install still succeeds and `replog.spark.batch_columns` uses its numpy decoder
(`batch_columns.DECODER` says which one runs). `pip install -e .` builds the module in place.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "replog.spark._batch_decode",
            ["replog/spark/_batch_decode.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
