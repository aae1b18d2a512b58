#!/usr/bin/env bash
# The README's two commands, run from a clone on Debian or Ubuntu:
#   bash packaging/setup.sh app    the window's system libraries, a virtual environment at .venv,
#                                  Distloop with its window in it, then the app (arguments go to it)
#   bash packaging/setup.sh test   the tests' system packages, the same .venv, Distloop editable
#                                  with the test tools, then pytest (arguments go to it)
# A venv because Debian's and Ubuntu's python3 refuse `pip install` outside one (PEP 668).
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-}"
case "$what" in
  app | test) shift ;;
  *) echo "usage: bash packaging/setup.sh app|test [ARGUMENTS]" >&2; exit 2 ;;
esac
bash packaging/install-linux-deps.sh "$what"
if [ ! -x .venv/bin/python ]; then
  # Debian's python3 makes a venv only with python3-venv (its ensurepip)
  python3 -c 'import ensurepip, venv' 2>/dev/null || bash packaging/install-linux-deps.sh venv
  python3 -m venv .venv
fi
if [ "$what" = app ]; then
  echo "distloop: installing Distloop into .venv (TensorFlow and Qt: a few minutes the first time)" >&2
  .venv/bin/python -m pip install -q '.[gui]'
  exec .venv/bin/distloop "$@"
fi
# pip's warnings about its configured indexes would fill CI's excerpt of the output
.venv/bin/python -m pip install -q -e '.[test]' 2> >(grep -v '^WARNING: Location ' >&2)
# An editable install leaves the checkout's modules uncompiled: the first start would compile
# them all (pip compiles the app's own install above).
.venv/bin/python -m compileall -q engine gui resources >/dev/null
# -u: each result is written as it comes, so output cut off (a CI time limit) shows how far
# the run got; block-buffered, the last 8 KiB were lost
exec .venv/bin/python -u -m pytest "$@"
