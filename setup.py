"""The optional compiled modules: the Spark source's record decoder
(`replog/spark/_batch_decode.c`) and the log cleaner's span scan (`replog/record/_record_spans.c`).

Everything else about the package is in pyproject.toml. `optional=True`: without a C compiler
the install still succeeds, `replog.spark.batch_columns` uses its numpy decoder
(`batch_columns.DECODER` says which one runs) and `replog.record.record_spans` its Python scan
(`record_spans.SCANNER`). `pip install -e .` builds the modules in place.
"""

from __future__ import annotations

import os
import shutil

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class ReplacingBuildExt(build_ext):
    """An editable install copies the built module into the checkout: as a new file put in
    place of the old one, so a process that has the old one loaded (a test run, a Spark
    worker) keeps it; rewriting a loaded module's file in place can crash that process."""

    def copy_file(
        self, infile: str, outfile: str, *args: object, **kwargs: object
    ) -> tuple[str, bool]:
        if os.path.isdir(outfile):
            outfile = os.path.join(outfile, os.path.basename(infile))
        temporary = f"{outfile}.{os.getpid()}.tmp"
        shutil.copy2(infile, temporary)
        os.replace(temporary, outfile)
        return outfile, True


setup(
    cmdclass={"build_ext": ReplacingBuildExt},
    ext_modules=[
        Extension(
            "replog.spark._batch_decode",
            ["replog/spark/_batch_decode.c"],
            extra_compile_args=["-O2"],
            depends=["replog/record/_varint.h"],
            optional=True,
        ),
        Extension(
            "replog.record._record_spans",
            ["replog/record/_record_spans.c"],
            extra_compile_args=["-O2"],
            depends=["replog/record/_varint.h"],
            optional=True,
        ),
    ],
)
