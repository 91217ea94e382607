# SPDX-License-Identifier: MIT
# planccl's plan DSL: write a collective as ranks, buffers, channels and ops; compile() checks it
# (signal/wait pairing, data flow), fuses ops, adds the syncs it needs and emits executor JSON.
from .errors import DslError, line_of
from .emit import op_count, render
from .program import (LL, MEMORY, PORT, SIMPLE, Chunk, Program, ThreadBlockGroup)

__all__ = ["DslError", "LL", "MEMORY", "PORT", "SIMPLE", "Chunk", "Program", "ThreadBlockGroup",
           "line_of", "op_count", "render"]
