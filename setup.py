"""The one compiled part: trace/_scan.c, the fast path of the loader's decoder.

Optional: where no C compiler is found the build goes on without it, and the loader
decodes in Python (the same columns, about 3x slower on a big trace).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kerneltui.trace._scan",
            ["kerneltui/trace/_scan.c"],
            extra_compile_args=["-O3", "-fno-fast-math", "-std=c11", "-D_GNU_SOURCE"],
            optional=True,
        )
    ]
)
