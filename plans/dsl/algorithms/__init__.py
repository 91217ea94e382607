# SPDX-License-Identifier: MIT
# planccl's algorithms written in the plan DSL; plans/dsl/generate.py lists the plans they make.
