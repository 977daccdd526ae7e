#!/usr/bin/env bash
# foreground.sh CMD [ARGS...] runs CMD as the terminal's foreground job, in a
# process group of its own, and exits with its status.
#
# Why: under `make run`, Ctrl-C sends SIGINT to the whole foreground process
# group, make included. make then reports "*** [run] Interrupt" (or Error)
# and exits non-zero although the command shut down cleanly. With job
# control on, bash gives CMD its own process group and hands it the
# terminal, so Ctrl-C reaches CMD alone, and CMD's exit status is the
# command's. Without a terminal (CI, a pipe) there is nothing to hand over
# and CMD simply runs.
set -uo pipefail
if [ -t 0 ]; then
	set -m
fi
"$@"
