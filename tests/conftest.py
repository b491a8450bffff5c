"""Suite-wide settings."""
import os

# A process that finds no ahead-of-time kernel library starts building one in the background
# (lite/kernels/compiled/aot/first_use.py). The suite does not: each test runs on the kernels it finds when it
# starts, whatever a build beside it finishes meanwhile, and the build's CPU stays out of the suite's time.
# tests/lite/kernels/compiled/test_aot.py turns it on where it tests it.
os.environ.setdefault("MSLITE_AOT_BUILD", "0")
